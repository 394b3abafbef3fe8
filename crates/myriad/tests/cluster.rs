//! One myriad over several processes (issue 9): the real binary as one router and
//! two gateways on two ports, linked by a real nats-server started by each test on
//! a free port (so tests never share subjects with others on the shared broker).
//! Semantics must be those of one process: exact reply counts, every connection of
//! the subject and of its followers reached whatever gateway holds it, per-user
//! order, resume on the other gateway, and the faults: a gateway killed, the router
//! killed and restarted.

mod common;

use common::cluster::*;
use common::*;
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn a_publish_reaches_every_connection_and_follower_on_both_gateways() {
    let nats = Nats::start();
    let _router = Router::start(&nats, "memory");
    let (a, b) = (gateway(&nats), gateway(&nats));
    // 2 and 3 follow 1; 4 follows nobody.
    assert_eq!(a.request("POST", "/subscriptions", b"2 1\n3 1\n").0, 200);
    let (mut s1a, _) = subscribe_stream(&a, 1);
    let (mut s1b, _) = subscribe_stream(&b, 1);
    let (mut s2b, _) = subscribe_stream(&b, 2);
    let (mut s3a, _) = subscribe_stream(&a, 3);
    let (mut s3b, _) = subscribe_stream(&b, 3);
    let (_s4a, _) = subscribe_stream(&a, 4);
    wait_router_connections(&a, 6);
    let reply = b.publish(1, "hello");
    assert_eq!(reply["connections"], 5, "{reply}");
    assert_eq!(reply["users"], 3, "{reply}");
    for s in [&mut s1a, &mut s1b, &mut s2b, &mut s3a, &mut s3b] {
        read_until(s, &mut Vec::new(), "hello");
    }
    // A unicast to 4 reaches only 4.
    assert_eq!(a.publish(4, "x")["connections"], 1);
}

#[test]
fn each_users_messages_arrive_in_sequence_order_on_every_connection() {
    let nats = Nats::start();
    let _router = Router::start(&nats, "memory");
    let (a, b) = (gateway(&nats), gateway(&nats));
    assert_eq!(a.request("PUT", "/subscriptions/6/5", b"").0, 200);
    let (mut on_a, mut buf_a) = sse(&a, 6, None);
    let (mut on_b, mut buf_b) = sse(&b, 6, None);
    wait_router_connections(&a, 2);
    // Publishers on both gateways, to the user and to a subject they follow.
    for i in 1..=40u64 {
        let publisher = if i % 2 == 0 { &a } else { &b };
        let subject = if i % 3 == 0 { 5 } else { 6 };
        assert_eq!(
            publisher.publish(subject, &format!("m{i}"))["connections"],
            2
        );
    }
    for (s, buf) in [(&mut on_a, &mut buf_a), (&mut on_b, &mut buf_b)] {
        read_until(s, buf, "data: m40");
        let events = sse_events(buf);
        let ids: Vec<u64> = events.iter().map(|e| e.0).collect();
        assert_eq!(ids, (1..=40).collect::<Vec<_>>());
        let data: Vec<String> = events.into_iter().map(|e| e.1).collect();
        assert_eq!(data, (1..=40).map(|i| format!("m{i}")).collect::<Vec<_>>());
    }
}

#[test]
fn sse_and_long_poll_resume_on_the_other_gateway() {
    let nats = Nats::start();
    let _router = Router::start(&nats, "memory");
    let (a, b) = (gateway(&nats), gateway(&nats));
    let seen = {
        let (mut s, mut buf) = sse(&a, 9, None);
        wait_router_connections(&b, 1);
        a.publish(9, "one");
        b.publish(9, "two");
        read_until(&mut s, &mut buf, "data: two");
        last_sse_id(&buf)
    };
    wait_router_connections(&b, 0);
    a.publish(9, "three");
    b.publish(9, "four");
    // SSE on the other gateway from id 2: exactly 3 and 4, no gap.
    assert!(seen.ends_with("-2"), "{seen}");
    let (mut s, mut buf) = sse(&b, 9, Some(&seen));
    read_until(&mut s, &mut buf, "data: four");
    let text = String::from_utf8_lossy(&buf).to_string();
    assert!(!text.contains("event: gap"), "{text}");
    assert_eq!(
        sse_events(&buf),
        [(3, "three".to_string()), (4, "four".to_string())]
    );
    // Long-poll on the first gateway from 3: message 4 at once.
    let mut p = a.connect();
    write!(p, "GET /poll/9?since=3 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    read_until(&mut p, &mut buf, "four");
    let text = String::from_utf8_lossy(&buf).to_string();
    let body: serde_json::Value =
        serde_json::from_str(text.split_once("\r\n\r\n").unwrap().1.trim()).unwrap();
    assert_eq!(body["messages"][0]["seq"], 4, "{body}");
    assert_eq!(body["last"], 4);
    assert_eq!(body["gap"], false);
}

#[test]
fn a_killed_gateway_is_forgotten_by_the_router() {
    let nats = Nats::start();
    let _router = Router::start(&nats, "memory");
    let (mut a, b) = (gateway(&nats), gateway(&nats));
    let _held_a: Vec<_> = (0..3).map(|_| subscribe_stream(&a, 11)).collect();
    let (_held_b, _) = subscribe_stream(&b, 11);
    wait_router_connections(&b, 4);
    b.wait_stats("two gateways at the router", |s| s["gateways"] == 2);
    assert_eq!(b.publish(11, "x")["connections"], 4);
    // kill -9: no logout is ever sent; only the silence tells the router.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    wait_router_connections(&b, 1);
    b.wait_stats("one gateway at the router", |s| s["gateways"] == 1);
    assert_eq!(b.publish(11, "y")["connections"], 1);
}

#[test]
fn a_restarted_router_rebuilds_presence_keeps_subscriptions_and_tells_the_gap() {
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("graph.db").display());
    let router = Router::start(&nats, &store);
    let (a, b) = (gateway(&nats), gateway(&nats));
    assert_eq!(
        b.request("POST", "/subscriptions", b"21 20\n22 20\n").0,
        200
    );
    let (mut s20, _) = subscribe_stream(&a, 20);
    let (mut s21, _) = subscribe_stream(&b, 21);
    let (mut s22, mut buf22) = sse(&a, 22, None);
    wait_router_connections(&a, 3);
    assert_eq!(a.publish(20, "before")["connections"], 3);
    read_until(&mut s22, &mut buf22, "data: before");
    // User 23 has three messages in the old router's history, then leaves.
    for m in ["x", "y", "z"] {
        a.publish(23, m);
    }
    router.kill();
    let _router = Router::start(&nats, &store);
    // The gateways re-send their presence; the index comes back from the store.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = publish_when_up(&b, 20, "after");
        if reply["connections"] == 3 {
            assert_eq!(reply["users"], 3);
            break;
        }
        assert!(Instant::now() < deadline, "presence not rebuilt: {reply}");
        std::thread::sleep(Duration::from_millis(200));
    }
    for s in [&mut s20, &mut s21] {
        read_until(s, &mut Vec::new(), "after");
    }
    read_until(&mut s22, &mut buf22, "data: after");
    // Resuming from before the restart: the new router's history does not hold it.
    let (mut again, mut buf) = sse(&b, 23, Some("1-3"));
    read_until(&mut again, &mut buf, "event: gap");
}

/// SPEC C4: a back-end publishes by sending to `myriad.pub.<subject>` over NATS,
/// and a request gets the counts. Spoken here in NATS's own text protocol.
#[test]
fn a_back_end_publishes_through_nats_and_gets_the_counts() {
    let nats = Nats::start();
    let _router = Router::start(&nats, "memory");
    let a = gateway(&nats);
    let (mut s, _) = subscribe_stream(&a, 31);
    wait_router_connections(&a, 1);
    let replies = backend_request(&nats, 31, "via-bus");
    read_until(&mut s, &mut Vec::new(), "via-bus");
    assert_eq!(replies, [r#"{"connections":1,"users":1}"#]);
}

/// nats-server restarted under a router and two gateways: everything reconnects by
/// itself; a publish while the broker is away is never accepted and lost: refused
/// (503) once the gateway knows the link is down, or, sent in the instant before it
/// knew, answered 504 "may or may not have been done" when the router does not
/// answer (the NATS client may still send it after reconnecting); afterwards the
/// counts are exact again.
#[test]
fn everything_reconnects_after_a_nats_restart() {
    let nats = Nats::start();
    let _router = Router::start(&nats, "memory");
    let (a, b) = (gateway(&nats), gateway(&nats));
    let (mut s1, _) = subscribe_stream(&a, 41);
    let (mut s2, _) = subscribe_stream(&b, 41);
    wait_router_connections(&a, 2);
    assert_eq!(a.publish(41, "one")["connections"], 2);
    let port = nats.port();
    drop(nats);
    let (status, body) = a.request("POST", "/pub/41", b"lost?");
    assert!(
        (status == 503 && body.contains("the NATS link to the router is down"))
            || (status == 504 && body.contains("may or may not have been done")),
        "a publish without a broker is refused or timed out, never a 200: {status} {body}"
    );
    let nats = Nats::start_on(port);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = publish_when_up(&b, 41, "two");
        if reply["connections"] == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "presence not back: {reply}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // A stream may be told to resume (the last chunk) where a delivery missed its
    // connection: the retry above published "two" again, so a first "two" that
    // reached only the other connection shows as a skip in numbers. (It did, one
    // run in five to ten, while the router forgot every gateway on its own
    // reconnect; it keeps their presence since.) Resumed from history, the first
    // "two" is there, with no gap.
    for (s, gw) in [(&mut s1, &a), (&mut s2, &b)] {
        let mut buf = Vec::new();
        if read_until_or_closed(s, &mut buf, "two") {
            continue;
        }
        let text = String::from_utf8_lossy(&buf).into_owned();
        assert!(
            text.ends_with("0\r\n\r\n"),
            "closed without the last chunk: {text:?}"
        );
        let mut resumed = gw.connect();
        write!(resumed, "GET /sub/41?since=0 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let mut replay = Vec::new();
        read_until(&mut resumed, &mut replay, "two");
        let replay = String::from_utf8_lossy(&replay);
        let position = replay.lines().find(|l| l.starts_with("position "));
        assert!(
            position.is_some_and(|l| !l.contains("gap")),
            "resumed without a position or with a gap: {replay:?}"
        );
        assert!(replay.find("one") < replay.find("two"), "{replay:?}");
    }
    // Each gateway counts the lost connection in its /stats (and so in /metrics).
    for gw in [&a, &b] {
        let stats = gw.stats();
        let lost = stats["nats_disconnects"].as_u64();
        assert!(lost.is_some_and(|n| n >= 1), "{stats}");
        assert_eq!(stats["nats_slow_consumer_drops"], 0, "{stats}");
    }
    drop(nats);
}

/// `myriad msggen --nats` publishes through the broker and counts the replies.
#[test]
fn msggen_publishes_through_nats() {
    let nats = Nats::start();
    let _router = Router::start(&nats, "memory");
    let a = gateway(&nats);
    let (mut s, _) = subscribe_stream(&a, 1);
    wait_router_connections(&a, 1);
    let out = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(["msggen", "--nats", &nats.url, "--max", "1", "--rate", "20"])
        .args(["--duration", "1", "--publishers", "2", "--json", "--quiet"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent = summary["sent"].as_u64().unwrap();
    assert!(sent > 0, "{summary}");
    assert_eq!(summary["errors"], 0, "{summary}");
    assert_eq!(summary["deliveries"], sent, "{summary}");
    read_until(&mut s, &mut Vec::new(), "ts=");
}

#[test]
fn the_router_serves_its_own_stats_and_metrics() {
    let nats = Nats::start();
    let (router, line) = Router::start_with(&nats, "memory", &["--admin", "127.0.0.1:0"]);
    let admin = admin_of(&line);
    let gw = gateway(&nats);
    let (_held, _) = subscribe_stream(&gw, 5);
    wait_router_connections(&gw, 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    let stats = loop {
        let stats: serde_json::Value = serde_json::from_str(&get(&admin, "/stats")).unwrap();
        if stats["extra"]["gateways"] == 1 || Instant::now() > deadline {
            break stats;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let extra = &stats["extra"];
    assert_eq!(extra["gateways"], 1, "{stats}");
    assert_eq!(extra["router_pid"], router.child.id(), "{stats}");
    assert_eq!(extra["connections_logged_in"], 1, "{stats}");
    assert_eq!(stats["sample"]["pid"], router.child.id(), "{stats}");
    let metrics = get(&admin, "/metrics");
    assert!(
        metrics.contains(&format!("pid=\"{}\"", router.child.id())),
        "{metrics}"
    );
}
