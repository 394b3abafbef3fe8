//! Presence queries over real sockets (docs/protocol.md "Presence"): who is in a
//! channel and with how many connections, its counts alone, a user's own
//! presence, the bound on a list, and which followed subjects are online. Exact on
//! one process and across gateway processes and router shards over NATS, where a
//! gateway killed with `-9` has its members gone once the router forgets it.

mod common;

use common::cluster::*;
use common::*;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// An SSE connection on `path`, read up to the `id:` line that ends its start
/// (every join answered); retried while the gateway's router is not up (503).
fn sse_on(server: &Server, path: &str) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut s = server.connect();
        write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        if read_until_or_closed(&mut s, &mut buf, "\nid: ") {
            read_until(&mut s, &mut buf, "\n\n");
            return s;
        }
        let got = String::from_utf8_lossy(&buf).into_owned();
        assert!(Instant::now() < deadline, "{got}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `GET path` answered 200, as JSON.
fn get(server: &Server, path: &str) -> Value {
    let (status, text) = server.request("GET", path, b"");
    assert_eq!(status, 200, "{path}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// `GET path` until its answer is `want` (a close, a gateway's death or a join on
/// another process takes effect a little later); panics with the last answer
/// after 30 s.
fn until(server: &Server, path: &str, want: &Value) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, text) = server.request("GET", path, b"");
        let got: Value = serde_json::from_str(&text).unwrap_or_default();
        if status == 200 && &got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{path}: {status} {text}, want {want}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";

fn hs(claims: Value) -> String {
    let key = EncodingKey::from_secret(SECRET.as_bytes());
    encode(&Header::new(Algorithm::HS256), &claims, &key).unwrap()
}

fn member(user: u64, connections: u32) -> Value {
    json!({"user": user, "connections": connections})
}

#[test]
fn a_channel_lists_its_users_with_their_connections_and_its_counts() {
    let server = Server::start(&[]);
    let mut open: Vec<TcpStream> = (0..3)
        .map(|_| sse_on(&server, "/sse/42?channel=room"))
        .collect();
    open.push(sse_on(&server, "/sse/7?channel=room&channel=other"));
    open.push(sse_on(&server, "/sse?channel=room"));
    assert_eq!(
        get(&server, "/presence/room"),
        json!({"channel": "room", "users": [member(7, 1), member(42, 3)],
               "count": 2, "connections": 5, "cut": false})
    );
    assert_eq!(
        get(&server, "/presence/room/stats"),
        json!({"channel": "room", "users": 2, "connections": 5})
    );
    assert_eq!(
        get(&server, "/presence/42"),
        json!({"subject": 42, "users": [member(42, 3)], "count": 1, "connections": 3, "cut": false})
    );
    assert_eq!(
        get(&server, "/presence/nobody"),
        json!({"channel": "nobody", "users": [], "count": 0, "connections": 0, "cut": false})
    );
    // User 42's last connections go: one close changes the count, the last their entry.
    open.remove(0);
    until(
        &server,
        "/presence/room/stats",
        &json!({"channel": "room", "users": 2, "connections": 4}),
    );
    open.remove(0);
    open.remove(0);
    until(
        &server,
        "/presence/room",
        &json!({"channel": "room", "users": [member(7, 1)], "count": 1, "connections": 2,
                "cut": false}),
    );
    assert_eq!(
        get(&server, "/presence/42/stats"),
        json!({"subject": 42, "users": 0, "connections": 0})
    );
    let (status, text) = server.request("GET", "/presence/a%20b", b"");
    assert_eq!(status, 400, "{text}");
}

#[test]
fn a_list_past_the_bound_names_the_lowest_ids_and_says_it_is_cut() {
    let server = Server::start(&["--max-presence-members", "2"]);
    let _open: Vec<TcpStream> = [9, 3, 5, 1]
        .iter()
        .map(|u| sse_on(&server, &format!("/sse/{u}?channel=hall")))
        .collect();
    assert_eq!(
        get(&server, "/presence/hall"),
        json!({"channel": "hall", "users": [member(1, 1), member(3, 1)],
               "count": 4, "connections": 4, "cut": true})
    );
    assert_eq!(
        get(&server, "/presence/hall/stats"),
        json!({"channel": "hall", "users": 4, "connections": 4})
    );
}

#[test]
fn online_answers_which_followed_subjects_have_a_connection() {
    let server = Server::start(&[]);
    for subject in [3, 5, 9] {
        let (status, text) = server.request("PUT", &format!("/subscriptions/7/{subject}"), b"");
        assert_eq!(status, 200, "{text}");
    }
    assert_eq!(
        get(&server, "/online/7"),
        json!({"user": 7, "online": [], "count": 0})
    );
    let _three = subscribe_stream(&server, 3);
    let nine = subscribe_stream(&server, 9);
    let _ten = subscribe_stream(&server, 10); // online, not followed
    assert_eq!(
        get(&server, "/online/7"),
        json!({"user": 7, "online": [3, 9], "count": 2})
    );
    drop(nine);
    until(
        &server,
        "/online/7",
        &json!({"user": 7, "online": [3], "count": 1}),
    );
}

/// A token's `info` claim is shown beside its user (once, however many
/// connections), a user without one has none, and a claim past
/// `--max-presence-info` is refused at connect.
#[test]
fn a_tokens_info_is_shown_beside_its_user_and_a_large_one_is_refused() {
    let server = Server::start(&["--jwt-secret", SECRET, "--max-presence-info", "40"]);
    let ada = hs(json!({"sub": 42, "chan": ["room"], "info": {"name": "Ada", "role": "host"}}));
    let plain = hs(json!({"sub": 7, "chan": ["room"]}));
    let _open = [
        sse_on(&server, &format!("/sse/42?channel=room&token={ada}")),
        sse_on(&server, &format!("/sse/42?channel=room&token={ada}")),
        sse_on(&server, &format!("/sse/7?channel=room&token={plain}")),
    ];
    let info = json!({"name": "Ada", "role": "host"});
    assert_eq!(
        get(&server, "/presence/room"),
        json!({"channel": "room", "count": 2, "connections": 3, "cut": false,
               "users": [member(7, 1), {"user": 42, "connections": 2, "info": info}]})
    );
    let big = hs(json!({"sub": 9, "chan": ["room"], "info": {"bio": "x".repeat(40)}}));
    let mut s = server.connect();
    write!(
        s,
        "GET /sse/9?channel=room&token={big} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let (status, text) = parse_response(&read_all(&mut s));
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("token info claim is longer than 40 bytes (--max-presence-info)"),
        "{text}"
    );
}

/// With a JWT key and an API key, a page may ask who is in a channel its own
/// token's `chan` claim allows (`Authorization: Bearer`); another channel is 403,
/// no credential 401, and `/online` stays the back-end's (API key).
#[test]
fn a_pages_token_may_ask_the_presence_of_its_channels_only() {
    let key = "presence-test-api-key-of-forty-bytes-long";
    let server = Server::start(&["--jwt-secret", SECRET, "--api-key", key]);
    let token = hs(json!({"sub": 5, "chan": ["room:*"]}));
    let _open = sse_on(&server, &format!("/sse/5?channel=room:1&token={token}"));
    let ask = |path: &str, credential: Option<&str>| {
        let mut s = server.connect();
        let auth = credential.map_or(String::new(), |c| format!("Authorization: Bearer {c}\r\n"));
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n"
        )
        .unwrap();
        parse_response(&read_all(&mut s))
    };
    let (status, text) = ask("/presence/room:1", Some(&token));
    assert_eq!(status, 200, "{text}");
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["users"], json!([member(5, 1)]), "{doc}");
    assert_eq!(ask("/presence/room:1/stats", Some(&token)).0, 200);
    let (status, text) = ask("/presence/news", Some(&token));
    assert_eq!(status, 403, "{text}");
    assert!(
        text.contains("the token does not allow this channel"),
        "{text}"
    );
    assert_eq!(ask("/presence/room:1", None).0, 401);
    assert_eq!(ask("/online/5", Some(&token)).0, 401);
    assert_eq!(ask("/presence/news", Some(key)).0, 200);
    assert_eq!(ask("/online/5", Some(key)).0, 200);
}

/// `serve --processes 2` (a router and two gateways on one port, over NATS): the
/// connections land on either gateway and every answer, whichever gateway gives
/// it, is the whole channel; `--max-presence-members` reaches the router.
#[test]
fn every_gateway_of_a_supervised_server_gives_the_same_answer() {
    let nats = Nats::start();
    let server = start_supervisor(&nats.url, 2, &["--max-presence-members", "2"]);
    let _open: Vec<TcpStream> = (1..=4)
        .map(|u| sse_on(&server, &format!("/sse/{u}?channel=hall")))
        .collect();
    let want = json!({"channel": "hall", "users": [member(1, 1), member(2, 1)],
                      "count": 4, "connections": 4, "cut": true});
    until(&server, "/presence/hall", &want);
    for _ in 0..10 {
        assert_eq!(get(&server, "/presence/hall"), want);
    }
}

/// Two router shards, two gateways: a channel's presence is the same whichever
/// gateway answers, its members on a gateway killed with `-9` leave the answer
/// once the router forgets that gateway (three missed heartbeats, then its next
/// tick: about 4 s), and `/online` joins what every shard knows.
#[test]
fn presence_is_exact_across_gateways_and_router_shards_and_forgets_a_dead_gateway() {
    let nats = Nats::start();
    let shard = |i: &str| {
        Router::start_with(
            &nats,
            "memory",
            &["--router-shards", "2", "--router-shard", i],
        )
        .0
    };
    let _routers = (shard("0"), shard("1"));
    let a = gateway_with(&nats, &["--router-shards", "2"]);
    let mut b = gateway_with(&nats, &["--router-shards", "2"]);
    // FNV-1a of the name, mod 2: room:2 on shard 0, room:1 on shard 1.
    let _on_a = [
        sse_on(&a, "/sse/1?channel=room:1&channel=room:2"),
        sse_on(&a, "/sse/1?channel=room:1"),
    ];
    let _on_b = [
        sse_on(&b, "/sse/2?channel=room:1&channel=room:2"),
        sse_on(&b, "/sse/4?channel=room:2"),
    ];
    let room1 = json!({"channel": "room:1", "users": [member(1, 2), member(2, 1)],
                       "count": 2, "connections": 3, "cut": false});
    let room2 = json!({"channel": "room:2", "users": [member(1, 1), member(2, 1), member(4, 1)],
                       "count": 3, "connections": 3, "cut": false});
    for gateway in [&a, &b] {
        until(gateway, "/presence/room:1", &room1);
        until(gateway, "/presence/room:2", &room2);
        until(
            gateway,
            "/presence/2",
            &json!({"subject": 2, "users": [member(2, 1)], "count": 1, "connections": 1,
                    "cut": false}),
        );
    }
    // User 9 follows subjects of both shards (odd on 1, even on 0).
    for subject in [1, 2, 3, 4] {
        let (status, text) = a.request("PUT", &format!("/subscriptions/9/{subject}"), b"");
        assert_eq!(status, 200, "{text}");
    }
    let online = json!({"user": 9, "online": [1, 2, 4], "count": 3});
    until(&a, "/online/9", &online);
    until(&b, "/online/9", &online);

    b.child.kill().unwrap(); // SIGKILL
    b.child.wait().unwrap();
    until(
        &a,
        "/presence/room:1",
        &json!({"channel": "room:1", "users": [member(1, 2)], "count": 1, "connections": 2,
                "cut": false}),
    );
    until(
        &a,
        "/presence/room:2",
        &json!({"channel": "room:2", "users": [member(1, 1)], "count": 1, "connections": 1,
                "cut": false}),
    );
    until(
        &a,
        "/online/9",
        &json!({"user": 9, "online": [1], "count": 1}),
    );
}
