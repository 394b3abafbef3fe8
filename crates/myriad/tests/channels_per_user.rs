//! `--max-subscriptions-per-user` over real sockets (docs/protocol.md "Limits"):
//! one user's connections together hold at most N channel subscriptions; a
//! subscription past it is refused on that channel while the connection and the
//! user's other connections go on, and a subscription given back (a connection
//! closed) makes room. With router shards each shard counts the channels it owns.

mod common;

use common::cluster::*;
use common::*;
use std::io::Write;
use std::net::TcpStream;

const TOO_MANY: &str =
    "too many channel subscriptions for this user (--max-subscriptions-per-user)";

/// A framed WebSocket opened on `path`, what it read past the handshake.
fn ws(server: &Server, path: &str) -> (TcpStream, Vec<u8>) {
    let mut s = server.connect();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "\r\n\r\n");
    assert!(buf.starts_with(b"HTTP/1.1 101"), "{buf:?}");
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    (s, buf.split_off(end))
}

/// Sends a client text frame; the next text frame answered.
fn said(s: &mut TcpStream, buf: &mut Vec<u8>, frame: &str) -> String {
    s.write_all(&client_text(frame)).unwrap();
    server_text(s, buf)
}

fn refusal(channel: &str) -> String {
    serde_json::json!({"channel": channel, "error": TOO_MANY}).to_string()
}

#[test]
fn a_users_second_connection_is_refused_past_the_limit_until_the_first_closes() {
    let server = Server::start(&["--max-subscriptions-per-user", "3"]);
    let (mut first, mut fbuf) = ws(&server, "/ws/7?channel=a&channel=b");
    for name in ["a", "b"] {
        let frame = server_text(&mut first, &mut fbuf);
        assert!(
            frame.contains(&format!(r#""subscribed":"{name}""#)),
            "{frame}"
        );
    }
    let (mut second, mut sbuf) = ws(&server, "/ws/7?framed=1");
    let frame = said(&mut second, &mut sbuf, r#"{"subscribe":"c"}"#);
    assert!(frame.contains(r#""subscribed":"c""#), "{frame}");
    // The user's fourth subscription, whichever connection asks.
    assert_eq!(
        said(&mut second, &mut sbuf, r#"{"subscribe":"d"}"#),
        refusal("d")
    );
    // An SSE connection of the same user: refused on that channel, open with the rest.
    let mut sse = server.connect();
    write!(sse, "GET /sse/7?channel=e HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut ebuf = Vec::new();
    read_until(&mut sse, &mut ebuf, "event: refused\n");
    read_until(&mut sse, &mut ebuf, "\n\n");
    let text = String::from_utf8_lossy(&ebuf).into_owned();
    assert!(
        text.contains(&format!("data: {}\n", refusal("e"))),
        "{text}"
    );
    // Another user, and a connection without one, are not counted with user 7.
    let (mut other, mut obuf) = ws(&server, "/ws/8?channel=d");
    assert!(server_text(&mut other, &mut obuf).contains(r#""subscribed":"d""#));
    let (mut anon, mut abuf) = ws(&server, "/ws?channel=d");
    assert!(server_text(&mut anon, &mut abuf).contains(r#""subscribed":"d""#));
    // The first connection goes on: it gets its channels' messages.
    let (status, text) = server.request("POST", "/pub/a", b"to a");
    assert_eq!(status, 200, "{text}");
    let frame = server_text(&mut first, &mut fbuf);
    assert!(frame.contains(r#""data":"to a""#), "{frame}");
    let (_, text) = server.request("POST", "/pub/d", b"to d");
    let reach: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(reach["connections"], 2, "user 7 holds no d: {reach}");

    // The first connection closes: its two subscriptions are given back.
    drop(first);
    server.wait_stats("the first connection's channels left", |s| {
        s["channel_subscriptions"] == 3
    });
    for name in ["d", "f"] {
        let frame = said(
            &mut second,
            &mut sbuf,
            &format!(r#"{{"subscribe":"{name}"}}"#),
        );
        assert!(
            frame.contains(&format!(r#""subscribed":"{name}""#)),
            "{frame}"
        );
    }
    assert_eq!(
        said(&mut second, &mut sbuf, r#"{"subscribe":"g"}"#),
        refusal("g")
    );
}

/// Two router shards each count the channels they own: with a limit of 1 a user
/// holds one channel on each shard (2 = K × N), and a second channel of a shard is
/// refused, on any gateway.
#[test]
fn each_router_shard_counts_the_users_channels_it_owns() {
    let nats = Nats::start();
    let shard = |i: &str| {
        let flags = [
            "--router-shards",
            "2",
            "--router-shard",
            i,
            "--max-subscriptions-per-user",
            "1",
        ];
        Router::start_with(&nats, "memory", &flags).0
    };
    let _routers = (shard("0"), shard("1"));
    let a = gateway_with(&nats, &["--router-shards", "2"]);
    let b = gateway_with(&nats, &["--router-shards", "2"]);
    // FNV-1a of the name, mod 2: room:2 and room:4 on shard 0, room:1 and room:3 on 1.
    let (_sa, buf) = open_sse(&a, "/sse/7?channel=room:1&channel=room:2&channel=room:3");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let refused: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(refused, [refusal("room:3")], "{text}");
    // The user's connection on the other gateway: shard 0 holds room:2 for them.
    let (_sb, buf) = open_sse(&b, "/sse/7?channel=room:4");
    let text = String::from_utf8_lossy(&buf).into_owned();
    assert!(text.contains(&refusal("room:4")), "{text}");
    for (name, reached) in [("room:1", 1), ("room:2", 1), ("room:3", 0), ("room:4", 0)] {
        let (status, text) = a.request("POST", &format!("/pub/{name}"), b"x");
        assert_eq!(status, 200, "{text}");
        let reach: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(reach["connections"], reached, "{name}: {reach}");
    }
}

/// An SSE subscription on a gateway whose routers may not be up yet (503 then),
/// read up to the `id:` line that ends its start (every join answered).
fn open_sse(gateway: &Server, path: &str) -> (TcpStream, Vec<u8>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let mut s = gateway.connect();
        write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        if read_until_or_closed(&mut s, &mut buf, "\nid: ") {
            read_until(&mut s, &mut buf, "\n\n");
            return (s, buf);
        }
        let got = String::from_utf8_lossy(&buf).into_owned();
        assert!(std::time::Instant::now() < deadline, "{got}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
