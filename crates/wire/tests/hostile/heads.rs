//! Hostile request heads: each row's exact status from `parse_head`, then `route`.

use wire::{parse_head, route, Limits};

/// The status a head gets: from `parse_head`, then from `route`; 200 if routed.
fn head_status(buf: &[u8]) -> u16 {
    match parse_head(buf, &Limits::default()) {
        Err(e) => e.status(),
        Ok(None) => panic!("incomplete: {:?}", String::from_utf8_lossy(buf)),
        Ok(Some((h, _))) => route(&h).map_or_else(|e| e.status(), |_| 200),
    }
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
