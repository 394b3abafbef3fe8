//! Each transport end to end with a real client (SPEC A1–A4, B1, B2, C1, C3): curl for
//! chunked streaming and SSE, Python `websockets` for WebSocket, raw sockets for
//! long-poll. Messages arrive in order and the publish reply counts are exact.

mod common;

use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

#[test]
fn chunked_stream_with_curl_gets_welcome_then_messages_in_order() {
    let server = Server::start(&[]);
    let url = format!("http://{}/sub/11", server.addr);
    let curl = Curl::start(&[&url]);
    curl.until("welcome 11");
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    for i in 0..5 {
        let reply = server.publish(11, &format!("message {i}"));
        assert_eq!(reply["connections"], 1);
        assert_eq!(reply["users"], 1);
    }
    let lines = curl.until("message 4");
    let messages: Vec<_> = lines.iter().filter(|l| l.starts_with("message")).collect();
    assert_eq!(
        messages,
        [
            "message 0",
            "message 1",
            "message 2",
            "message 3",
            "message 4"
        ]
    );
}

#[test]
fn the_classic_test_path_is_an_alias() {
    let server = Server::start(&[]);
    let curl = Curl::start(&[&format!("http://{}/test/12", server.addr)]);
    curl.until("welcome 12");
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    server.publish(12, "hello");
    curl.until("hello");
}

#[test]
fn sse_with_curl_has_ids_multiline_data_and_retry() {
    let server = Server::start(&[]);
    let url = format!("http://{}/sub/21", server.addr);
    let curl = Curl::start(&["-H", "Accept: text/event-stream", &url]);
    let first = curl.until("retry:");
    assert!(first.iter().any(|l| l.starts_with("retry: ")), "{first:?}");
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    server.publish(21, "one");
    server.publish(21, "two\nlines");
    let lines = curl.until("data: lines");
    let events = without_epochs(&lines);
    assert_eq!(
        events,
        ["id: 1", "data: one", "id: 2", "data: two", "data: lines"]
    );
    let epoch = lines[lines.iter().position(|l| l.starts_with("id: ")).unwrap()]
        .strip_prefix("id: ")
        .unwrap()
        .split_once('-')
        .expect("ids carry the history's epoch")
        .0
        .to_string();
    assert!(epoch.parse::<u32>().is_ok(), "{epoch}");
}

/// The `id:` and `data:` lines of SSE output, ids without their `<epoch>-` part.
fn without_epochs(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.starts_with("id:") || l.starts_with("data:"))
        .map(|l| match l.strip_prefix("id: ") {
            Some(id) => format!("id: {}", id.rsplit('-').next().unwrap()),
            None => l.clone(),
        })
        .collect()
}

#[test]
fn sse_path_and_last_event_id_resume_lose_nothing() {
    let server = Server::start(&[]);
    let url = format!("http://{}/sse/31", server.addr);
    {
        let curl = Curl::start(&[&url]);
        curl.until("retry:");
        server.wait_stats("login", |s| s["connections_logged_in"] == 1);
        server.publish(31, "a");
        server.publish(31, "b");
        curl.until("data: b");
    }
    server.wait_stats("logout", |s| s["connections_logged_in"] == 0);
    // Published while the user is away: kept in the user's history.
    server.publish(31, "c");
    server.publish(31, "d");
    let curl = Curl::start(&["-H", "Last-Event-ID: 2", &url]);
    let lines = curl.until("data: d");
    assert_eq!(
        without_epochs(&lines),
        ["id: 3", "data: c", "id: 4", "data: d"]
    );
}

#[test]
fn websocket_with_python_websockets_takes_pong_heartbeats_and_closes_cleanly() {
    let server = Server::start(&["--heartbeat", "1"]);
    let script = r#"
import asyncio, sys, websockets
async def main(url):
    async with websockets.connect(url, ping_interval=None) as ws:
        print("open", flush=True)
        pong = await ws.ping(b"hi")
        await asyncio.wait_for(pong, 5)
        print("pong", flush=True)
        # Past a heartbeat: the server's unsolicited pong is taken without a word.
        await asyncio.sleep(1.5)
        for _ in range(3):
            print("msg", await asyncio.wait_for(ws.recv(), 10), flush=True)
        await ws.send("ignored text from client")
        await ws.close()
        print("closed", ws.close_code, flush=True)
asyncio.run(main(sys.argv[1]))
"#;
    let url = format!("ws://{}/sub/41", server.addr);
    let mut child = Command::new("python3")
        .args(["-c", script, &url])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let next = |out: &mut std::io::Lines<BufReader<std::process::ChildStdout>>| {
        out.next()
            .expect("python exited early (pip install websockets?)")
            .unwrap()
    };
    assert_eq!(next(&mut out), "open");
    assert_eq!(next(&mut out), "pong");
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    for text in ["first", "second", "third"] {
        assert_eq!(server.publish(41, text)["connections"], 1);
    }
    assert_eq!(next(&mut out), "msg first");
    assert_eq!(next(&mut out), "msg second");
    assert_eq!(next(&mut out), "msg third");
    assert_eq!(next(&mut out), "closed 1000");
    assert!(child.wait().unwrap().success());
    server.wait_stats("close", |s| s["connections_logged_in"] == 0);
}

#[test]
fn websocket_on_the_ws_path_and_a_plain_get_there_is_refused() {
    let server = Server::start(&[]);
    let (status, _) = server.request("GET", "/ws/5", b"");
    assert_eq!(status, 426);
    let script = r#"
import asyncio, sys, websockets
async def main(url):
    async with websockets.connect(url) as ws:
        print(await asyncio.wait_for(ws.recv(), 10), flush=True)
asyncio.run(main(sys.argv[1]))
"#;
    let mut child = Command::new("python3")
        .args(["-c", script, &format!("ws://{}/ws/5", server.addr)])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    server.publish(5, "over ws path");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(out.trim(), "over ws path");
}

#[test]
fn long_poll_answers_from_history_waits_and_reuses_the_connection() {
    let server = Server::start(&["--poll-timeout", "1"]);
    let mut s = server.connect();
    // since=0 on a user with no messages waits, then a publish answers it.
    write!(s, "GET /poll/51?since=0 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    server.publish(51, "first");
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "first");
    let body = String::from_utf8_lossy(&buf)
        .split_once("\r\n\r\n")
        .unwrap()
        .1
        .to_string();
    let v: serde_json::Value = serde_json::from_str(body.trim()).unwrap();
    assert_eq!(v["messages"][0]["seq"], 1);
    assert_eq!(v["messages"][0]["data"], "first");
    assert_eq!(v["last"], 1);
    // Two messages while no request is waiting: the next poll gets both at once,
    // on the same (kept-alive) connection.
    server.publish(51, "second");
    server.publish(51, "third");
    write!(s, "GET /poll/51?since=1 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "third");
    let text = String::from_utf8_lossy(&buf).to_string();
    assert!(text.find("second").unwrap() < text.find("third").unwrap());
    // Nothing new: answered empty after the poll timeout, connection still usable.
    write!(s, "GET /poll/51?since=3 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "\"messages\":[]");
    write!(s, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "ok");
}

#[test]
fn publish_counts_are_exact_across_users_transports_and_followers() {
    let server = Server::start(&[]);
    // User 1: two streams and one SSE. User 2 follows 1 over WebSocket-less raw stream.
    // User 3 follows themself and 1.
    let (mut a, _) = subscribe_stream(&server, 1);
    let (mut b, _) = subscribe_stream(&server, 1);
    let mut sse = server.connect();
    write!(sse, "GET /sse/1 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    read_until(&mut sse, &mut Vec::new(), "retry:");
    let (mut c, _) = subscribe_stream(&server, 2);
    let (mut d, _) = subscribe_stream(&server, 3);
    for (sub, subj) in [(2, 1), (3, 3), (3, 1)] {
        let (status, body) = server.request("PUT", &format!("/subscriptions/{sub}/{subj}"), b"");
        assert_eq!(status, 200, "{body}");
    }
    server.wait_stats("logins", |s| s["connections_logged_in"] == 5);
    let reply = server.publish(1, "to one");
    assert_eq!(reply["connections"], 5);
    assert_eq!(reply["users"], 3);
    let reply = server.publish(3, "to three");
    assert_eq!(
        reply["connections"], 1,
        "a user who follows themself gets it once"
    );
    assert_eq!(reply["users"], 1);
    let reply = server.publish(2, "to two");
    assert_eq!(
        (reply["connections"].as_u64(), reply["users"].as_u64()),
        (Some(1), Some(1))
    );
    for s in [&mut a, &mut b, &mut c, &mut d] {
        read_until(s, &mut Vec::new(), "to ");
    }
    read_until(&mut sse, &mut Vec::new(), "data: to one");
    // The lists reflect the graph.
    let (_, body) = server.request("GET", "/subscribers/1", b"");
    assert_eq!(body.trim(), "[2,3]");
    let (_, body) = server.request("GET", "/subscriptions/3", b"");
    assert_eq!(body.trim(), "[1,3]");
    let (status, _) = server.request("DELETE", "/subscriptions/3/1", b"");
    assert_eq!(status, 200);
    assert_eq!(server.publish(1, "again")["users"], 2);
}

#[test]
fn batch_publish_and_bulk_subscriptions() {
    let server = Server::start(&[]);
    let (status, body) = server.request(
        "POST",
        "/subscriptions",
        b"10 20\n11 20\n# comment\n\n12 20\n",
    );
    assert_eq!(status, 200, "{body}");
    let (mut s10, _) = subscribe_stream(&server, 10);
    let (mut s12, _) = subscribe_stream(&server, 12);
    server.wait_stats("logins", |s| s["connections_logged_in"] == 2);
    let ndjson =
        b"{\"subject\":20,\"data\":\"batch one\"}\n{\"subject\":10,\"data\":\"batch two\"}\n";
    let (status, body) = server.request("POST", "/pub", ndjson);
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["messages"], 2);
    assert_eq!(v["connections"], 3);
    read_until(&mut s10, &mut Vec::new(), "batch two");
    read_until(&mut s12, &mut Vec::new(), "batch one");
    let (status, body) = server.request("POST", "/pub", b"{\"subject\":1}\nnot json\n");
    assert_eq!(status, 400);
    assert!(body.contains("line"), "the error names the line: {body}");
}

#[test]
fn every_transport_gets_heartbeats_from_the_wheel() {
    let server = Server::start(&["--heartbeat", "0.3"]);
    // SSE: a comment line.
    let mut sse = server.connect();
    write!(sse, "GET /sse/61 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    read_until(&mut sse, &mut Vec::new(), ": hb");
    // WebSocket: an empty unsolicited pong (RFC 6455 5.5.3) after the 101 head.
    assert_eq!(first_ws_frame(&server, 62), [0x8a, 0], "a pong frame");
    // Chunked stream: a newline chunk.
    let (mut stream, mut buf) = subscribe_stream(&server, 63);
    read_until(&mut stream, &mut buf, "\r\n1\r\n\n\r\n");
    // `--ws-heartbeat ping`: an empty ping the client answers.
    let server = Server::start(&["--heartbeat", "0.3", "--ws-heartbeat", "ping"]);
    assert_eq!(first_ws_frame(&server, 64), [0x89, 0], "a ping frame");
}

/// The first frame's two header bytes on a WebSocket subscription to `user`.
fn first_ws_frame(server: &Server, user: u64) -> [u8; 2] {
    let mut ws = server.connect();
    write!(
        ws,
        "GET /sub/{user} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    read_until(&mut ws, &mut buf, "\r\n\r\n");
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut frames = buf[head_end..].to_vec();
    while frames.len() < 2 {
        let mut chunk = [0u8; 64];
        let n = ws.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before a heartbeat");
        frames.extend_from_slice(&chunk[..n]);
    }
    [frames[0], frames[1]]
}
