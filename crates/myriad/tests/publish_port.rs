//! The router's publish port (`--publish-listen`): back-ends publish over HTTP
//! straight to the router, with the gateways' requests and answers. A publish
//! reaches every connection of the subject and its followers on every gateway with
//! exact counts; a batch arrives in its order; keep-alive, chunked bodies and
//! `Expect: 100-continue` work (curl); what the port does not serve, a browser
//! page, a missing or wrong API key, an oversized body and a malformed head get
//! their clear errors; two router shards share the port; one process refuses the
//! flag and says where its publishes go.

mod common;

use common::cluster::*;
use common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

/// A router with `--publish-listen` on a free port (more `extra` flags), and the
/// port's address from its start line.
fn router_with_port(nats: &Nats, extra: &[&str]) -> (Router, SocketAddr) {
    let mut args = vec!["--publish-listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let (router, line) = Router::start_with(nats, "memory", &args);
    (router, publish_port_of(&line))
}

/// Sends `raw` on a fresh connection and reads until the server closes it.
fn exchange(addr: SocketAddr, raw: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// `POST path` with `body` and extra header lines; (status, whole response).
fn post(addr: SocketAddr, path: &str, headers: &str, body: &str) -> (u16, String) {
    let raw = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let text = exchange(addr, &raw);
    (parse_response(text.as_bytes()).0, text)
}

/// curl, with `args`; its stdout (the response body) and whether it succeeded.
fn curl(args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("curl is installed (scripts/setup.sh)");
    assert!(out.status.success(), "curl {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_publish_to_the_router_s_port_reaches_every_gateway_with_exact_counts() {
    let nats = Nats::start();
    let (_router, port) = router_with_port(&nats, &[]);
    let (a, b) = (gateway(&nats), gateway(&nats));
    // 2 and 3 follow 1; 1 on gateway a, 2 on b, 3 on both.
    assert_eq!(a.request("POST", "/subscriptions", b"2 1\n3 1\n").0, 200);
    let mut held = vec![
        (1, sse(&a, 1, None)),
        (2, sse(&b, 2, None)),
        (3, sse(&a, 3, None)),
        (3, sse(&b, 3, None)),
    ];
    wait_router_connections(&a, 4);

    let url = format!("http://{port}");
    let reply = curl(&[
        "-X",
        "POST",
        "--data-binary",
        "hello",
        &format!("{url}/pub/1"),
    ]);
    assert_eq!(reply, "{\"connections\":4,\"users\":3}\n");
    for (_, (stream, buf)) in &mut held {
        read_until(stream, buf, "data: hello");
    }

    // A batch, chunked with Expect: 100-continue (curl sends both for a body from
    // stdin), arrives in its order on every follower.
    let batch = "{\"subject\":1,\"data\":\"one\"}\n{\"subject\":3,\"data\":\"two\"}\n";
    let mut child = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "-X",
            "POST",
            "-H",
            "Transfer-Encoding: chunked",
        ])
        .args(["-H", "Expect: 100-continue", "--data-binary", "@-"])
        .arg(format!("{url}/pub"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(batch.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    // one: 4 connections of 3 users; two: user 3's 2 connections.
    let reply = String::from_utf8_lossy(&out.stdout);
    assert_eq!(reply, "{\"messages\":2,\"connections\":6,\"users\":4}\n");
    let (stream, buf) = &mut held[3].1;
    read_until(stream, buf, "data: two");
    let text = String::from_utf8_lossy(buf);
    let (one, two) = (
        text.find("data: one").unwrap(),
        text.find("data: two").unwrap(),
    );
    assert!(one < two, "the batch's order: {text}");

    // Keep-alive: two publishes and a health check on one connection.
    let mut s = TcpStream::connect(port).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let two = "POST /pub/2 HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx\
               POST /pub/2 HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\ny\
               GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    s.write_all(two.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert_eq!(
        out.matches("{\"connections\":1,\"users\":1}").count(),
        2,
        "{out}"
    );
    assert!(out.ends_with("ok\n"), "{out}");
}

#[test]
fn what_the_port_does_not_serve_gets_a_clear_error() {
    let nats = Nats::start();
    let (_router, port) = router_with_port(&nats, &["--max-message", "16"]);

    let text = exchange(
        port,
        "GET /sub/1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(text.starts_with("HTTP/1.1 404"), "{text}");
    assert!(
        text.contains("subscriptions and the rest of the API are on the gateways"),
        "{text}"
    );

    let (status, text) = post(port, "/pub/1", "Origin: https://evil.example\r\n", "x");
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("no browser requests"), "{text}");

    let (status, text) = post(port, "/pub/1", "", &"x".repeat(17));
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("body larger than 16 bytes"), "{text}");

    let (status, text) = post(port, "/pub", "", "{\"subject\":1}\n");
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("line 1"), "{text}");

    let (status, text) = post(port, "/pub/007", "", "x");
    assert_eq!(status, 400, "{text}");

    let text = exchange(port, "POST /pub/1 HTTP/1.1\r\nContent-Length: x\r\n\r\n");
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert!(text.contains("invalid Content-Length"), "{text}");

    // The router is still serving: a publish to nobody is counted as such.
    let (status, text) = post(port, "/pub/1", "", "x");
    assert_eq!(status, 200, "{text}");
    assert!(
        text.ends_with("{\"connections\":0,\"users\":0}\n"),
        "{text}"
    );
}

#[test]
fn api_keys_guard_the_port() {
    let nats = Nats::start();
    let (_router, port) = router_with_port(&nats, &["--api-key", "s3cret-key-for-tests"]);
    let (status, text) = post(port, "/pub/1", "", "x");
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("WWW-Authenticate"), "{text}");
    let (status, text) = post(port, "/pub/1", "Authorization: Bearer nope\r\n", "x");
    assert_eq!(status, 401, "{text}");
    let key = "Authorization: Bearer s3cret-key-for-tests\r\n";
    let (status, text) = post(port, "/pub/1", key, "x");
    assert_eq!(status, 200, "{text}");
    // The health check needs no key.
    let text = exchange(
        port,
        "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
}

#[test]
fn two_router_shards_share_the_port_and_keep_a_batch_s_order() {
    let nats = Nats::start();
    // A free port, given to both shards (SO_REUSEPORT).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let listen = port.to_string();
    let shard = |i: &str| {
        let flags = [
            "--publish-listen",
            &listen,
            "--router-shards",
            "2",
            "--router-shard",
            i,
        ];
        Router::start_with(&nats, "memory", &flags).0
    };
    let (_r0, _r1) = (shard("0"), shard("1"));
    let (a, b) = (
        gateway_with(&nats, &["--router-shards", "2"]),
        gateway_with(&nats, &["--router-shards", "2"]),
    );
    // User 2 (shard 0) follows 7 (shard 1) and 8 (shard 0); 5 (shard 1) follows 8.
    assert_eq!(
        a.request("POST", "/subscriptions", b"2 7\n2 8\n5 8\n").0,
        200
    );
    let (mut s2, mut buf2) = sse(&b, 2, None);
    let (mut s5, mut buf5) = sse(&a, 5, None);
    wait_router_connections(&a, 2);

    // Each connection lands on either shard: every answer must be the same.
    for _ in 0..6 {
        let (status, text) = post(port, "/pub/8", "", "m");
        assert_eq!(status, 200, "{text}");
        assert!(
            text.ends_with("{\"connections\":2,\"users\":2}\n"),
            "{text}"
        );
    }
    let batch: String = (0..10)
        .map(|i| {
            format!(
                "{{\"subject\":{},\"data\":\"b{i}\"}}\n",
                if i % 2 == 0 { 7 } else { 8 }
            )
        })
        .collect();
    let (status, text) = post(port, "/pub", "", &batch);
    assert_eq!(status, 200, "{text}");
    // 7 reaches user 2; 8 reaches 2 and 5.
    assert!(
        text.ends_with("{\"messages\":10,\"connections\":15,\"users\":15}\n"),
        "{text}"
    );
    read_until(&mut s2, &mut buf2, "data: b9");
    read_until(&mut s5, &mut buf5, "data: b9");
    let text = String::from_utf8_lossy(&buf2);
    let at: Vec<usize> = (0..10)
        .map(|i| text.find(&format!("data: b{i}\n")).expect("every item"))
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "the batch's order: {text}"
    );
}

#[test]
fn one_process_refuses_the_router_s_port_and_says_where_publishes_go() {
    let out = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store", "memory"])
        .args(["--publish-listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--publish-listen is the router's port"),
        "{err}"
    );
    assert!(
        err.contains("one process answers POST /pub on its --listen port"),
        "{err}"
    );
}
