//! The hostile-input suite (SPEC D2): malformed and abusive requests each get the right
//! status or a clean close; afterwards the server still serves and holds no leaked
//! connection.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::time::Duration;

/// What a case must produce.
#[derive(Debug)]
enum Expect {
    Status(u16),
    /// A WebSocket close frame with this code, then EOF.
    WsClose(u16),
}

const WS_HEAD: &str = "GET /sub/77 HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/// A masked client frame (mask key 0: payload unchanged) with a raw first byte.
fn frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![first];
    if payload.len() < 126 {
        f.push(0x80 | payload.len() as u8);
    } else if payload.len() <= u16::MAX as usize {
        f.push(0x80 | 126);
        f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    } else {
        f.push(0x80 | 127);
        f.extend_from_slice(&(payload.len() as u64).to_be_bytes());
    }
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(payload);
    f
}

fn cases() -> Vec<(&'static str, Vec<u8>, Expect)> {
    use Expect::*;
    let s = |t: &str| t.as_bytes().to_vec();
    let ws = |extra: Vec<u8>| {
        let mut v = WS_HEAD.as_bytes().to_vec();
        v.extend(extra);
        v
    };
    let big_head = format!(
        "GET /sub/1 HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let many_headers: String = (0..200).map(|i| format!("X-{i}: v\r\n")).collect();
    vec![
        ("garbage request line", s("HELLO\r\n\r\n"), Status(400)),
        ("missing version", s("GET /sub/1\r\n\r\n"), Status(400)),
        ("bad version", s("GET /sub/1 HTTP/2.0\r\n\r\n"), Status(505)),
        ("header without colon", s("GET /sub/1 HTTP/1.1\r\nHost t\r\n\r\n"), Status(400)),
        ("NUL in header", s("GET /sub/1 HTTP/1.1\r\nHost: a\0b\r\n\r\n"), Status(400)),
        ("space before colon", s("GET /sub/1 HTTP/1.1\r\nHost : t\r\n\r\n"), Status(400)),
        ("oversize head", s(&big_head), Status(431)),
        ("too many headers", s(&format!("GET /sub/1 HTTP/1.1\r\n{many_headers}\r\n")), Status(431)),
        ("unknown path", s("GET /nope HTTP/1.1\r\nHost: t\r\n\r\n"), Status(404)),
        ("trailing slash", s("GET /sub/1/ HTTP/1.1\r\nHost: t\r\n\r\n"), Status(404)),
        ("id not a number", s("GET /sub/abc HTTP/1.1\r\nHost: t\r\n\r\n"), Status(400)),
        ("id overflows u64", s("GET /sub/18446744073709551616 HTTP/1.1\r\nHost: t\r\n\r\n"), Status(400)),
        ("negative id", s("GET /sub/-1 HTTP/1.1\r\nHost: t\r\n\r\n"), Status(400)),
        ("unknown method", s("BREW /sub/1 HTTP/1.1\r\nHost: t\r\n\r\n"), Status(405)),
        ("POST on a subscription", s("POST /sub/1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n"), Status(405)),
        ("GET on publish", s("GET /pub/1 HTTP/1.1\r\nHost: t\r\n\r\n"), Status(405)),
        ("DELETE on stats", s("DELETE /stats HTTP/1.1\r\nHost: t\r\n\r\n"), Status(405)),
        ("non-digit Content-Length", s("POST /pub/1 HTTP/1.1\r\nContent-Length: 12a\r\n\r\n"), Status(400)),
        ("negative Content-Length", s("POST /pub/1 HTTP/1.1\r\nContent-Length: -5\r\n\r\n"), Status(400)),
        (
            "conflicting Content-Lengths",
            s("POST /pub/1 HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello"),
            Status(400),
        ),
        (
            "huge Content-Length",
            s("POST /pub/1 HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"),
            Status(400),
        ),
        ("body over the message limit", s("POST /pub/1 HTTP/1.1\r\nContent-Length: 70000\r\n\r\n"), Status(413)),
        (
            "CL and TE together (smuggling)",
            s("POST /pub/1 HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            Status(400),
        ),
        ("TE gzip", s("POST /pub/1 HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"), Status(501)),
        (
            "bad chunk size",
            s("POST /pub/1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"),
            Status(400),
        ),
        (
            "chunk size overflow",
            s("POST /pub/1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n"),
            Status(400),
        ),
        (
            "chunk without CRLF",
            s("POST /pub/1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n"),
            Status(400),
        ),
        (
            "chunked body over the limit",
            s(&format!("POST /pub/1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n20000\r\n{}", "x".repeat(70_000))),
            Status(413),
        ),
        ("body on a subscription", s("GET /sub/1 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"), Status(400)),
        (
            "batch with a bad line",
            s("POST /pub HTTP/1.1\r\nContent-Length: 9\r\n\r\nnot json\n"),
            Status(400),
        ),
        (
            "bulk edges with a bad line",
            s("POST /subscriptions HTTP/1.1\r\nContent-Length: 8\r\n\r\n1 2\nx y\n"),
            Status(400),
        ),
        (
            "WS upgrade with a bad key",
            s("GET /ws/1 HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n"),
            Status(400),
        ),
        (
            "WS upgrade with version 8",
            s("GET /ws/1 HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n"),
            Status(400),
        ),
        ("WS unmasked client frame", ws(vec![0x81, 0x02, b'h', b'i']), WsClose(1002)),
        ("WS reserved bits set", ws(frame(0xC1, b"hi")), WsClose(1002)),
        ("WS unknown opcode", ws(frame(0x83, b"hi")), WsClose(1002)),
        ("WS fragmented ping", ws(frame(0x09, b"hi")), WsClose(1002)),
        ("WS oversize control frame", ws(frame(0x89, &[b'p'; 126])), WsClose(1002)),
        ("WS continuation without start", ws(frame(0x80, b"hi")), WsClose(1002)),
        ("WS invalid UTF-8 text", ws(frame(0x81, &[0xff, 0xfe])), WsClose(1007)),
        ("WS bad close code", ws(frame(0x88, &[0x03, 0xe7])), WsClose(1002)),
        ("WS frame over the message limit", ws(frame(0x82, &vec![b'x'; 70_000])), WsClose(1009)),
        // Issue 10: a web page may not publish through a visitor's browser ("simple"
        // CORS, no preflight), nor read the API; a poll ahead of the server is
        // answered with the server's position, not its own `since`.
        (
            "simple-CORS publish from a page",
            s("POST /pub/1 HTTP/1.1\r\nOrigin: http://evil.example\r\nContent-Type: text/plain\r\nContent-Length: 1\r\n\r\nx"),
            Status(403),
        ),
        (
            "simple-CORS subscription change from a page",
            s("POST /subscriptions HTTP/1.1\r\nOrigin: http://evil.example\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 4\r\n\r\n1 2\n"),
            Status(403),
        ),
        ("stats read by a page", s("GET /stats HTTP/1.1\r\nOrigin: null\r\n\r\n"), Status(403)),
        ("preflight", s("OPTIONS /pub/1 HTTP/1.1\r\nOrigin: http://evil.example\r\n\r\n"), Status(405)),
        ("poll ahead of the server", s("GET /poll/1?since=7-99 HTTP/1.1\r\nConnection: close\r\n\r\n"), Status(200)),
    ]
}

fn check(server: &Server, name: &str, input: &[u8], expect: &Expect) {
    let mut s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may answer and close before reading everything: ignore write errors.
    let _ = s.write_all(input);
    let _ = s.shutdown(Shutdown::Write);
    let out = read_all(&mut s);
    match expect {
        Expect::Status(code) => {
            let (status, _) = parse_response(&out);
            assert_eq!(
                status,
                *code,
                "{name}: got {:?}",
                String::from_utf8_lossy(&out[..out.len().min(300)])
            );
        }
        Expect::WsClose(code) => {
            let text = String::from_utf8_lossy(&out);
            assert!(
                text.starts_with("HTTP/1.1 101"),
                "{name}: no upgrade: {text:?}"
            );
            let end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let frame = &out[end..];
            assert!(frame.len() >= 4, "{name}: no close frame");
            assert_eq!(frame[0], 0x88, "{name}: first frame is not a close");
            assert_eq!(
                u16::from_be_bytes([frame[2], frame[3]]),
                *code,
                "{name}: close code"
            );
        }
    }
}

#[test]
fn every_hostile_request_gets_its_answer_and_nothing_leaks() {
    let server = Server::start(&[]);
    let before = server.stats();
    let cases = cases();
    assert!(cases.len() >= 30);
    for (name, input, expect) in &cases {
        check(&server, name, input, expect);
    }
    // Still serving, and every hostile connection is gone (the stats request is one).
    let after = server.wait_stats("connections back", |s| {
        s["connections"] == before["connections"]
    });
    assert_eq!(after["connections_logged_in"], 0);
    let (mut s, _) = subscribe_stream(&server, 3);
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    assert_eq!(server.publish(3, "still here")["connections"], 1);
    read_until(&mut s, &mut Vec::new(), "still here");
}

#[test]
fn abrupt_disconnects_mid_request_leak_nothing() {
    let server = Server::start(&[]);
    let before = server.stats();
    for partial in [
        &b"GET /sub/1 HTTP/1.1\r\nHo"[..],
        b"POST /pub/1 HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc",
        b"POST /pub/1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
    ] {
        let mut s = server.connect();
        s.write_all(partial).unwrap();
        drop(s);
    }
    let (s, _) = subscribe_stream(&server, 9);
    drop(s);
    server.wait_stats("connections back", |s| {
        s["connections"] == before["connections"] && s["connections_logged_in"] == 0
    });
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = Server::start(&[]);
    let mut s = server.connect();
    s.write_all(
        b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\nPOST /pub/5 HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET /subscribers/5 HTTP/1.1\r\nHost: t\r\n\r\nGET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let statuses: Vec<&str> = out
        .match_indices("HTTP/1.1 ")
        .map(|(i, _)| &out[i + 9..i + 12])
        .collect();
    assert_eq!(statuses, ["200", "200", "200", "200"], "{out}");
    let ok = out.find("ok\n").unwrap();
    let counts = out.find("\"connections\":0").unwrap();
    let list = out.find("[]").unwrap();
    assert!(ok < counts && counts < list, "out of order: {out}");
}

#[test]
fn connection_close_is_honoured_and_http10_closes_by_default() {
    let server = Server::start(&[]);
    for req in [
        "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n",
        "GET /healthz HTTP/1.0\r\n\r\n",
    ] {
        let mut s = server.connect();
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap(); // returns only because the server closed
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    }
}

#[test]
fn over_max_connections_gets_503_with_retry_after() {
    let server = Server::start(&["--max-connections", "3"]);
    let held: Vec<_> = (0..3).map(|i| subscribe_stream(&server, 100 + i)).collect();
    let mut s = server.connect();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 503"), "{out}");
    assert!(out.contains("Retry-After: 1"), "{out}");
    drop(held);
}
