//! Encoders a hostile publisher or a careful client depends on: non-UTF-8 payloads go
//! to WebSocket clients as binary frames (a text frame would make them close with
//! 1007), and keep-alive responses say the real idle timeout.

mod common;

use common::*;
use std::io::{Read, Write};

#[test]
fn non_utf8_payloads_are_binary_websocket_frames() {
    let server = Server::start(&[]);
    let mut ws = server.connect();
    ws.write_all(
        b"GET /ws/8 HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    let mut buf = Vec::new();
    read_until(&mut ws, &mut buf, "\r\n\r\n");
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    let (status, _) = server.request("POST", "/pub/8", b"\xff\xfebin");
    assert_eq!(status, 200);
    assert_eq!(server.publish(8, "text")["connections"], 1);
    let mut frames = Vec::new();
    let mut chunk = [0u8; 64];
    while frames.len() < 2 + 5 + 2 + 4 {
        let n = ws.read(&mut chunk).unwrap();
        assert!(n > 0);
        frames.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(&frames[..7], b"\x82\x05\xff\xfebin", "binary frame");
    assert_eq!(&frames[7..13], b"\x81\x04text", "text frame");
}

#[test]
fn keep_alive_responses_carry_the_idle_timeout() {
    let server = Server::start(&["--keepalive-timeout", "7"]);
    let mut s = server.connect();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "ok\n");
    let text = String::from_utf8_lossy(&buf);
    assert!(text.contains("\r\nKeep-Alive: timeout=7\r\n"), "{text}");
    let (_, body) = server.request("GET", "/healthz", b"");
    assert_eq!(body, "ok\n", "Connection: close answers carry none");
}

#[test]
fn http10_subscribers_get_a_close_delimited_stream() {
    let server = Server::start(&[]);
    let mut s = server.connect();
    s.write_all(b"GET /sub/12 HTTP/1.0\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "welcome 12\n");
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    assert_eq!(server.publish(12, "plain")["connections"], 1);
    read_until(&mut s, &mut buf, "plain\n");
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(!head.contains("Transfer-Encoding"), "{head}");
    assert!(head.contains("Connection: close"), "{head}");
    assert_eq!(body, "welcome 12\nplain\n", "no chunk framing");
}
