//! `--io-uring` (on by default; the pump's `send_batch`): a fan-out's sends
//! submitted together.
//! Readers that do not read at first, sent more than a socket holds (7 MiB each,
//! over the 4 MiB most a loopback send buffer grows to here), make the sends
//! partial: what a socket does not take must stay queued behind it and arrive whole
//! and in order once the reader reads. (Order and counts under concurrency with
//! io_uring are in `ordering.rs`.)

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const READERS: usize = 8;
const MESSAGES: u64 = 120;
const USER: u64 = 9;

fn payload(i: u64) -> String {
    let fill = char::from(b'a' + (i % 26) as u8).to_string();
    format!("m{i}:{}", fill.repeat(60 * 1024))
}

/// An SSE subscriber of `USER` (it reads only when the test says so).
fn paused_reader(server: &Server) -> TcpStream {
    let mut s = server.connect();
    write!(s, "GET /sse/{USER} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    read_until(&mut s, &mut Vec::new(), "retry:");
    s
}

/// Reads SSE events until the end of event id `MESSAGES`; returns (seq, data) in
/// arrival order.
fn events(mut s: TcpStream) -> Vec<(u64, String)> {
    let mut text = Vec::new();
    let last = format!("-{MESSAGES}\n");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = 0; // searched up to here (less what a match may straddle)
    let mut last_at = None;
    loop {
        if let Some(at) = last_at {
            // The last event ends at the first blank line after its id.
            if let Some(end) = find(&text[at..], b"\n\n") {
                text.truncate(at + end + 2);
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "stuck after {} bytes",
            text.len()
        );
        let mut chunk = [0u8; 65536];
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed early");
        text.extend_from_slice(&chunk[..n]);
        if last_at.is_none() {
            last_at = find(&text[seen..], last.as_bytes()).map(|i| seen + i);
            seen = text.len().saturating_sub(last.len());
        }
    }
    let text = String::from_utf8(text).unwrap();
    text.split("\n\n")
        .filter_map(|event| {
            let id = event.lines().find_map(|l| l.strip_prefix("id: "))?;
            let data = event.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((id.rsplit('-').next()?.parse().ok()?, data.to_string()))
        })
        .collect()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn readers_that_pause_get_every_message_whole_and_in_order() {
    let server = Server::start(&[
        "--io-uring",
        "true",
        "--loops",
        "2",
        "--max-queued",
        "16777216",
    ]);
    let readers: Vec<TcpStream> = (0..READERS).map(|_| paused_reader(&server)).collect();
    server.wait_stats("logins", |s| s["connections_logged_in"] == READERS as u64);
    for i in 1..=MESSAGES {
        let reply = server.publish(USER, &payload(i));
        assert_eq!(reply["connections"], READERS as u64, "{reply}");
    }
    // Nobody has read: the sockets took part, the rest waits in the queues.
    server.wait_stats("queued output", |s| s["queued_bytes"].as_u64() > Some(0));
    let want: Vec<(u64, String)> = (1..=MESSAGES).map(|i| (i, payload(i))).collect();
    for (r, s) in readers.into_iter().enumerate() {
        let got = events(s);
        assert_eq!(got.len(), want.len(), "reader {r}: events");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                g == w,
                "reader {r}: event {} arrived as id {} with {} bytes of data",
                w.0,
                g.0,
                g.1.len()
            );
        }
    }
    let stats = server.stats();
    assert!(
        stats["batched_sends"].as_u64() > Some(0),
        "no send went through io_uring: {stats}"
    );
    assert_eq!(stats["slow_drops"], 0, "{stats}");
}

/// Reads `s` until `needle` has arrived `times` times in all (`buf` keeps it all).
fn read_times(s: &mut TcpStream, buf: &mut Vec<u8>, needle: &str, times: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while String::from_utf8_lossy(buf).matches(needle).count() < times {
        assert!(
            Instant::now() < deadline,
            "{needle:?} not {times} times in {:?}",
            String::from_utf8_lossy(buf)
        );
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(buf));
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Heartbeats fall due on a grid mark together (one loop holds every connection),
/// so with io_uring they leave in submits, on SSE and chunked streams alike, and a
/// message after them still arrives whole. Nothing is published before the beats:
/// every batched send counted until then is a heartbeat. With `--io-uring false`
/// the same beats go by `writev` and none is counted.
#[test]
fn heartbeats_due_together_leave_in_one_submit_on_every_transport() {
    const EACH: u64 = 24;
    for io_uring in ["true", "false"] {
        let server = Server::start(&["--io-uring", io_uring, "--loops", "1", "--heartbeat", "0.5"]);
        let mut sse: Vec<(TcpStream, Vec<u8>)> = (0..EACH)
            .map(|i| {
                let mut s = server.connect();
                write!(s, "GET /sse/{} HTTP/1.1\r\nHost: t\r\n\r\n", 100 + i).unwrap();
                (s, Vec::new())
            })
            .collect();
        let mut streams: Vec<(TcpStream, Vec<u8>)> = (0..EACH)
            .map(|i| subscribe_stream(&server, 200 + i))
            .collect();
        for (s, buf) in &mut sse {
            read_times(s, buf, ": hb\n\n", 2);
        }
        for (s, buf) in &mut streams {
            read_times(s, buf, "\r\n1\r\n\n\r\n", 2);
        }
        let batched = server.stats()["batched_sends"].as_u64().unwrap_or(0);
        if io_uring == "true" {
            assert!(
                batched >= MIN_BATCH,
                "the beats of 48 connections on one loop went one by one ({batched} batched)"
            );
        } else {
            assert_eq!(batched, 0, "writev asked for, yet sends were batched");
        }
        // A message after the beats: whole, on the connection the beats went to.
        let reply = server.publish(100, "after the beats");
        assert_eq!(reply["connections"], 1, "{reply}");
        let (s, buf) = &mut sse[0];
        read_until(s, buf, "data: after the beats\n\n");
    }
}

/// `pump::send_batch::MIN_BATCH`: fewer sends than this go by `writev`.
const MIN_BATCH: u64 = 4;
