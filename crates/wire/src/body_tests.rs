//! Unit tests for `body`.

use super::*;

/// Feeds `input` in pieces of the given sizes (cycled), collecting output.
fn feed(
    kind: BodyKind,
    limit: usize,
    input: &[u8],
    pieces: &[usize],
) -> Result<(Vec<u8>, usize, bool), BodyError> {
    let mut d = BodyDecoder::new(kind, limit);
    let mut out = Vec::new();
    let mut pos = 0;
    let mut k = 0;
    loop {
        let end = (pos + pieces[k % pieces.len()]).min(input.len());
        k += 1;
        let (n, done) = d.handle_bytes(&input[pos..end], &mut out)?;
        assert!(n <= end - pos);
        pos += n;
        if done || end == input.len() && n == 0 {
            return Ok((out, pos, done));
        }
    }
}

#[test]
fn none_and_zero_length_are_done_at_once() {
    let mut out = Vec::new();
    assert_eq!(
        BodyDecoder::new(BodyKind::None, 0).handle_bytes(b"GET", &mut out),
        Ok((0, true))
    );
    assert_eq!(
        BodyDecoder::new(BodyKind::Length(0), 0).handle_bytes(b"", &mut out),
        Ok((0, true))
    );
    assert!(BodyDecoder::new(BodyKind::None, 0).is_done());
    assert!(out.is_empty());
}

#[test]
fn fixed_length_split_anywhere() {
    let input = b"hello worldGET /next";
    for split in 0..=input.len() {
        let mut d = BodyDecoder::new(BodyKind::Length(11), 100);
        let mut out = Vec::new();
        let (a, done_a) = d.handle_bytes(&input[..split], &mut out).unwrap();
        assert_eq!(a, split.min(11));
        assert_eq!(done_a, split >= 11);
        let (b, done_b) = d.handle_bytes(&input[a..], &mut out).unwrap();
        assert!(done_b);
        assert_eq!(a + b, 11);
        assert_eq!(out, b"hello world");
    }
}

#[test]
fn fixed_length_over_limit() {
    let mut out = Vec::new();
    let mut d = BodyDecoder::new(BodyKind::Length(11), 10);
    assert_eq!(d.handle_bytes(b"", &mut out), Err(BodyError::TooLarge));
    assert_eq!(BodyError::TooLarge.status(), 413);
}

const CHUNKED: &[u8] =
    b"5\r\nhello\r\n6;name=val\r\n world\r\nA \t;x\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nNEXT";
const DECODED: &[u8] = b"hello world0123456789";

#[test]
fn chunked_whole() {
    let (out, n, done) = feed(BodyKind::Chunked, 1000, CHUNKED, &[usize::MAX]).unwrap();
    assert!(done);
    assert_eq!(out, DECODED);
    assert_eq!(&CHUNKED[n..], b"NEXT");
}

#[test]
fn chunked_split_anywhere() {
    let body_len = CHUNKED.len() - 4;
    for split in 0..=CHUNKED.len() {
        for second in 0..=CHUNKED.len() - split {
            let mut d = BodyDecoder::new(BodyKind::Chunked, 1000);
            let mut out = Vec::new();
            let (a, _) = d.handle_bytes(&CHUNKED[..split], &mut out).unwrap();
            assert_eq!(a, split.min(body_len));
            let (b, _) = d
                .handle_bytes(&CHUNKED[a..a + second.min(CHUNKED.len() - a)], &mut out)
                .unwrap();
            let (c, done) = d.handle_bytes(&CHUNKED[a + b..], &mut out).unwrap();
            assert!(done, "split {split}/{second}");
            assert_eq!(a + b + c, body_len);
            assert_eq!(out, DECODED);
        }
    }
}

#[test]
fn chunked_byte_by_byte_and_odd_pieces() {
    for pieces in [&[1][..], &[2, 3], &[7, 1, 13]] {
        let (out, n, done) = feed(BodyKind::Chunked, 1000, CHUNKED, pieces).unwrap();
        assert!(done);
        assert_eq!(out, DECODED);
        assert_eq!(n, CHUNKED.len() - 4);
    }
}

#[test]
fn done_decoder_consumes_nothing_more() {
    let mut d = BodyDecoder::new(BodyKind::Chunked, 10);
    let mut out = Vec::new();
    assert_eq!(d.handle_bytes(b"0\r\n\r\n", &mut out), Ok((5, true)));
    assert_eq!(d.handle_bytes(b"more", &mut out), Ok((0, true)));
    assert!(out.is_empty());
}

#[test]
fn chunked_limit_counts_decoded_bytes() {
    let ok = b"5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n";
    assert!(feed(BodyKind::Chunked, 10, ok, &[3]).unwrap().2);
    // Refused as soon as the size line announcing the excess is read, before data.
    let mut d = BodyDecoder::new(BodyKind::Chunked, 9);
    let mut out = Vec::new();
    assert_eq!(
        d.handle_bytes(b"5\r\nhello\r\n5\r", &mut out),
        Err(BodyError::TooLarge)
    );
}

#[test]
fn chunked_malformed() {
    let cases: &[(&[u8], &str)] = &[
        (b"\r\n", "bad chunk size"),
        (b"x\r\n", "bad chunk size"),
        (b"-1\r\n", "bad chunk size"),
        (b"5x\r\n", "bad chunk size"),
        (b"5\n", "bare LF after chunk size"),
        (b"5\rx", "missing LF after chunk size"),
        (b"5 \r\n", "whitespace after chunk size"),
        (b"5\r\nhelloX", "missing CRLF after chunk data"),
        (b"5\r\nhello\rX", "missing CRLF after chunk data"),
        (b"00000000000000005\r\n", "chunk size too long"),
        (b"0\r\nX: \x00\r\n\r\n", "bad byte in trailer"),
        (b"0\r\n\rX", "missing final CRLF"),
        (b"0\r\nX: 1\rX", "missing LF in trailer"),
        (b"1;\x01\r\n", "bad byte in chunk extension"),
    ];
    for (input, want) in cases {
        let got = feed(BodyKind::Chunked, usize::MAX, input, &[usize::MAX]);
        assert_eq!(
            got,
            Err(BodyError::Malformed(want)),
            "{:?}",
            String::from_utf8_lossy(input)
        );
        assert_eq!(BodyError::Malformed(want).status(), 400);
    }
}

#[test]
fn chunked_bounds_on_extensions_and_trailers() {
    let ext = format!("1;{}\r\nx\r\n0\r\n\r\n", "a".repeat(MAX_CHUNK_EXT as usize));
    assert!(
        feed(BodyKind::Chunked, 10, ext.as_bytes(), &[usize::MAX])
            .unwrap()
            .2
    );
    let ext = format!("1;{}\r\n", "a".repeat(MAX_CHUNK_EXT as usize + 1));
    assert_eq!(
        feed(BodyKind::Chunked, 10, ext.as_bytes(), &[5]),
        Err(BodyError::Malformed("chunk extension too long"))
    );
    let trailer = format!(
        "0\r\n{}\r\n\r\n",
        "T: v\r\n".repeat(MAX_TRAILER as usize / 6 + 1)
    );
    assert_eq!(
        feed(BodyKind::Chunked, 10, trailer.as_bytes(), &[64]),
        Err(BodyError::Malformed("trailer too long"))
    );
}

#[test]
fn sixteen_hex_digits_fit_without_overflow() {
    let mut d = BodyDecoder::new(BodyKind::Chunked, usize::MAX);
    let mut out = Vec::new();
    assert_eq!(
        d.handle_bytes(b"ffffffffffffffff\r\nab", &mut out),
        Ok((20, false))
    );
    assert_eq!(out, b"ab");
    let mut d = BodyDecoder::new(BodyKind::Chunked, 1 << 20);
    assert_eq!(
        d.handle_bytes(b"ffffffffffffffff\r\n", &mut out),
        Err(BodyError::TooLarge)
    );
}

#[test]
fn decoder_is_small() {
    // Lives in the connection slab only while a request body is in flight.
    assert!(std::mem::size_of::<BodyDecoder>() <= 32);
}
