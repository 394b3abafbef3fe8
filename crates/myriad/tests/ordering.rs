//! Order under concurrency: publishers on several connections (so on both event loops)
//! and subscribers spread over the loops; every SSE connection of a user must see that
//! user's sequence numbers 1, 2, 3, … with no gap, no repeat and nothing out of order,
//! and the publish replies must add up to what was received.

mod common;

use common::*;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn per_user_sequence_is_gapless_and_ordered_across_loops() {
    gapless_and_ordered(&[], 20, 6, 4, 150);
}

/// The same with one writev per connection (`--io-uring false`).
#[test]
fn per_user_sequence_is_gapless_and_ordered_with_writev() {
    let server = gapless_and_ordered(&["--io-uring", "false"], 20, 6, 4, 150);
    assert_batched(&server, false);
}

/// The unicast shape: one connection per user, so almost every delivery is a
/// batch of one for the other loop, which the publishing loop writes itself when
/// that loop sleeps (see `gateway::pump::handoff`) or wakes it. Exact counts and
/// order per user either way.
#[test]
fn unicast_to_many_users_is_gapless_and_ordered_across_loops() {
    gapless_and_ordered(&[], 300, 1, 6, 500);
}

/// With `--io-uring` (the default), fan-outs of a few connections or more are
/// submitted in batches: whether that path ran, so each test knows which it tested.
fn assert_batched(server: &Server, batched: bool) {
    let stats = server.stats();
    let sends = stats["batched_sends"].as_u64().unwrap_or(0);
    assert_eq!(sends > 0, batched, "sends through io_uring: {stats}");
}

/// `users` users with `conns_per_user` SSE connections each; `publishers`
/// keep-alive connections publish `messages_each` messages each to random users.
/// `args`: more server flags. Returns the server, still running.
fn gapless_and_ordered(
    args: &[&str],
    users: u64,
    conns_per_user: u64,
    publishers: usize,
    messages_each: u64,
) -> Server {
    let server = Server::start(&[&["--loops", "2"], args].concat());
    // Subscribers: read SSE ids until told to stop, return them.
    let mut readers = Vec::new();
    for user in 1..=users {
        for _ in 0..conns_per_user {
            let mut s = server.connect();
            write!(s, "GET /sse/{user} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            read_until(&mut s, &mut Vec::new(), "retry:");
            readers.push((user, s));
        }
    }
    let total_conns = users * conns_per_user;
    server.wait_stats("logins", |s| s["connections_logged_in"] == total_conns);
    // Publishers on keep-alive connections, to random users.
    let delivered = Arc::new(AtomicU64::new(0));
    let addr = server.addr;
    let threads: Vec<_> = (0..publishers)
        .map(|p| {
            let delivered = delivered.clone();
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut counts = vec![0u64; users as usize + 1];
                let mut x = 0x9e3779b97f4a7c15u64 ^ p as u64;
                for i in 0..messages_each {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let user = 1 + x % users;
                    let body = format!("p{p}m{i}");
                    // One write: split writes would meet Nagle and delayed ACKs.
                    let req = format!(
                        "POST /pub/{user} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    s.write_all(req.as_bytes()).unwrap();
                    let mut buf = Vec::new();
                    read_until(&mut s, &mut buf, "}\n");
                    let text = String::from_utf8_lossy(&buf);
                    let json = &text[text.find('{').unwrap()..];
                    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
                    delivered.fetch_add(v["connections"].as_u64().unwrap(), Ordering::Relaxed);
                    counts[user as usize] += 1;
                }
                counts
            })
        })
        .collect();
    let mut per_user = vec![0u64; users as usize + 1];
    for p in threads {
        for (u, c) in p.join().unwrap().into_iter().enumerate() {
            per_user[u] += c;
        }
    }
    assert_eq!(
        delivered.load(Ordering::Relaxed),
        publishers as u64 * messages_each * conns_per_user
    );
    // Every connection of user u must have ids 1..=per_user[u], in order.
    for (user, mut s) in readers {
        let want = per_user[user as usize];
        let mut text = String::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        // SSE ids are `<epoch>-<seq>` (SPEC B6).
        let last = format!("-{want}\n");
        while want > 0 && !text.contains(&last) {
            assert!(
                Instant::now() < deadline,
                "user {user}: wanted {want} messages, got {text:?}"
            );
            let mut chunk = [0u8; 8192];
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0, "closed early");
            text.push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
        let ids: Vec<u64> = text
            .lines()
            .filter_map(|l| l.strip_prefix("id: "))
            .map(|v| v.rsplit('-').next().unwrap().parse().unwrap())
            .collect();
        let expected: Vec<u64> = (1..=want).collect();
        assert_eq!(ids, expected, "user {user}");
    }
    server
}

/// The merged delivery path: fan-outs larger than a slice (1,500 followers of one
/// subject, and 1,000 connections of one user) published back to back from several
/// connections, so batches arrive while earlier ones are still being written and are
/// merged into the writes still to come. Every connection must still see its user's
/// ids 1..=n in order, and the replies must add up to the deliveries.
#[test]
fn heavy_merged_fanouts_keep_order_and_lose_nothing() {
    let server = heavy_merged_fanouts(&[]);
    assert_batched(&server, true);
}

/// The same with one writev per connection (`--io-uring false`).
#[test]
fn heavy_merged_fanouts_keep_order_and_lose_nothing_with_writev() {
    let server = heavy_merged_fanouts(&["--io-uring", "false"]);
    assert_batched(&server, false);
}

fn heavy_merged_fanouts(args: &[&str]) -> Server {
    const FOLLOWERS: u64 = 1_500;
    const ONE_USER_CONNS: u64 = 1_000;
    const SUBJECT: u64 = 1;
    const ONE_USER: u64 = 7;
    const PUBLISHERS: u64 = 6;
    const ROUNDS: u64 = 20; // each round: one publish to SUBJECT, one to ONE_USER
    let server = Server::start(&[&["--loops", "2"], args].concat());
    let edges: String = (0..FOLLOWERS)
        .map(|i| format!("{} {SUBJECT}\n", 1_000 + i))
        .collect();
    let (status, _) = server.request("POST", "/subscriptions", edges.as_bytes());
    assert_eq!(status, 200);
    let mut readers = Vec::new();
    let users = (0..FOLLOWERS)
        .map(|i| 1_000 + i)
        .chain((0..ONE_USER_CONNS).map(|_| ONE_USER));
    for user in users {
        let mut s = server.connect();
        write!(s, "GET /sse/{user} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        read_until(&mut s, &mut Vec::new(), "retry:");
        readers.push(s);
    }
    let total = FOLLOWERS + ONE_USER_CONNS;
    server.wait_stats("logins", |s| s["connections_logged_in"] == total);
    let addr = server.addr;
    let publishers: Vec<_> = (0..PUBLISHERS)
        .map(|p| {
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let mut reached = 0u64;
                for i in 0..ROUNDS {
                    for subject in [SUBJECT, ONE_USER] {
                        let body = format!("p{p}r{i}s{subject}");
                        let req = format!(
                            "POST /pub/{subject} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        s.write_all(req.as_bytes()).unwrap();
                        let mut buf = Vec::new();
                        read_until(&mut s, &mut buf, "}\n");
                        let text = String::from_utf8_lossy(&buf);
                        let v: serde_json::Value =
                            serde_json::from_str(text[text.find('{').unwrap()..].trim()).unwrap();
                        reached += v["connections"].as_u64().unwrap();
                    }
                }
                reached
            })
        })
        .collect();
    let reached: u64 = publishers.into_iter().map(|p| p.join().unwrap()).sum();
    let per_user = PUBLISHERS * ROUNDS;
    assert_eq!(reached, per_user * total, "replies count every connection");
    let expected: Vec<u64> = (1..=per_user).collect();
    let last = format!("-{per_user}\n");
    for (i, mut s) in readers.into_iter().enumerate() {
        let mut text = String::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !text.contains(&last) {
            assert!(Instant::now() < deadline, "connection {i}: got {text:?}");
            let mut chunk = [0u8; 16384];
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0, "connection {i} closed early");
            text.push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
        let ids: Vec<u64> = text
            .lines()
            .filter_map(|l| l.strip_prefix("id: "))
            .map(|v| v.rsplit('-').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(ids, expected, "connection {i}");
    }
    let stats = server.stats();
    assert_eq!(stats["slow_drops"], 0, "{stats}");
    server
}
