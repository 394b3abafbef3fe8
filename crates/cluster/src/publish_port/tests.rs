//! The port's HTTP handling over real sockets, with a router task that answers each
//! publish with counts made from the request (the router itself, over NATS, is
//! tested in `crates/myriad/tests/publish_port.rs`).

use super::*;
use bus::Request;
use std::io::{Read, Write};
use std::net::TcpStream;

/// A port on a free loopback port, served on a thread of its own; each publish to
/// `s` with payload `p` is answered `connections = s`, `users = len(p)` (a batch:
/// the sums over its items).
fn port(config: PortConfig) -> SocketAddr {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let port = PublishPort::bind("127.0.0.1:0".parse().unwrap(), config, false).unwrap();
    let addr = port.local_addr().unwrap();
    std::thread::spawn(move || {
        runtime.block_on(async move {
            let mut calls = port.serve_to_router().unwrap();
            while let Some(call) = calls.recv().await {
                let items = match call.request {
                    Request::Publish { subject, payload } => vec![(subject, payload)],
                    Request::PublishBatch { items, .. } => items,
                    other => panic!("not a publish: {other:?}"),
                };
                let reply = Reply::Published {
                    messages: items.len() as u64,
                    connections: items.iter().map(|i| i.0).sum(),
                    users: items.iter().map(|i| i.1.len() as u64).sum(),
                };
                let _ = call.reply.send(reply);
            }
        })
    });
    addr
}

fn open_port() -> SocketAddr {
    port(PortConfig {
        api_keys: ApiKeys::default(),
        max_message: 64,
        max_batch: 1024,
    })
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

fn read_to_close(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_request_written_a_byte_at_a_time_is_answered_whole() {
    let addr = open_port();
    let mut s = connect(addr);
    let raw = "POST /pub/5 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\
               Connection: close\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n";
    for byte in raw.as_bytes() {
        s.write_all(std::slice::from_ref(byte)).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    let text = read_to_close(&mut s);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("Connection: close"), "{text}");
    assert!(
        text.ends_with("{\"connections\":5,\"users\":3}\n"),
        "{text}"
    );
}

#[test]
fn pipelined_requests_are_answered_in_order_on_one_connection() {
    let addr = open_port();
    let mut s = connect(addr);
    let batch = "{\"subject\":2,\"data\":\"yy\"}\n{\"subject\":3,\"data\":\"zzz\"}\n";
    let raw = format!(
        "POST /pub/1 HTTP/1.1\r\nContent-Length: 1\r\n\r\nx\
         POST /pub HTTP/1.1\r\nContent-Length: {}\r\n\r\n{batch}\
         POST /pub/4 HTTP/1.0\r\nContent-Length: 4\r\n\r\nwwww",
        batch.len()
    );
    s.write_all(raw.as_bytes()).unwrap();
    let text = read_to_close(&mut s);
    let first = text.find("{\"connections\":1,\"users\":1}").expect(&text);
    let batch = text
        .find("{\"messages\":2,\"connections\":5,\"users\":5}")
        .expect(&text);
    let last = text.find("{\"connections\":4,\"users\":4}").expect(&text);
    assert!(first < batch && batch < last, "{text}");
    // HTTP/1.0 without keep-alive: the connection closed after the third.
    assert!(
        text.ends_with("{\"connections\":4,\"users\":4}\n"),
        "{text}"
    );
}

#[test]
fn a_malformed_head_after_a_good_request_gets_its_400_alone() {
    let addr = open_port();
    let mut s = connect(addr);
    let raw = "POST /pub/2 HTTP/1.1\r\nContent-Length: 1\r\n\r\nx\
               POST /pub/2 HTTP/1.1\r\nContent-Length: nope\r\n\r\n";
    s.write_all(raw.as_bytes()).unwrap();
    let text = read_to_close(&mut s);
    assert_eq!(text.matches("HTTP/1.1 200").count(), 1, "{text}");
    assert_eq!(text.matches("HTTP/1.1 400").count(), 1, "{text}");
    assert!(text.ends_with("invalid Content-Length\n"), "{text}");
}

#[test]
fn a_refused_body_closes_the_connection_and_a_refused_head_without_one_does_not() {
    let addr = open_port();
    // 404 without a body: the next request on the connection is served.
    let mut s = connect(addr);
    let raw = "GET /sse/1 HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n";
    s.write_all(raw.as_bytes()).unwrap();
    let text = read_to_close(&mut s);
    assert!(text.starts_with("HTTP/1.1 404"), "{text}");
    assert!(text.ends_with("ok\n"), "{text}");
    // 413 before the body is read: closed, the bytes after it never parsed.
    let mut s = connect(addr);
    let body = "x".repeat(65);
    let raw = format!(
        "POST /pub/1 HTTP/1.1\r\nContent-Length: 65\r\n\r\n{body}GET /healthz HTTP/1.1\r\n\r\n"
    );
    s.write_all(raw.as_bytes()).unwrap();
    let text = read_to_close(&mut s);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("Connection: close"), "{text}");
    assert!(!text.contains("ok\n"), "{text}");
    // A chunked body over the limit is refused as it is read.
    let mut s = connect(addr);
    let raw = "POST /pub/1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n41\r\n";
    s.write_all(raw.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let text = read_to_close(&mut s);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
}

#[test]
fn a_key_is_asked_for_when_keys_are_set() {
    let addr = port(PortConfig {
        api_keys: api_keys(&["k-0123456789abcdef".to_string()]).unwrap(),
        max_message: 64,
        max_batch: 1024,
    });
    let ask = |auth: &str| {
        let mut s = connect(addr);
        let raw = format!(
            "POST /pub/1 HTTP/1.1\r\n{auth}Content-Length: 1\r\nConnection: close\r\n\r\nx"
        );
        s.write_all(raw.as_bytes()).unwrap();
        read_to_close(&mut s)
    };
    let none = ask("");
    assert!(none.starts_with("HTTP/1.1 401"), "{none}");
    assert!(none.contains("WWW-Authenticate: Bearer"), "{none}");
    let wrong = ask("Authorization: Bearer k-wrong\r\n");
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    let right = ask("Authorization: Bearer k-0123456789abcdef\r\n");
    assert!(right.starts_with("HTTP/1.1 200"), "{right}");
}
