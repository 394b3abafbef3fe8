//! Hostile input, one row per attack: malformed or abusive request heads, bodies
//! and WebSocket frames, each with the exact HTTP status or close code a client
//! gets back. This table is the contract of D2 ("bad input gets a clear error").

use wire::{
    parse_head, parse_ws_frame, route, ws_client_frame, BodyDecoder, BodyKind, Limits, Opcode,
    WsMessageState,
};

/// The status a head gets: from `parse_head`, then from `route`; 200 if routed.
fn head_status(buf: &[u8]) -> u16 {
    match parse_head(buf, &Limits::default()) {
        Err(e) => e.status(),
        Ok(None) => panic!("incomplete: {:?}", String::from_utf8_lossy(buf)),
        Ok(Some((h, _))) => route(&h).map_or_else(|e| e.status(), |_| 200),
    }
}

/// The status a body gets (200 if it decodes completely).
fn body_status(kind: BodyKind, limit: usize, input: &[u8]) -> u16 {
    let mut out = Vec::new();
    match BodyDecoder::new(kind, limit).handle_bytes(input, &mut out) {
        Ok((_, true)) => 200,
        Ok((_, false)) => panic!("incomplete body: {:?}", String::from_utf8_lossy(input)),
        Err(e) => e.status(),
    }
}

/// The close code a stream of client frames gets (1000 if all are fine).
fn frames_close_code(buf: &[u8], max_payload: usize) -> u16 {
    let mut state = WsMessageState::new();
    let mut pos = 0;
    while pos < buf.len() {
        match parse_ws_frame(&buf[pos..], max_payload) {
            Err(e) => return e.close_code(),
            Ok(None) => panic!("incomplete frame at {pos}: {buf:x?}"),
            Ok(Some((frame, n))) => {
                if let Err(e) = state.handle_frame(&frame) {
                    return e.close_code();
                }
                pos += n;
            }
        }
    }
    1000
}

fn get(extra: &str) -> Vec<u8> {
    format!("GET /sub/1 HTTP/1.1\r\nHost: h\r\n{extra}\r\n").into_bytes()
}

fn post(extra: &str) -> Vec<u8> {
    format!("POST /pub/1 HTTP/1.1\r\nHost: h\r\n{extra}\r\n").into_bytes()
}

fn upgrade(replace: (&str, &str)) -> Vec<u8> {
    "GET /ws/1 HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
     Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        .replace(replace.0, replace.1)
        .into_bytes()
}

const M: [u8; 4] = [1, 2, 3, 4];

#[test]
fn hostile_heads() {
    let oversize = format!("GET /sub/1 HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(9000));
    let many = format!("GET /sub/1 HTTP/1.1\r\n{}\r\n", "X: y\r\n".repeat(33));
    let long_target = format!("GET /sub/{} HTTP/1.1\r\n\r\n", "1".repeat(8200));
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("sane baseline", get(""), 200),
        ("no version (HTTP/0.9)", b"GET /sub/1\r\n\r\n".to_vec(), 400),
        ("empty method", b" /sub/1 HTTP/1.1\r\n\r\n".to_vec(), 400),
        (
            "double space in request line",
            b"GET  /sub/1 HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "tab separators",
            b"GET\t/sub/1\tHTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "garbage version",
            b"GET /sub/1 HTTQ/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "lowercase version",
            b"GET /sub/1 http/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "HTTP/2.0 request line",
            b"GET /sub/1 HTTP/2.0\r\n\r\n".to_vec(),
            505,
        ),
        ("HTTP/1.2", b"GET /sub/1 HTTP/1.2\r\n\r\n".to_vec(), 505),
        (
            "HTTP/0.9 with version",
            b"GET /sub/1 HTTP/0.9\r\n\r\n".to_vec(),
            505,
        ),
        (
            "binary garbage",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n".to_vec(),
            400,
        ),
        ("header without colon", get("Host-no-colon\r\n"), 400),
        ("space before colon", get("Host : h\r\n"), 400),
        ("empty header name", get(": v\r\n"), 400),
        ("bad byte in header name", get("X@Y: 1\r\n"), 400),
        ("NUL in header value", get("X: a\0b\r\n"), 400),
        (
            "NUL in path",
            b"GET /sub/\x001 HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "control char in path",
            b"GET /sub/\x011 HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        ("obs-fold continuation line", get("X: a\r\n  b\r\n"), 400),
        (
            "CR without LF",
            b"GET /sub/1 HTTP/1.1\rHost: h\r\n\r\n".to_vec(),
            400,
        ),
        ("oversize head", oversize.into_bytes(), 431),
        ("oversize target", long_target.into_bytes(), 431),
        ("33 headers", many.into_bytes(), 431),
        (
            "negative Content-Length",
            post("Content-Length: -1\r\n"),
            400,
        ),
        ("plus Content-Length", post("Content-Length: +5\r\n"), 400),
        ("hex Content-Length", post("Content-Length: 0x10\r\n"), 400),
        ("empty Content-Length", post("Content-Length: \r\n"), 400),
        (
            "Content-Length with inner space",
            post("Content-Length: 1 0\r\n"),
            400,
        ),
        (
            "Content-Length overflow",
            post("Content-Length: 18446744073709551616\r\n"),
            400,
        ),
        (
            "huge Content-Length",
            post("Content-Length: 99999999999999999999999\r\n"),
            400,
        ),
        (
            "conflicting Content-Length headers",
            post("Content-Length: 5\r\nContent-Length: 6\r\n"),
            400,
        ),
        (
            "conflicting Content-Length list",
            post("Content-Length: 5, 6\r\n"),
            400,
        ),
        (
            "empty list member in Content-Length",
            post("Content-Length: 5,\r\n"),
            400,
        ),
        (
            "CL + TE (smuggling)",
            post("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"),
            400,
        ),
        (
            "TE + CL (smuggling, other order)",
            post("Transfer-Encoding: chunked\r\nContent-Length: 0\r\n"),
            400,
        ),
        ("TE: gzip", post("Transfer-Encoding: gzip\r\n"), 501),
        (
            "TE: gzip, chunked",
            post("Transfer-Encoding: gzip, chunked\r\n"),
            501,
        ),
        (
            "TE: chunked, chunked",
            post("Transfer-Encoding: chunked, chunked\r\n"),
            501,
        ),
        ("TE: identity", post("Transfer-Encoding: identity\r\n"), 501),
        (
            "TE: chunked with parameter",
            post("Transfer-Encoding: chunked;q=1\r\n"),
            501,
        ),
        (
            "TE in HTTP/1.0",
            b"POST /pub/1 HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(),
            400,
        ),
        (
            "Expect other than 100-continue",
            post("Expect: 101-switch\r\n"),
            417,
        ),
        (
            "non-numeric Last-Event-ID",
            get("Last-Event-ID: abc\r\n"),
            400,
        ),
        ("negative Last-Event-ID", get("Last-Event-ID: -1\r\n"), 400),
        (
            "duplicate Authorization",
            get("Authorization: a\r\nAuthorization: b\r\n"),
            400,
        ),
        (
            "non-UTF-8 Authorization",
            get("Authorization: \u{0}\r\n")
                .iter()
                .map(|&b| if b == 0 { 0xff } else { b })
                .collect(),
            400,
        ),
        ("upgrade via POST", upgrade(("GET", "POST")), 400),
        (
            "upgrade on HTTP/1.0",
            upgrade(("HTTP/1.1", "HTTP/1.0")),
            400,
        ),
        (
            "upgrade without Connection: upgrade",
            upgrade(("Connection: Upgrade", "Connection: keep-alive")),
            400,
        ),
        (
            "upgrade, version 8",
            upgrade(("Version: 13", "Version: 8")),
            400,
        ),
        (
            "upgrade, no version",
            upgrade(("Sec-WebSocket-Version: 13\r\n", "")),
            400,
        ),
        (
            "upgrade, key not base64",
            upgrade(("dGhlIHNhbXBsZSBub25jZQ==", "%%%%")),
            400,
        ),
        (
            "upgrade, key of 15 bytes",
            upgrade(("dGhlIHNhbXBsZSBub25jZQ==", "AAAAAAAAAAAAAAAAAAAA")),
            400,
        ),
        (
            "upgrade, two keys",
            upgrade((
                "Host: h\r\n",
                "Host: h\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
            )),
            400,
        ),
        (
            "/ws without upgrade",
            b"GET /ws/1 HTTP/1.1\r\n\r\n".to_vec(),
            426,
        ),
        (
            "id with leading zero",
            b"GET /sub/01 HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        ("negative id", b"GET /sub/-1 HTTP/1.1\r\n\r\n".to_vec(), 400),
        (
            "id overflow",
            b"GET /sub/18446744073709551616 HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        ("empty id", b"GET /sub/ HTTP/1.1\r\n\r\n".to_vec(), 400),
        (
            "percent-encoded id",
            b"GET /sub/%31 HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "bad since",
            b"GET /poll/1?since=-5 HTTP/1.1\r\n\r\n".to_vec(),
            400,
        ),
        (
            "trailing slash",
            b"GET /sub/1/ HTTP/1.1\r\n\r\n".to_vec(),
            404,
        ),
        (
            "path traversal",
            b"GET /sub/../stats HTTP/1.1\r\n\r\n".to_vec(),
            404,
        ),
        ("unknown path", b"GET /admin HTTP/1.1\r\n\r\n".to_vec(), 404),
        (
            "unknown method",
            b"BREW /sub/1 HTTP/1.1\r\n\r\n".to_vec(),
            405,
        ),
        (
            "lowercase method",
            b"get /sub/1 HTTP/1.1\r\n\r\n".to_vec(),
            405,
        ),
        (
            "HEAD on a stream",
            b"HEAD /sub/1 HTTP/1.1\r\n\r\n".to_vec(),
            405,
        ),
        (
            "DELETE /stats",
            b"DELETE /stats HTTP/1.1\r\n\r\n".to_vec(),
            405,
        ),
    ];
    assert!(cases.len() >= 40);
    let mut failures = Vec::new();
    for (name, buf, want) in &cases {
        let got = head_status(buf);
        if got != *want {
            failures.push(format!("{name}: want {want}, got {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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

#[test]
fn hostile_frames() {
    const MAX: usize = 1024;
    let cat = |frames: &[Vec<u8>]| frames.concat();
    let close = |payload: &[u8]| ws_client_frame(Opcode::Close, true, M, payload);
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        (
            "sane text",
            ws_client_frame(Opcode::Text, true, M, b"hi"),
            1000,
        ),
        ("unmasked client frame", vec![0x81, 0x02, b'h', b'i'], 1002),
        ("RSV1 without extension", vec![0xc1, 0x80, 1, 2, 3, 4], 1002),
        ("RSV2", vec![0xa1, 0x80, 1, 2, 3, 4], 1002),
        ("RSV3", vec![0x91, 0x80, 1, 2, 3, 4], 1002),
        ("reserved data opcode 3", vec![0x83, 0x80, 1, 2, 3, 4], 1002),
        (
            "reserved control opcode 0xB",
            vec![0x8b, 0x80, 1, 2, 3, 4],
            1002,
        ),
        (
            "fragmented ping",
            ws_client_frame(Opcode::Ping, false, M, b"p"),
            1002,
        ),
        (
            "fragmented close",
            ws_client_frame(Opcode::Close, false, M, b""),
            1002,
        ),
        (
            "ping of 126 bytes",
            ws_client_frame(Opcode::Ping, true, M, &[0; 126]),
            1002,
        ),
        (
            "pong of 64 KiB",
            ws_client_frame(Opcode::Pong, true, M, &[0; 65536]),
            1002,
        ),
        (
            "16-bit length for 5 bytes",
            vec![0x81, 0xfe, 0, 5, 1, 2, 3, 4, 0, 0, 0, 0, 0],
            1002,
        ),
        (
            "64-bit length for 200 bytes",
            [&[0x82, 0xff, 0, 0, 0, 0, 0, 0, 0, 200][..], &[0; 204]].concat(),
            1002,
        ),
        (
            "64-bit length with top bit",
            vec![0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1],
            1002,
        ),
        (
            "payload over max",
            ws_client_frame(Opcode::Binary, true, M, &[0; MAX + 1])[..8].to_vec(),
            1009,
        ),
        (
            "2^62 payload announced",
            vec![0x82, 0xff, 0x40, 0, 0, 0, 0, 0, 0, 0],
            1009,
        ),
        ("close with 1-byte payload", close(b"\x03"), 1002),
        ("close code 999", close(&999u16.to_be_bytes()), 1002),
        (
            "close code 1004 (reserved)",
            close(&1004u16.to_be_bytes()),
            1002,
        ),
        (
            "close code 1005 on the wire",
            close(&1005u16.to_be_bytes()),
            1002,
        ),
        (
            "close code 1006 on the wire",
            close(&1006u16.to_be_bytes()),
            1002,
        ),
        (
            "close code 1015 on the wire",
            close(&1015u16.to_be_bytes()),
            1002,
        ),
        ("close code 2999", close(&2999u16.to_be_bytes()), 1002),
        ("close code 5000", close(&5000u16.to_be_bytes()), 1002),
        ("close reason not UTF-8", close(b"\x03\xe8\xc3\x28"), 1007),
        (
            "text not UTF-8",
            ws_client_frame(Opcode::Text, true, M, b"\xff"),
            1007,
        ),
        (
            "text with UTF-16 surrogate",
            ws_client_frame(Opcode::Text, true, M, b"\xed\xa0\x80"),
            1007,
        ),
        (
            "text with overlong NUL",
            ws_client_frame(Opcode::Text, true, M, b"\xc0\x80"),
            1007,
        ),
        (
            "text above U+10FFFF",
            ws_client_frame(Opcode::Text, true, M, b"\xf4\x90\x80\x80"),
            1007,
        ),
        (
            "continuation without start",
            ws_client_frame(Opcode::Continuation, true, M, b"x"),
            1002,
        ),
        (
            "new text while fragmented",
            cat(&[
                ws_client_frame(Opcode::Text, false, M, b"a"),
                ws_client_frame(Opcode::Text, true, M, b"b"),
            ]),
            1002,
        ),
        (
            "binary while text is fragmented",
            cat(&[
                ws_client_frame(Opcode::Text, false, M, b"a"),
                ws_client_frame(Opcode::Binary, true, M, b"b"),
            ]),
            1002,
        ),
        (
            "fragments ending mid code point",
            cat(&[
                ws_client_frame(Opcode::Text, false, M, b"\xe2\x82"),
                ws_client_frame(Opcode::Continuation, true, M, b""),
            ]),
            1007,
        ),
        (
            "invalid UTF-8 in a middle fragment",
            cat(&[
                ws_client_frame(Opcode::Text, false, M, b"ok"),
                ws_client_frame(Opcode::Continuation, false, M, b"\xff"),
                ws_client_frame(Opcode::Continuation, true, M, b"ok"),
            ]),
            1007,
        ),
        (
            "valid code point split across fragments, with a ping between",
            cat(&[
                ws_client_frame(Opcode::Text, false, M, b"\xe2"),
                ws_client_frame(Opcode::Ping, true, M, b""),
                ws_client_frame(Opcode::Continuation, true, M, b"\x82\xac"),
            ]),
            1000,
        ),
    ];
    let mut failures = Vec::new();
    for (name, buf, want) in &cases {
        let got = frames_close_code(buf, MAX);
        if got != *want {
            failures.push(format!("{name}: want {want}, got {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
