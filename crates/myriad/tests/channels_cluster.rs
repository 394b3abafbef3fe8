//! Named channels across processes over NATS (docs/protocol.md "Channels"): a
//! channel's publish reaches its subscribers on every gateway whatever router shard
//! owns it; back-ends publish over NATS and the router's publish port; a channel's
//! history survives `kill -9` with a durable store; subscriptions resume after the
//! router restarts.

mod common;

use common::channels::*;
use common::cluster::*;
use common::*;
use std::io::Read;

/// Two router shards and two gateways over NATS: a channel's publish reaches its
/// subscribers on both gateways with exact counts, whichever shard owns it, and a
/// connection's channels on both shards are joined in one request.
#[test]
fn channels_reach_every_gateway_across_router_shards() {
    let nats = Nats::start();
    let _routers = Router::shards(&nats, 2);
    let a = gateway_with(&nats, &["--router-shards", "2"]);
    let b = gateway_with(&nats, &["--router-shards", "2"]);
    // Names that fall on both shards (FNV-1a of the name, mod 2).
    let names = ["alpha", "beta", "gamma", "delta"];
    let list: String = names.iter().map(|n| format!("channel={n}&")).collect();
    let (mut sa, mut ba) = open_when_up(&a, &format!("/sse/3?{list}"), "", "retry:");
    let (mut sb, mut bb) = open_when_up(&b, &format!("/sse?{list}"), "", "retry:");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for name in names {
        loop {
            let (status, text) = b.request(
                "POST",
                &format!("/pub/{name}"),
                format!("to {name}").as_bytes(),
            );
            let reply: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            if status == 200 && reply["connections"] == 2 {
                assert_eq!(reply["users"], 1, "{reply}");
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{status} {text}");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    for (s, buf) in [(&mut sa, &mut ba), (&mut sb, &mut bb)] {
        read_until(s, buf, "to delta");
        let got: Vec<String> = events(buf).into_iter().map(|e| e.1).collect();
        // Retried publishes may have reached a connection before both had joined.
        for name in names {
            assert!(got.iter().any(|e| e == name), "{got:?}");
        }
    }
}

/// Back-ends publish to a channel over NATS (`myriad.pub.<channel>`, dots and all)
/// and through the router's publish port, with two router shards: exactly one
/// answer, with the exact reach, and the message arrives.
#[test]
fn back_ends_publish_to_channels_over_nats_and_the_publish_port() {
    let nats = Nats::start();
    let (_r0, line) = Router::start_with(
        &nats,
        "memory",
        &[
            "--router-shards",
            "2",
            "--router-shard",
            "0",
            "--publish-listen",
            "127.0.0.1:0",
        ],
    );
    let port = publish_port_of(&line);
    let _r1 = Router::start_with(
        &nats,
        "memory",
        &["--router-shards", "2", "--router-shard", "1"],
    )
    .0;
    let gw = gateway_with(&nats, &["--router-shards", "2"]);
    let (mut s, mut buf) = open_when_up(&gw, "/sse?channel=news.eu&channel=room:1", "", "retry:");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let replies = loop {
        let replies = backend_request(&nats, "news.eu", "over nats");
        if replies.len() == 1 && replies[0].contains(r#""connections":1"#) {
            break replies;
        }
        assert!(std::time::Instant::now() < deadline, "{replies:?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(replies[0], r#"{"connections":1,"users":0}"#);
    assert_eq!(
        publish_at(port, "room:1", "through the port")["connections"],
        1
    );
    read_until(&mut s, &mut buf, "data: through the port");
    let got: Vec<(String, String)> = events(&buf).into_iter().map(|e| (e.1, e.2)).collect();
    assert!(
        got.contains(&("news.eu".into(), "over nats".into())),
        "{got:?}"
    );
    let bad = backend_request(&nats, "a/b", "x");
    assert_eq!(bad.len(), 1, "{bad:?}");
}

/// Durable channel history (`--history-store store`): a server killed with `-9` and
/// started again keeps each channel's messages, numbers and epoch, so an SSE client
/// resuming with its composite id gets what it missed and no gap.
#[test]
fn channel_history_survives_kill_9_with_a_durable_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("myriad.db").display());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let flags = [
        "serve",
        "--listen",
        &listen,
        "--store",
        &store,
        "--history-store",
        "store",
    ];
    let mut server = Server::start_args(&flags);
    let (mut s, mut buf) = open(&server, "/sse?channel=a&channel=b", "", "retry:");
    server.wait_stats("joined", |st| st["channel_subscriptions"] == 2);
    publish_to(&server, "a", "a1");
    publish_to(&server, "b", "b1");
    publish_to(&server, "a", "a2");
    read_until(&mut s, &mut buf, "data: a2");
    let seen = events(&buf);
    let b_id = seen[1].0.clone();
    server.child.kill().unwrap();
    let _ = server.child.wait();
    drop(s);

    let server = Server::start_args(&flags);
    // Resuming from after b1: a2 again is the one message missed.
    let resume = format!("Last-Event-ID: {b_id}\r\n");
    let (mut s, mut buf) = open(&server, "/sse?channel=a&channel=b", &resume, "data: a2");
    publish_to(&server, "b", "b2");
    read_until(&mut s, &mut buf, "data: b2");
    let text = String::from_utf8_lossy(&buf).into_owned();
    assert!(!text.contains("event: gap"), "the epochs were kept: {text}");
    let got: Vec<String> = events(&buf).into_iter().map(|e| e.2).collect();
    assert_eq!(got, ["a2", "b2"], "{text}");
}

/// A router restarted under a gateway (durable history in the shared store): it
/// forgot the gateway's channel subscriptions with its presence, so the gateway
/// tells those connections to resume; the client comes back with its composite id
/// and gets the channel's next message, with no gap.
#[test]
fn channel_connections_resume_after_the_router_restarts() {
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("graph.db").display());
    let durable = ["--history-store", "store"];
    let router = Router::start_with(&nats, &store, &durable).0;
    let gw = gateway(&nats);
    let (mut s, mut buf) = open_when_up(&gw, "/sse?channel=room:1", "", "retry:");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while publish_to(&gw, "room:1", "one")["connections"] != 1 {
        assert!(std::time::Instant::now() < deadline, "never joined");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    read_until(&mut s, &mut buf, "data: one");
    let last = events(&buf).last().unwrap().0.clone();
    router.kill();
    let _router = Router::start_with(&nats, &store, &durable).0;
    // Told to resume: the stream ends (the client's EventSource would reconnect).
    let mut rest = Vec::new();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let _ = s.read_to_end(&mut rest);
    // As a browser would: reconnect with the last id until the message arrives (a
    // router that asks for presence again tells the connection to resume again).
    let resume = format!("Last-Event-ID: {last}\r\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (mut s, mut buf) = open_when_up(&gw, "/sse?channel=room:1", &resume, "retry:");
        let (status, text) = gw.request("POST", "/pub/room:1", b"two");
        if status == 200 && text.contains(r#""connections":1"#) {
            read_until(&mut s, &mut buf, "data: two");
            let text = String::from_utf8_lossy(&buf).into_owned();
            assert!(!text.contains("event: gap"), "{text}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{status} {text}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
