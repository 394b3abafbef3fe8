//! Unit tests for `head` (kept apart to keep `head.rs` short).

use super::*;
use crate::since::Since;

fn parse(buf: &[u8]) -> Result<Option<(RequestHead, usize)>, HeadError> {
    parse_head(buf, &Limits::default())
}

fn head(buf: &[u8]) -> RequestHead {
    parse(buf).unwrap().expect("complete head").0
}

fn err(buf: &[u8]) -> HeadError {
    parse(buf).unwrap_err()
}

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

fn ws_request(extra: &str) -> String {
    format!(
        "GET /ws/1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {KEY}\r\n{extra}\r\n"
    )
}

#[test]
fn default_limits() {
    let l = Limits::default();
    assert_eq!((l.max_head, l.max_headers), (8192, 32));
}

#[test]
fn simple_get() {
    let buf = b"GET /sub/42?x=1&y HTTP/1.1\r\nHost: a\r\n\r\n";
    let (h, n) = parse(buf).unwrap().unwrap();
    assert_eq!(n, buf.len());
    assert_eq!(h.method, Method::Get);
    assert_eq!(h.path, "/sub/42");
    assert_eq!(h.query.as_deref(), Some("x=1&y"));
    assert_eq!(h.minor_version, 1);
    assert!(h.keep_alive);
    assert_eq!(h.body, BodyKind::None);
    assert!(!h.accept_event_stream && !h.expect_continue);
    assert_eq!(h.websocket, None);
    assert_eq!(h.last_event_id, None);
    assert_eq!(h.authorization, None);
}

#[test]
fn methods() {
    for (m, want) in [
        ("GET", Method::Get),
        ("HEAD", Method::Head),
        ("POST", Method::Post),
        ("PUT", Method::Put),
        ("DELETE", Method::Delete),
        ("OPTIONS", Method::Options),
        ("PATCH", Method::Other),
        ("get", Method::Other),
    ] {
        assert_eq!(
            head(format!("{m} / HTTP/1.1\r\n\r\n").as_bytes()).method,
            want
        );
    }
}

#[test]
fn partial_heads_wait_for_more() {
    let buf = b"GET /stats HTTP/1.1\r\nHost: a\r\n\r\n";
    for cut in 0..buf.len() {
        assert_eq!(parse(&buf[..cut]), Ok(None), "cut at {cut}");
    }
}

#[test]
fn pipelined_heads_consume_one_at_a_time() {
    let buf = b"GET /a HTTP/1.1\r\n\r\nPOST /pub/1 HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET /c HTTP/1.1\r\n\r\n";
    let (a, n1) = parse(buf).unwrap().unwrap();
    assert_eq!((a.path.as_str(), n1), ("/a", 19));
    let (b, n2) = parse(&buf[n1..]).unwrap().unwrap();
    assert_eq!(b.path, "/pub/1");
    assert_eq!(b.body, BodyKind::Length(2));
    assert_eq!(&buf[n1 + n2..n1 + n2 + 2], b"hi");
    let (c, n3) = parse(&buf[n1 + n2 + 2..]).unwrap().unwrap();
    assert_eq!(c.path, "/c");
    assert_eq!(n1 + n2 + 2 + n3, buf.len());
}

#[test]
fn keep_alive_rules() {
    assert!(head(b"GET / HTTP/1.1\r\n\r\n").keep_alive);
    assert!(!head(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive);
    assert!(!head(b"GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n").keep_alive);
    assert!(!head(b"GET / HTTP/1.0\r\n\r\n").keep_alive);
    let h = head(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    assert!(h.keep_alive);
    assert_eq!(h.minor_version, 0);
}

#[test]
fn content_length_forms() {
    assert_eq!(
        head(b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n").body,
        BodyKind::Length(10)
    );
    assert_eq!(
        head(b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").body,
        BodyKind::None
    );
    assert_eq!(
        head(b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n").body,
        BodyKind::Length(5)
    );
    assert_eq!(
        head(b"POST / HTTP/1.1\r\nContent-Length: 7, 7\r\n\r\n").body,
        BodyKind::Length(7)
    );
    assert_eq!(
        head(b"POST / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n").body,
        BodyKind::Length(u64::MAX)
    );
    assert_eq!(
        err(b"POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n"),
        HeadError::ConflictingContentLength
    );
}

#[test]
fn chunked_forms() {
    for te in ["chunked", "Chunked", " chunked "] {
        let req = format!("POST / HTTP/1.1\r\nTransfer-Encoding: {te}\r\n\r\n");
        assert_eq!(head(req.as_bytes()).body, BodyKind::Chunked, "{te:?}");
    }
    assert_eq!(
        err(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
        HeadError::UnsupportedTransferEncoding
    );
    assert_eq!(
        err(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n").status(),
        400
    );
}

#[test]
fn sse_hints() {
    let h = head(b"GET /sub/1 HTTP/1.1\r\nAccept: text/html, Text/Event-Stream;q=1\r\nLast-Event-ID: 99\r\n\r\n");
    assert!(h.accept_event_stream);
    assert_eq!(
        h.last_event_id,
        Some(vec![Some(Since {
            epoch: None,
            seq: 99
        })])
    );
    let h = head(b"GET /sub/1 HTTP/1.1\r\nLast-Event-ID: 3-99\r\n\r\n");
    assert_eq!(
        h.last_event_id,
        Some(vec![Some(Since {
            epoch: Some(3),
            seq: 99
        })])
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nLast-Event-ID: 099\r\n\r\n"),
        HeadError::BadLastEventId
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nLast-Event-ID: 1-2-3\r\n\r\n"),
        HeadError::BadLastEventId
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nLast-Event-ID: x\r\n\r\n"),
        HeadError::BadLastEventId
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nLast-Event-ID: \r\n\r\n"),
        HeadError::BadLastEventId
    );
}

#[test]
fn authorization_and_expect() {
    let h = head(b"POST / HTTP/1.1\r\nAuthorization: Bearer abc.def\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n");
    assert_eq!(h.authorization.as_deref(), Some("Bearer abc.def"));
    assert!(h.expect_continue);
    let h = head(b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n");
    assert!(!h.expect_continue);
    assert_eq!(
        err(b"POST / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n").status(),
        417
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nAuthorization: a\r\nauthorization: b\r\n\r\n").status(),
        400
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nAuthorization: \xff\xfe\r\n\r\n").status(),
        400
    );
}

#[test]
fn websocket_upgrade_valid() {
    let h = head(ws_request("").as_bytes());
    assert_eq!(
        h.websocket,
        Some(WsUpgrade {
            key: KEY.to_owned()
        })
    );
    let req = ws_request("")
        .replace("Connection: Upgrade", "Connection: keep-alive, Upgrade")
        .replace("websocket", "WebSocket");
    assert!(head(req.as_bytes()).websocket.is_some());
}

#[test]
fn websocket_upgrade_invalid() {
    let cases = [
        ws_request("").replace("GET", "POST"),
        ws_request("").replace("HTTP/1.1", "HTTP/1.0"),
        ws_request("").replace("Connection: Upgrade", "Connection: keep-alive"),
        ws_request("").replace("Sec-WebSocket-Version: 13", "Sec-WebSocket-Version: 8"),
        ws_request("").replace("Sec-WebSocket-Version: 13\r\n", ""),
        ws_request("").replace(&format!("Sec-WebSocket-Key: {KEY}\r\n"), ""),
        ws_request("").replace(KEY, "not base64!"),
        ws_request("").replace(KEY, "AAAA"),
        ws_request(&format!("Sec-WebSocket-Key: {KEY}\r\n")),
    ];
    for req in cases {
        let e = err(req.as_bytes());
        assert_eq!(e.status(), 400, "{req:?} -> {e}");
    }
}

#[test]
fn non_websocket_upgrade_is_ignored() {
    let h = head(b"GET / HTTP/1.1\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n");
    assert_eq!(h.websocket, None);
}

#[test]
fn absolute_form_targets() {
    let h = head(b"GET http://example.com/sub/5?since=3 HTTP/1.1\r\n\r\n");
    assert_eq!(
        (h.path.as_str(), h.query.as_deref()),
        ("/sub/5", Some("since=3"))
    );
    assert_eq!(head(b"GET HTTP://example.com HTTP/1.1\r\n\r\n").path, "/");
    assert_eq!(head(b"GET /?a HTTP/1.1\r\n\r\n").path, "/");
}

#[test]
fn limits() {
    let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(9000));
    assert_eq!(err(big.as_bytes()), HeadError::HeadTooLarge);
    // Partial and already larger than the limit: refuse without waiting.
    assert_eq!(err(&big.as_bytes()[..8500]), HeadError::HeadTooLarge);
    let small = Limits {
        max_head: 30,
        max_headers: 2,
    };
    assert_eq!(
        parse_head(b"GET / HTTP/1.1\r\nA: b\r\n\r\n", &small)
            .unwrap()
            .unwrap()
            .1,
        24
    );
    assert_eq!(
        parse_head(b"GET / HTTP/1.1\r\nA: bbbbbbbbbb\r\n\r\n", &small),
        Err(HeadError::HeadTooLarge)
    );
    // Only the first max_head bytes are looked at: a third header past them makes
    // the head too large, a third header within them is one too many.
    assert_eq!(
        parse_head(b"GET / HTTP/1.1\r\nA: b\r\nB: c\r\nC: d\r\n\r\n", &small),
        Err(HeadError::HeadTooLarge)
    );
    let roomy = Limits {
        max_head: 64,
        max_headers: 2,
    };
    assert_eq!(
        parse_head(b"GET / HTTP/1.1\r\nA: b\r\nB: c\r\nC: d\r\n\r\n", &roomy),
        Err(HeadError::TooManyHeaders)
    );
    let many = Limits {
        max_head: 1 << 16,
        max_headers: 100,
    };
    let req = format!("GET / HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(100));
    assert!(parse_head(req.as_bytes(), &many).unwrap().is_some());
    let req = format!("GET / HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(101));
    assert_eq!(
        parse_head(req.as_bytes(), &many),
        Err(HeadError::TooManyHeaders)
    );
}

#[test]
fn versions() {
    assert_eq!(
        err(b"GET / HTTP/2.0\r\n\r\n"),
        HeadError::UnsupportedVersion
    );
    assert_eq!(
        err(b"GET / HTTP/1.2\r\n\r\n"),
        HeadError::UnsupportedVersion
    );
    assert_eq!(err(b"GET / FTP/1.1\r\n\r\n").status(), 400);
    assert_eq!(err(b"GET / HTTP/1\r\n\r\n").status(), 400);
}

#[test]
fn every_error_has_a_short_message_and_status() {
    let e = HeadError::LengthAndTransferEncoding;
    assert_eq!(
        e.to_string(),
        "Content-Length and Transfer-Encoding together"
    );
    assert_eq!(e.status(), 400);
    assert_eq!(HeadError::HeadTooLarge.status(), 431);
    assert_eq!(HeadError::UnsupportedTransferEncoding.status(), 501);
    assert_eq!(HeadError::UnsupportedVersion.status(), 505);
}

#[test]
fn non_ascii_targets_do_not_panic() {
    // Found by the fuzzer: a multi-byte character where a scheme could end.
    let h = head(b"GET /subsc\xe2\x82\xacript HTTP/1.1\r\n\r\n");
    assert_eq!(h.path, "/subsc\u{20ac}ript");
    let h = head("GET h\u{e9}tp://x/ HTTP/1.1\r\n\r\n".as_bytes());
    assert_eq!(h.path, "h\u{e9}tp://x/");
}

#[test]
fn bare_lf_is_refused_anywhere_in_the_head() {
    for bad in [
        &b"GET / HTTP/1.1\n\n"[..],
        b"GET / HTTP/1.1\nHost: a\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\n\n",
        b"\nGET / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nX: a\nContent-Length: 5\r\n\r\n",
        b"GET / HTTP/2.0\n\r\n",
    ] {
        assert_eq!(
            parse(bad),
            Err(HeadError::BareLf),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
        assert_eq!(HeadError::BareLf.status(), 400);
    }
    // Decided as soon as the LF arrives, the same as with the rest of the head.
    assert_eq!(parse(b"GET / HTTP/1.1\n"), Err(HeadError::BareLf));
    assert_eq!(
        parse(b"GET / HTTP/1.1\r\nHost: a\n"),
        Err(HeadError::BareLf)
    );
    // An error before the LF is reported as before.
    assert_eq!(
        parse(b"GET / HTTP/1.1\r\nBad Name: a\r\nX: b\n\r\n"),
        Err(HeadError::Malformed("invalid header name"))
    );
    // After the head, LF belongs to the body or the next request: not the head's.
    let buf = b"POST /pub HTTP/1.1\r\nContent-Length: 4\r\n\r\na\nb\n";
    let (h, n) = parse(buf).unwrap().unwrap();
    assert_eq!((h.body, &buf[n..]), (BodyKind::Length(4), &b"a\nb\n"[..]));
    // CRLF empty lines before the request line are still skipped (RFC 9112 2.2).
    assert!(parse(b"\r\nGET / HTTP/1.1\r\n\r\n").unwrap().is_some());
}

#[test]
fn host_and_origin() {
    let h =
        head(b"GET /sub/1 HTTP/1.1\r\nHost: example.com\r\nOrigin: https://app.example\r\n\r\n");
    assert_eq!(h.host.as_deref(), Some("example.com"));
    assert_eq!(h.origin.as_deref(), Some("https://app.example"));
    let h = head(b"GET /sub/1 HTTP/1.1\r\n\r\n");
    assert_eq!((h.host, h.origin), (None, None));
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        HeadError::DuplicateHeader("Host")
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nhost: a\r\nHOST: a\r\n\r\n").status(),
        400,
        "even the same value twice"
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nOrigin: a\r\nOrigin: b\r\n\r\n"),
        HeadError::DuplicateHeader("Origin")
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nOrigin: \xff\r\n\r\n"),
        HeadError::BadHeaderValue("Origin")
    );
    // Absolute form: the target's authority overrides Host (RFC 9112 3.2.2).
    let h = head(b"GET http://a.example/sub/1 HTTP/1.1\r\nHost: b.example\r\n\r\n");
    assert_eq!(
        (h.host.as_deref(), h.path.as_str()),
        (Some("a.example"), "/sub/1")
    );
    assert_eq!(
        err(b"GET http:///sub/1 HTTP/1.1\r\n\r\n"),
        HeadError::Malformed("absolute-form target without a host")
    );
}

#[test]
fn http10_is_flagged() {
    assert!(head(b"GET /sub/1 HTTP/1.0\r\n\r\n").is_http10());
    assert!(!head(b"GET /sub/1 HTTP/1.1\r\n\r\n").is_http10());
}
