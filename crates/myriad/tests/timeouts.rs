//! Timeouts and the keep-alive experiment (SPEC D1): slow heads get 408, idle keep-alive
//! sockets are closed after the keep-alive timeout while streaming subscribers stay, and
//! 15,000 clients that each send one request and go idle are all closed by the server
//! within the keep-alive timeout plus a second, with memory given back.

mod common;

use common::*;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

#[test]
fn a_slow_head_gets_408_within_the_head_timeout() {
    let server = Server::start(&["--head-timeout", "1"]);
    let mut s = server.connect();
    let started = Instant::now();
    s.write_all(b"GET /sub/1 HTTP/1.1\r\nHost: t\r\n").unwrap(); // never finished
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let waited = started.elapsed();
    assert!(out.starts_with("HTTP/1.1 408"), "{out}");
    // Generous bounds: this checks behaviour (it fired, and not immediately), not speed.
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
}

#[test]
fn a_silent_new_connection_is_closed_by_the_head_timeout() {
    let server = Server::start(&["--head-timeout", "1"]);
    let mut s = server.connect();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 408"), "{out}");
}

#[test]
fn idle_keepalive_closes_while_streams_stay() {
    let server = Server::start(&["--keepalive-timeout", "1", "--heartbeat", "0.3"]);
    let (mut stream, _) = subscribe_stream(&server, 8);
    let mut idle = server.connect();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let started = Instant::now();
    let out = read_all(&mut idle); // the server closes it after the idle timeout
    assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 200"));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    // The stream outlived the keep-alive timeout and still gets heartbeats and messages.
    std::thread::sleep(Duration::from_millis(500));
    let mut buf = Vec::new();
    read_until(&mut stream, &mut buf, "\r\n1\r\n\n\r\n");
    assert_eq!(server.publish(8, "after")["connections"], 1);
    read_until(&mut stream, &mut buf, "after");
}

/// The classic experiment. Heavy: runs alone (see .config/nextest.toml).
#[test]
fn heavy_15k_idle_keepalive_clients_are_all_closed_and_memory_returns() {
    const N: usize = 15_000;
    let server = Server::start(&["--keepalive-timeout", "2", "--head-timeout", "30"]);
    let baseline = server.rss();
    let mut clients = Vec::with_capacity(N);
    for _ in 0..N {
        let mut s = std::net::TcpStream::connect(server.addr).expect("connect (raise somaxconn?)");
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        clients.push(s);
    }
    let last_request = Instant::now();
    // Every client gets its answer, then EOF from the server.
    for s in &mut clients {
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let out = read_all(s);
        assert!(
            out.starts_with(b"HTTP/1.1 200"),
            "{:?}",
            String::from_utf8_lossy(&out)
        );
    }
    let all_closed = last_request.elapsed();
    // All were closed within the keep-alive timeout plus a second after the last request
    // (plus the time it took to send the requests: measured from the last one).
    assert!(
        all_closed < Duration::from_secs(3) + Duration::from_secs(2),
        "took {all_closed:?}"
    );
    let peak = server.stats();
    drop(clients);
    let stats = server.wait_stats("all closed", |s| s["connections"] == 1);
    assert!(
        stats["closes"].as_u64().unwrap() >= N as u64,
        "{peak} {stats}"
    );
    // Memory comes back: within 10 % (plus 1 MiB of slack for the allocator) of before.
    std::thread::sleep(Duration::from_secs(2));
    let after = server.rss();
    assert!(
        after <= baseline + baseline / 10 + (1 << 20),
        "rss before {baseline}, after {after}"
    );
}
