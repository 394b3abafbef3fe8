//! Bytes a client can make the server hold are bounded (SPEC D4): replies to
//! pipelined requests and WebSocket pongs count against `--max-queued` and a client
//! over it is not read until it drains; the slow-consumer policy is judged on what
//! the socket refused, so a reader that keeps up is never dropped; a connect storm
//! past the descriptors a process may open meets the full process's 503 and leaves
//! the process the descriptors its admin listener needs.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const MAX_QUEUED: u64 = 65536;

/// Writes `chunk` until the socket stops taking it (the server stopped reading) or
/// `total` bytes are out; returns the bytes written.
fn write_until_blocked(s: &mut TcpStream, chunk: &[u8], total: usize) -> usize {
    s.set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut written = 0;
    while written < total {
        match s.write(chunk) {
            Ok(n) => written += n,
            Err(_) => break,
        }
    }
    written
}

/// Waits until the server's queued output stops growing and checks its bound.
fn assert_queue_bounded(server: &Server, what: &str) -> serde_json::Value {
    let mut last = u64::MAX;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let stats = server.stats();
        let queued = stats["queued_bytes"].as_u64().unwrap_or(0);
        // One read's worth of answers may land past the limit before reading stops.
        assert!(
            queued <= MAX_QUEUED + 256 * 1024,
            "{what}: queued output not bounded: {stats}"
        );
        if queued == last || Instant::now() > deadline {
            return stats;
        }
        last = queued;
    }
}

#[test]
fn a_burst_of_20_x_16_kib_to_a_reading_sse_client_is_delivered_whole() {
    let server = Server::start(&[]);
    let mut sse = server.connect();
    sse.write_all(b"GET /sse/60 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    read_until(&mut sse, &mut buf, "retry:");
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    let payload = "y".repeat(16 * 1024);
    let mut batch = String::new();
    for i in 1..=20 {
        batch.push_str(&format!("{{\"subject\":60,\"data\":\"{payload}#{i}\"}}\n"));
    }
    let (status, body) = server.request("POST", "/pub", batch.as_bytes());
    assert_eq!(status, 200, "{body}");
    // Every message arrives, in order (ids are `<epoch>-<seq>`).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut chunk = vec![0u8; 65536];
    while !String::from_utf8_lossy(&buf).contains("#20\n") {
        assert!(Instant::now() < deadline, "got {} bytes", buf.len());
        match sse.read(&mut chunk) {
            Ok(0) => panic!(
                "closed after {} bytes: dropped as a slow consumer",
                buf.len()
            ),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => {}
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let ends: Vec<&str> = text
        .lines()
        .filter_map(|l| l.rsplit_once('#'))
        .map(|(_, n)| n)
        .collect();
    let want: Vec<String> = (1..=20).map(|i| i.to_string()).collect();
    assert_eq!(ends, want, "every message, in order");
    let stats = server.stats();
    assert_eq!(
        stats["slow_drops"], 0,
        "a reader is not a slow consumer: {stats}"
    );
    assert_eq!(stats["connections_logged_in"], 1);
}

#[test]
fn pipelined_polls_from_a_client_that_never_reads_stay_bounded() {
    let max = MAX_QUEUED.to_string();
    let server = Server::start(&["--max-queued", &max, "--max-message", "65536"]);
    // History for user 7: a reader keeps the user online while it fills.
    let (mut reader, _) = subscribe_stream(&server, 7);
    let drain = std::thread::spawn(move || read_all(&mut reader).len());
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    let payload = "p".repeat(60 * 1024);
    for _ in 0..40 {
        server.publish(7, &payload);
    }
    let rss_before = server.rss();
    let mut hostile = server.connect();
    let polls = "GET /poll/7?since=0 HTTP/1.1\r\nHost: t\r\n\r\n".repeat(200);
    let sent = write_until_blocked(&mut hostile, polls.as_bytes(), polls.len());
    assert!(sent > 0);
    assert_queue_bounded(&server, "pipelined polls");
    drop(hostile);
    // Still serving, and the memory went back.
    server.wait_stats("hostile gone", |s| s["queued_bytes"] == 0);
    let (status, body) = server.request("GET", "/poll/7?since=39", b"");
    assert_eq!(status, 200, "{body}");
    let rss_after = server.rss();
    eprintln!("pipelined polls: RSS {rss_before} before, {rss_after} after; queued at most {MAX_QUEUED} + one read");
    assert!(
        rss_after < rss_before + 8 * 1024 * 1024,
        "RSS {rss_before} → {rss_after}"
    );
    drop(server);
    let _ = drain.join();
}

/// A masked ping frame with a 125-byte payload (mask key 0).
fn ping() -> Vec<u8> {
    let mut f = vec![0x89, 0x80 | 125, 0, 0, 0, 0];
    f.extend_from_slice(&[b'p'; 125]);
    f
}

#[test]
fn unread_pongs_stay_bounded() {
    let max = MAX_QUEUED.to_string();
    let server = Server::start(&["--max-queued", &max]);
    let mut ws = server.connect();
    ws.write_all(
        b"GET /ws/9 HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    let mut buf = Vec::new();
    read_until(&mut ws, &mut buf, "\r\n\r\n");
    let pings = ping().repeat(512);
    let mut sent = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    // The kernel buffers ~10 MB of pongs on loopback (both sides' autotuned
    // buffers); 300,000 pings (39 MB) at most, and the server stops reading first.
    let most = 300_000 * 131;
    while sent < most && Instant::now() < deadline {
        let n = write_until_blocked(&mut ws, &pings, pings.len());
        sent += n;
        if n < pings.len() {
            break;
        }
    }
    assert!(sent < most, "the server kept reading {sent} bytes of pings");
    let stats = assert_queue_bounded(&server, "pongs");
    eprintln!(
        "unread pongs: the server stopped reading after {sent} bytes of pings; queued {}; RSS {}",
        stats["queued_bytes"],
        server.rss()
    );
    // Reading the pongs lets the server read again: the connection is alive.
    ws.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = 0;
    let mut chunk = vec![0u8; 65536];
    while got < 64 * 1024 {
        match ws.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    assert!(got >= 64 * 1024, "pongs arrive once read: {got}");
    assert_eq!(server.publish(9, "after")["connections"], 1);
}

/// 400 descriptors at most: clients get `--max-connections` bound to 400 less the
/// reserve, a connect storm past it is answered 503, and the admin listener (whose
/// HTTP library aborts the process when it accepts a socket it cannot get a second
/// descriptor for) still answers, the server alive.
#[test]
fn a_connect_storm_past_the_descriptors_leaves_the_admin_listener_its_own() {
    let mut server = Server::start_nofile(400, &["--admin", "127.0.0.1:0"]);
    let mut held = Vec::new();
    let mut refused = 0;
    for user in 0..420 {
        let Ok(mut s) = TcpStream::connect(server.addr) else {
            break;
        };
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // A full process may answer 503 and close before the request is written.
        let _ = write!(s, "GET /sub/{user} HTTP/1.1\r\nHost: t\r\n\r\n");
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Ok(n) if buf[..n].starts_with(b"HTTP/1.1 503") => refused += 1,
            Ok(n) if n > 0 => held.push(s),
            other => panic!("connection {user}: neither held nor refused: {other:?}"),
        }
    }
    assert!(refused > 0, "a full process answers 503");
    assert!(
        held.len() <= 400 - 256,
        "{} held: more than the descriptors allow less the reserve",
        held.len()
    );
    for _ in 0..20 {
        let stats = server.admin_stats();
        assert_eq!(
            stats["extra"]["connections"].as_u64(),
            Some(held.len() as u64)
        );
    }
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server is alive"
    );
}
