//! `GET /presence/…` on the admin listener (docs/protocol.md "Presence"): the
//! same answers as the API port, from a thread that is not an event loop, exact
//! (a join answered before the ask is in the list), behind the same credentials.

mod common;

use common::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

/// `GET path` on `addr` with an optional bearer key: status and body.
fn ask(addr: SocketAddr, path: &str, key: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    parse_response(&out)
}

fn json_of(addr: SocketAddr, path: &str, key: Option<&str>) -> Value {
    let (status, body) = ask(addr, path, key);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// An SSE subscription on `path`, read until its start is written (every join
/// answered).
fn sse_on(server: &Server, path: &str) -> TcpStream {
    let mut s = server.connect();
    write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "\nid: ");
    read_until(&mut s, &mut buf, "\n\n");
    s
}

#[test]
fn the_admin_listener_answers_presence_as_the_api_port_and_at_once() {
    let server = Server::start(&["--admin", "127.0.0.1:0"]);
    let admin = server.admin.expect("the admin address is printed");
    let mut open = Vec::new();
    // Each join is in the very next list, no waiting: a subscription's start is
    // written after its join, and the list is read under the same lock.
    for (i, user) in [42u64, 42, 7, 9].into_iter().enumerate() {
        open.push(sse_on(&server, &format!("/sse/{user}?channel=room")));
        let list = json_of(admin, "/presence/room", None);
        assert_eq!(list["connections"], i + 1, "{list}");
        let users: Vec<u64> = list["users"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["user"].as_u64().unwrap())
            .collect();
        assert!(
            users.contains(&user),
            "{user} joined before the ask: {list}"
        );
    }
    for path in [
        "/presence/room",
        "/presence/room/stats",
        "/presence/42",
        "/presence/42/stats",
        "/presence/nobody",
    ] {
        let (status, body) = server.request("GET", path, b"");
        assert_eq!(status, 200, "{path}: {body}");
        let api: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json_of(admin, path, None), api, "{path}");
    }
    assert_eq!(
        json_of(admin, "/presence/room", None),
        json!({"channel": "room", "users": [
            {"user": 7, "connections": 1}, {"user": 9, "connections": 1},
            {"user": 42, "connections": 2}], "count": 3, "connections": 4, "cut": false})
    );
    // The API port's validation: a bad name is 400, another path is the admin's own.
    assert_eq!(ask(admin, "/presence/a%20b", None).0, 400);
    assert_eq!(ask(admin, "/presence/a/b/c", None).0, 404);
    assert_eq!(ask(admin, "/healthz", None).0, 200);
}

#[test]
fn with_an_api_key_the_admin_listener_asks_for_it() {
    let key = "a-presence-test-key";
    let server = Server::start(&["--admin", "127.0.0.1:0", "--api-key", key]);
    let admin = server.admin.expect("the admin address is printed");
    let _open = sse_on(&server, "/sse/5?channel=hall");
    let (status, body) = ask(admin, "/presence/hall", None);
    assert_eq!(status, 401, "{body}");
    assert_eq!(ask(admin, "/presence/hall", Some("wrong")).0, 401);
    let list = json_of(admin, "/presence/hall", Some(key));
    assert_eq!(
        list["users"],
        json!([{"user": 5, "connections": 1}]),
        "{list}"
    );
}
