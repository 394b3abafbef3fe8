//! Friends online over real sockets (docs/protocol.md "Friends online"): a
//! subscription with `friends=1` gets `online`/`offline` of the users its user
//! follows, on SSE, the chunked stream and a framed WebSocket; a followee back
//! within the grace is not announced; a follower who did not opt in gets nothing;
//! across processes, a followee on a gateway killed with -9 is announced offline
//! to a follower on another gateway; with router shards, a follower hears every
//! followee whichever shard owns each of them.

mod common;

use common::channels::{open, open_when_up, ws_open};
use common::cluster::{gateway, gateway_with, Nats, Router};
use common::*;
use std::time::{Duration, Instant};

fn follow(server: &Server, follower: u64, followed: u64) {
    let path = format!("/subscriptions/{follower}/{followed}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, text) = server.request("PUT", &path, b"");
        if status == 200 {
            return;
        }
        assert!(Instant::now() < deadline, "{status} {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The payloads of `event: friends` in an SSE buffer, in order.
fn friends_events(buf: &[u8]) -> Vec<serde_json::Value> {
    let text = String::from_utf8_lossy(buf);
    text.split("\n\n")
        .filter(|e| e.contains("event: friends\n"))
        .map(|e| {
            let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            serde_json::from_str(data).unwrap()
        })
        .collect()
}

#[test]
fn an_opted_in_follower_hears_online_and_offline_once_on_every_transport() {
    let server = Server::start(&["--presence-grace", "2"]);
    follow(&server, 7, 3);
    follow(&server, 7, 9);
    follow(&server, 8, 9);
    let (mut sse, mut sbuf) = open(&server, "/sse/7?friends=1", "", "retry:");
    let (mut stream, mut tbuf) = open(&server, "/sub/7?friends=1", "", "welcome 7");
    let (mut ws, mut wbuf) = ws_open(&server, "/ws/7?friends=1");
    // 8 follows 9 too but did not ask.
    let (mut quiet, mut qbuf) = open(&server, "/sse/8", "", "retry:");

    let nine = open(&server, "/sse/9", "", "retry:");
    let nine_again = open(&server, "/sse/9", "", "retry:"); // a second connection: nothing
    read_until(&mut sse, &mut sbuf, "\"online\":[9]");
    read_until(
        &mut stream,
        &mut tbuf,
        r#"friends {"online":[9],"offline":[]}"#,
    );
    let frame = server_text(&mut ws, &mut wbuf);
    let frame: serde_json::Value = serde_json::from_str(&frame).unwrap();
    assert_eq!(
        frame["friends"]["online"],
        serde_json::json!([9]),
        "{frame}"
    );
    assert!(frame["pos"].is_string(), "{frame}");

    // Both of 9's connections go and one comes back within the grace: nothing.
    drop(nine);
    drop(nine_again);
    let nine = open(&server, "/sse/9", "", "retry:");
    std::thread::sleep(Duration::from_secs(4)); // past the grace and two ticks
                                                // 3 comes: the next push names 3 alone.
    let three = open(&server, "/sse/3", "", "retry:");
    read_until(&mut sse, &mut sbuf, "\"online\":[3]");
    // 9 goes for good: offline after the grace, once.
    drop(nine);
    read_until(&mut sse, &mut sbuf, "\"offline\":[9]");
    drop(three);
    read_until(&mut sse, &mut sbuf, "\"offline\":[3]");
    assert_eq!(
        friends_events(&sbuf),
        [
            serde_json::json!({"online": [9], "offline": []}),
            serde_json::json!({"online": [3], "offline": []}),
            serde_json::json!({"online": [], "offline": [9]}),
            serde_json::json!({"online": [], "offline": [3]}),
        ]
    );
    read_until(
        &mut stream,
        &mut tbuf,
        r#"friends {"online":[],"offline":[3]}"#,
    );
    // The follower who did not ask saw none of it.
    server.publish(8, "marker");
    read_until(&mut quiet, &mut qbuf, "data: marker");
    assert!(!String::from_utf8_lossy(&qbuf).contains("friends"));
}

#[test]
fn friends_1_is_refused_without_a_user_and_on_a_long_poll() {
    let server = Server::start(&[]);
    for path in [
        "/sse?channel=a&friends=1",
        "/poll/7?friends=1",
        "/sse/7?friends=2",
    ] {
        let (status, text) = server.request("GET", path, b"");
        assert_eq!(status, 400, "{path}: {text}");
    }
}

#[test]
fn across_processes_a_killed_gateway_s_followee_is_announced_offline() {
    let nats = Nats::start();
    let _router = Router::start_with(&nats, "memory", &["--presence-grace", "1"]).0;
    let gw_a = gateway(&nats);
    let gw_b = gateway(&nats);
    follow(&gw_b, 7, 42);
    let (mut watcher, mut wbuf) = open_when_up(&gw_b, "/sse/7?friends=1", "", "retry:");
    let (_a1, _) = open_when_up(&gw_a, "/sse/42", "", "retry:");
    read_until(&mut watcher, &mut wbuf, "\"online\":[42]");
    let mut gw_a = gw_a;
    gw_a.child.kill().unwrap();
    gw_a.child.wait().unwrap();
    read_until(&mut watcher, &mut wbuf, "\"offline\":[42]");
    assert_eq!(
        friends_events(&wbuf),
        [
            serde_json::json!({"online": [42], "offline": []}),
            serde_json::json!({"online": [], "offline": [42]}),
        ]
    );
}

/// Every user named `online` (or `offline`) in `events`, in order.
fn named(events: &[serde_json::Value], key: &str) -> Vec<u64> {
    events
        .iter()
        .flat_map(|e| e[key].as_array().cloned().unwrap_or_default())
        .map(|v| v.as_u64().unwrap())
        .collect()
}

/// Reads `stream` until `events` name each of `users` under `key`.
fn read_until_named(
    stream: &mut std::net::TcpStream,
    buf: &mut Vec<u8>,
    key: &str,
    users: &[u64],
) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let events = friends_events(buf);
        let seen = named(&events, key);
        if users.iter().all(|u| seen.contains(u)) {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "{key} {users:?} never came: {events:?}"
        );
        let mut chunk = [0u8; 4096];
        match std::io::Read::read(stream, &mut chunk) {
            Ok(0) => panic!("closed before {key} {users:?}: {events:?}"),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("read error {e}"),
        }
    }
}

/// Two router shards (even users are shard 0's, odd users shard 1's): a login is
/// seen by its user's shard, which holds the user's followers, and a follower's
/// friends companion is on the follower's shard, so most changes cross from one
/// shard to the other. Each watcher hears each followee online once, then offline
/// once, and nothing of users it does not follow.
#[test]
fn across_router_shards_a_follower_hears_every_followee_once() {
    let nats = Nats::start();
    let _routers = Router::shards_with(&nats, 2, &["--presence-grace", "1"]);
    let a = gateway_with(&nats, &["--router-shards", "2"]);
    let b = gateway_with(&nats, &["--router-shards", "2"]);
    // 7 (shard 1) follows 42 and 44 (shard 0's) and 43 (its own shard's);
    // 8 (shard 0) follows 43 (shard 1's) and 42 (its own shard's); 45 nobody's.
    for (follower, followed) in [(7, 42), (7, 43), (7, 44), (8, 43), (8, 42)] {
        follow(&a, follower, followed);
    }
    let (mut w7, mut b7) = open_when_up(&a, "/sse/7?friends=1", "", "retry:");
    let (mut w8, mut b8) = open_when_up(&b, "/sse/8?friends=1", "", "retry:");
    let followees: Vec<_> = [(&a, 42), (&b, 43), (&b, 44), (&a, 45)]
        .into_iter()
        .map(|(gw, user)| open_when_up(gw, &format!("/sse/{user}"), "", "retry:"))
        .collect();
    read_until_named(&mut w7, &mut b7, "online", &[42, 43, 44]);
    read_until_named(&mut w8, &mut b8, "online", &[42, 43]);
    drop(followees);
    let e7 = read_until_named(&mut w7, &mut b7, "offline", &[42, 43, 44]);
    let e8 = read_until_named(&mut w8, &mut b8, "offline", &[42, 43]);
    for (events, expected) in [(e7, vec![42, 43, 44]), (e8, vec![42, 43])] {
        for key in ["online", "offline"] {
            let mut got = named(&events, key);
            got.sort_unstable();
            assert_eq!(got, expected, "{key} once each, no one else: {events:?}");
        }
    }
}
