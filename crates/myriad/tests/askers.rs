//! A back-end's query does not wait behind a round of other work (the loop's
//! askers, `crates/gateway/src/pump/askers.rs`). With the server stopped
//! (SIGSTOP), 600 SSE clients send their subscriptions to one channel, then a
//! back-end's keep-alive connection, which asked once before, asks the channel's
//! presence stats; the server resumes and finds all 601 requests ready in one
//! round, the query last in epoll's order. Its answer counts the members joined
//! before it: all 600 if it waited its turn, a few dozen when it is read ahead.
//!
//! And between a mailbox's writes: a batch of messages to a channel of many
//! subscribers is hundreds of fan-outs the loop works through after answering the
//! publisher; a query sent on that answer counts the deliveries made before it.

mod common;

use common::Server;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const CLIENTS: usize = 600;

/// One HTTP/1.1 keep-alive request, and the body of its answer (a
/// `Content-Length` body).
fn ask(s: &mut TcpStream, path: &str) -> String {
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    read_answer(s)
}

fn read_answer(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .expect("a Content-Length");
            if got.len() >= end + 4 + len {
                return text[end + 4..end + 4 + len].to_string();
            }
        }
    }
}

#[test]
fn a_back_ends_query_is_read_ahead_of_a_round_of_subscriptions() {
    let server = Server::start(&["--loops", "1"]);
    let mut backend = TcpStream::connect(server.addr).unwrap();
    backend
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let first = ask(&mut backend, "/presence/room/stats");
    assert!(first.contains("\"connections\":0"), "{first}");

    let mut clients: Vec<TcpStream> = (0..CLIENTS)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    // Every socket accepted before the stop: their requests are readable events,
    // not a listener backlog.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats: serde_json::Value = serde_json::from_str(&ask(&mut backend, "/stats")).unwrap();
        if stats["connections"].as_u64() > Some(CLIENTS as u64) {
            break;
        }
        assert!(Instant::now() < deadline, "not all accepted: {stats}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = server.pid() as i32;
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    for (i, c) in clients.iter_mut().enumerate() {
        write!(
            c,
            "GET /sse/{}?channel=room HTTP/1.1\r\nHost: x\r\n\r\n",
            i + 1
        )
        .unwrap();
    }
    write!(
        backend,
        "GET /presence/room/stats HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    .unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let answer = read_answer(&mut backend);
    let doc: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let before = doc["connections"].as_u64().unwrap();
    assert!(
        before < CLIENTS as u64 / 2,
        "the query waited behind {before} of {CLIENTS} subscriptions: {answer}"
    );
    // And every subscription was served all the same.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let doc: serde_json::Value =
            serde_json::from_str(&ask(&mut backend, "/presence/room/stats")).unwrap();
        if doc["connections"] == CLIENTS {
            assert_eq!(doc["users"], CLIENTS, "{doc}");
            break;
        }
        assert!(Instant::now() < deadline, "not every client joined: {doc}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(clients);
}

#[test]
fn a_back_ends_query_is_read_between_the_writes_of_a_fan_out() {
    const SUBSCRIBERS: usize = 800;
    const MESSAGES: usize = 1000;
    let server = Server::start(&["--loops", "1"]);
    let mut backend = TcpStream::connect(server.addr).unwrap();
    backend
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let stats = |backend: &mut TcpStream| -> serde_json::Value {
        serde_json::from_str(&ask(backend, "/stats")).unwrap()
    };
    let before = stats(&mut backend)["messages_out"].as_u64().unwrap();

    let mut clients: Vec<TcpStream> = (0..SUBSCRIBERS)
        .map(|i| {
            let mut c = TcpStream::connect(server.addr).unwrap();
            write!(
                c,
                "GET /sse/{}?channel=feed HTTP/1.1\r\nHost: x\r\n\r\n",
                i + 1
            )
            .unwrap();
            c
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let doc: serde_json::Value =
            serde_json::from_str(&ask(&mut backend, "/presence/feed/stats")).unwrap();
        if doc["connections"] == SUBSCRIBERS {
            break;
        }
        assert!(Instant::now() < deadline, "not every client joined: {doc}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // One call, MESSAGES fan-outs of SUBSCRIBERS writes each in the loop's mailbox
    // once the publisher has its answer.
    let batch: String = (0..MESSAGES)
        .map(|i| format!("{{\"channel\":\"feed\",\"data\":\"m{i}\"}}\n"))
        .collect();
    let mut publisher = TcpStream::connect(server.addr).unwrap();
    publisher
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        publisher,
        "POST /pub HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{batch}",
        batch.len()
    )
    .unwrap();
    let published = read_answer(&mut publisher);
    let all = (SUBSCRIBERS * MESSAGES) as u64;
    assert!(published.contains(&format!("{all}")), "{published}");
    let during = stats(&mut backend)["messages_out"].as_u64().unwrap() - before;
    assert!(
        during < all / 2,
        "the query waited behind {during} of the batch's {all} writes"
    );
    // And every delivery was made all the same.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let sent = stats(&mut backend)["messages_out"].as_u64().unwrap() - before;
        if sent >= all {
            break;
        }
        assert!(Instant::now() < deadline, "{sent} of {all} delivered");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The clients read nothing: what the kernel would not take stayed queued.
    clients.clear();
}
