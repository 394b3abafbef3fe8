//! Helpers of the channel and presence tests: open a subscription (or a WebSocket)
//! and read it, publish to a channel, split an SSE body into events.
#![allow(dead_code)] // not every test binary uses every helper

use super::{read_until, read_until_or_closed, Server};
use std::io::Write;
use std::net::TcpStream;

/// Opens `GET path` with `extra` header lines and reads up to `until`.
pub fn open(server: &Server, path: &str, extra: &str, until: &str) -> (TcpStream, Vec<u8>) {
    let mut s = server.connect();
    write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, until);
    (s, buf)
}

/// [`open`] again until it is answered (a gateway whose router is not up yet, or
/// restarting, answers 503), as a browser's EventSource retries.
pub fn open_when_up(server: &Server, path: &str, extra: &str, until: &str) -> (TcpStream, Vec<u8>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let mut s = server.connect();
        write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").unwrap();
        let mut buf = Vec::new();
        if read_until_or_closed(&mut s, &mut buf, until) {
            return (s, buf);
        }
        let got = String::from_utf8_lossy(&buf).into_owned();
        assert!(std::time::Instant::now() < deadline, "{got}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

pub fn publish_to(server: &Server, channel: &str, body: &str) -> serde_json::Value {
    let (status, text) = server.request("POST", &format!("/pub/{channel}"), body.as_bytes());
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// SSE events `(id, event, data)` in `buf` (without comments and the retry line).
pub fn events(buf: &[u8]) -> Vec<(String, String, String)> {
    let text = String::from_utf8_lossy(buf);
    let body = text
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    body.split("\n\n")
        .filter_map(|block| {
            let (mut id, mut event, mut data) = (String::new(), String::new(), Vec::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = v.to_string();
                } else if let Some(v) = line.strip_prefix("event: ") {
                    event = v.to_string();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push(v.to_string());
                }
            }
            (!data.is_empty()).then(|| (id, event, data.join("\n")))
        })
        .collect()
}

/// A WebSocket on `path`, past its handshake: the stream and what followed the head.
pub fn ws_open(server: &Server, path: &str) -> (TcpStream, Vec<u8>) {
    let (ws, mut buf) = open(server, path, super::resume::WS_UPGRADE, "\r\n\r\n");
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    buf.drain(..end);
    (ws, buf)
}
