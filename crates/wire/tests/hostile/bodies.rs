//! Hostile request bodies: each row's exact status from the body decoder.

use wire::{BodyDecoder, BodyKind};

/// The status a body gets (200 if it decodes completely).
fn body_status(kind: BodyKind, limit: usize, input: &[u8]) -> u16 {
    let mut out = Vec::new();
    match BodyDecoder::new(kind, limit).handle_bytes(input, &mut out) {
        Ok((_, true)) => 200,
        Ok((_, false)) => panic!("incomplete body: {:?}", String::from_utf8_lossy(input)),
        Err(e) => e.status(),
    }
}

#[test]
fn hostile_bodies() {
    const LIMIT: usize = 64;
    let long_ext = format!("1;{}\r\nx\r\n0\r\n\r\n", "e".repeat(300));
    let long_trailer = format!(
        "0\r\n{}\r\n\r\n",
        "T: vvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\r\n".repeat(200)
    );
    let cases: Vec<(&str, BodyKind, &[u8], u16)> = vec![
        (
            "sane chunked",
            BodyKind::Chunked,
            b"3\r\nabc\r\n0\r\n\r\n",
            200,
        ),
        ("Content-Length over limit", BodyKind::Length(65), b"", 413),
        (
            "Content-Length u64::MAX",
            BodyKind::Length(u64::MAX),
            b"x",
            413,
        ),
        ("empty chunk size", BodyKind::Chunked, b"\r\nabc", 400),
        ("non-hex chunk size", BodyKind::Chunked, b"zz\r\n", 400),
        (
            "negative chunk size",
            BodyKind::Chunked,
            b"-3\r\nabc\r\n",
            400,
        ),
        ("0x prefix", BodyKind::Chunked, b"0x3\r\nabc\r\n", 400),
        (
            "chunk size with 17 digits",
            BodyKind::Chunked,
            b"00000000000000003\r\nabc\r\n",
            400,
        ),
        (
            "chunk size overflow",
            BodyKind::Chunked,
            b"10000000000000000\r\n",
            400,
        ),
        ("chunk size over limit", BodyKind::Chunked, b"41\r\n", 413),
        (
            "huge chunk size",
            BodyKind::Chunked,
            b"ffffffffffffffff\r\n",
            413,
        ),
        (
            "sum of chunks over limit",
            BodyKind::Chunked,
            b"20\r\naaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n21\r\n",
            413,
        ),
        (
            "bare LF after size",
            BodyKind::Chunked,
            b"3\nabc\r\n0\r\n\r\n",
            400,
        ),
        (
            "space after size",
            BodyKind::Chunked,
            b"3 \r\nabc\r\n0\r\n\r\n",
            400,
        ),
        (
            "data longer than size",
            BodyKind::Chunked,
            b"3\r\nabcd\r\n0\r\n\r\n",
            400,
        ),
        (
            "missing CRLF after data",
            BodyKind::Chunked,
            b"3\r\nabc0\r\n\r\n",
            400,
        ),
        (
            "LF only after data",
            BodyKind::Chunked,
            b"3\r\nabc\n0\r\n\r\n",
            400,
        ),
        (
            "chunk extension too long",
            BodyKind::Chunked,
            long_ext.as_bytes(),
            400,
        ),
        (
            "control byte in extension",
            BodyKind::Chunked,
            b"3;\x00\r\nabc\r\n0\r\n\r\n",
            400,
        ),
        (
            "trailer section too long",
            BodyKind::Chunked,
            long_trailer.as_bytes(),
            400,
        ),
        (
            "NUL in trailer",
            BodyKind::Chunked,
            b"0\r\nX: \x00\r\n\r\n",
            400,
        ),
        (
            "bare LF ending the body",
            BodyKind::Chunked,
            b"0\r\n\n",
            400,
        ),
    ];
    let mut failures = Vec::new();
    for (name, kind, input, want) in &cases {
        let got = body_status(*kind, LIMIT, input);
        if got != *want {
            failures.push(format!("{name}: want {want}, got {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
