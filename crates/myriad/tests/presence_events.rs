//! Presence events over real sockets (docs/protocol.md "Presence events"): a
//! subscriber that asks (`presence=1`, or `"presence":true` on a framed WebSocket's
//! subscribe) sees each other user join and leave a channel once, however many
//! connections they have, on a framed WebSocket, SSE and the chunked stream; a
//! user back within the grace is not announced; the webhook receives signed
//! batches and gets a batch again after a 500.

mod common;

use common::channels::{open, ws_open};
use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The WebSocket's text frames up to and including the first containing `until`.
fn frames_until(ws: &mut TcpStream, buf: &mut Vec<u8>, until: &str) -> Vec<String> {
    let mut frames = Vec::new();
    loop {
        let frame = server_text(ws, buf);
        let done = frame.contains(until);
        frames.push(frame);
        if done {
            return frames;
        }
    }
}

fn publish_to(server: &Server, channel: &str, body: &str) {
    let (status, text) = server.request("POST", &format!("/pub/{channel}"), body.as_bytes());
    assert_eq!(status, 200, "{text}");
}

fn count(frames: &[String], needle: &str) -> usize {
    frames.iter().filter(|f| f.contains(needle)).count()
}

#[test]
fn a_framed_websocket_sees_each_user_join_and_leave_once() {
    let server = Server::start(&["--presence-grace", "0"]);
    let (mut ws, mut buf) = ws_open(&server, "/ws/1?channel=room&presence=1");
    let first = server_text(&mut ws, &mut buf);
    assert!(first.contains(r#""subscribed":"room""#), "{first}");
    // User 42 with two connections, user 43 with one.
    let (a, _) = open(&server, "/sse/42?channel=room", "", "retry:");
    let (b, _) = open(&server, "/sse/42?channel=room", "", "retry:");
    let (c, _) = open(&server, "/sse/43?channel=room", "", "retry:");
    publish_to(&server, "room", "m1");
    let frames = frames_until(&mut ws, &mut buf, r#""data":"m1""#);
    assert_eq!(
        count(&frames, r#""presence":{"joined":1}"#),
        0,
        "{frames:?}"
    );
    assert_eq!(
        count(&frames, r#""presence":{"joined":42}"#),
        1,
        "{frames:?}"
    );
    assert_eq!(
        count(&frames, r#""presence":{"joined":43}"#),
        1,
        "{frames:?}"
    );
    let joined = frames.iter().find(|f| f.contains("joined\":42")).unwrap();
    let joined: serde_json::Value = serde_json::from_str(joined).unwrap();
    assert_eq!(joined["channel"], "room");
    assert!(joined["pos"].is_string());
    // One of 42's connections goes: nothing; the other: left once.
    drop(a);
    drop(c);
    let frames = frames_until(&mut ws, &mut buf, r#""left":43"#);
    assert_eq!(count(&frames, "left\":42"), 0, "{frames:?}");
    drop(b);
    let mut frames = frames_until(&mut ws, &mut buf, r#""left":42"#);
    publish_to(&server, "room", "m2");
    frames.extend(frames_until(&mut ws, &mut buf, r#""data":"m2""#));
    assert_eq!(count(&frames, "left\":42"), 1, "{frames:?}");
    assert_eq!(count(&frames, "joined"), 0, "{frames:?}");

    // A later subscribe asks with `"presence":true`; without it, no pushes.
    ws.write_all(&client_text(r#"{"subscribe":"lobby","presence":true}"#))
        .unwrap();
    let said = server_text(&mut ws, &mut buf);
    assert!(said.contains(r#""subscribed":"lobby""#), "{said}");
    ws.write_all(&client_text(r#"{"subscribe":"quiet"}"#))
        .unwrap();
    let said = server_text(&mut ws, &mut buf);
    assert!(said.contains(r#""subscribed":"quiet""#), "{said}");
    let (_d, _) = open(&server, "/sse/44?channel=lobby&channel=quiet", "", "retry:");
    publish_to(&server, "quiet", "m3");
    let frames = frames_until(&mut ws, &mut buf, r#""data":"m3""#);
    // 44's arrival (a connection's pushes start after its own); nothing of quiet
    // but its message.
    let lobby = r#"{"channel":"lobby","#;
    assert_eq!(count(&frames, lobby), 1, "{frames:?}");
    assert_eq!(
        count(&frames, r#""presence":{"joined":44}"#),
        1,
        "{frames:?}"
    );
    assert_eq!(count(&frames, r#""channel":"quiet""#), 1, "{frames:?}");
}

#[test]
fn sse_and_the_chunked_stream_see_joins_and_a_user_back_within_the_grace_is_not_announced() {
    let server = Server::start(&["--presence-grace", "60"]);
    let (mut sse, mut sbuf) = open(&server, "/sse?channel=room&presence=1", "", "retry:");
    let (mut stream, mut tbuf) = open(&server, "/sub/1?channel=room&presence=1", "", "welcome 1");
    let (a, _) = open(&server, "/sse/42?channel=room", "", "retry:");
    read_until(
        &mut sse,
        &mut sbuf,
        "data: {\"channel\":\"room\",\"joined\":42}",
    );
    read_until(&mut stream, &mut tbuf, "room +42");
    let text = String::from_utf8_lossy(&sbuf).into_owned();
    assert!(
        text.contains("event: presence\ndata: {\"channel\":\"room\",\"joined\":42}\n"),
        "{text}"
    );
    // The user's connection goes and another comes back within the grace.
    drop(a);
    let (_b, _) = open(&server, "/sse/42?channel=room", "", "retry:");
    publish_to(&server, "room", "marker");
    read_until(&mut sse, &mut sbuf, "data: marker");
    read_until(&mut stream, &mut tbuf, "room marker");
    let sse_text = String::from_utf8_lossy(&sbuf);
    let stream_text = String::from_utf8_lossy(&tbuf);
    assert_eq!(sse_text.matches("\"joined\":42").count(), 1, "{sse_text}");
    assert!(!sse_text.contains("\"left\""), "{sse_text}");
    assert_eq!(stream_text.matches("room +42").count(), 1, "{stream_text}");
    assert!(!stream_text.contains("room -42"), "{stream_text}");
}

/// A token's `nopresence` claim: its `presence=1` gets no pushes on the channels
/// it names (the channel itself is joined); other channels' pushes come.
#[test]
fn a_tokens_nopresence_claim_turns_off_its_pushes_on_the_channels_it_names() {
    const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";
    let hs = |claims: serde_json::Value| {
        let key = jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes());
        let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
        jsonwebtoken::encode(&header, &claims, &key).unwrap()
    };
    let server = Server::start(&["--jwt-secret", SECRET, "--presence-grace", "0"]);
    let quiet =
        hs(serde_json::json!({"sub": 1, "chan": ["room", "big:*"], "nopresence": ["big:*"]}));
    let member = hs(serde_json::json!({"sub": 42, "chan": ["*"]}));
    let (mut watcher, mut wbuf) = open(
        &server,
        &format!("/sse/1?channel=big:1&channel=room&presence=1&token={quiet}"),
        "",
        "retry:",
    );
    // big:1 is joined first: its push, were there one, would come first.
    let (_m, _) = open(
        &server,
        &format!("/sse/42?channel=big:1&channel=room&token={member}"),
        "",
        "retry:",
    );
    read_until(&mut watcher, &mut wbuf, r#"{"channel":"room","joined":42}"#);
    let text = String::from_utf8_lossy(&wbuf);
    assert!(!text.contains(r#""channel":"big:1","joined""#), "{text}");
    assert!(!text.contains("event: refused"), "{text}");
    // Without the claim, the same request watches both.
    let open_token = hs(serde_json::json!({"sub": 2, "chan": ["room", "big:*"]}));
    let (mut both, mut bbuf) = open(
        &server,
        &format!("/sse/2?channel=big:1&channel=room&presence=1&token={open_token}"),
        "",
        "retry:",
    );
    let other = hs(serde_json::json!({"sub": 43, "chan": ["*"]}));
    let (_n, _) = open(
        &server,
        &format!("/sse/43?channel=big:1&channel=room&token={other}"),
        "",
        "retry:",
    );
    read_until(&mut both, &mut bbuf, r#"{"channel":"big:1","joined":43}"#);
    read_until(&mut watcher, &mut wbuf, r#"{"channel":"room","joined":43}"#);
    let text = String::from_utf8_lossy(&wbuf);
    assert!(!text.contains(r#""channel":"big:1","joined""#), "{text}");
}

/// One HTTP request read from `listener` and answered `status`: its head and body.
fn receive(listener: &TcpListener, status: u16) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut s = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "no webhook POST came");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "\r\n\r\n");
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("a Content-Length")
        .trim()
        .parse()
        .unwrap();
    while buf.len() < end + length {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed mid-body");
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[end..end + length]).into_owned();
    write!(
        s,
        "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    (head, body)
}

#[test]
fn the_webhook_gets_signed_batches_and_a_batch_again_after_a_500() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/hooks/presence", listener.local_addr().unwrap());
    let secret = "a-webhook-secret";
    let server = Server::start(&[
        "--webhook",
        &url,
        "--webhook-secret",
        secret,
        "--presence-grace",
        "0",
    ]);
    let (a, _) = open(&server, "/sse/42?channel=room", "", "retry:");
    let (head, body) = receive(&listener, 500);
    let (again_head, again) = receive(&listener, 200);
    assert_eq!(body, again, "the same batch, sent again");
    assert!(
        head.starts_with("POST /hooks/presence HTTP/1.1\r\n"),
        "{head}"
    );
    for head in [&head, &again_head] {
        let signature = head
            .lines()
            .find_map(|l| l.strip_prefix("X-Myriad-Signature: sha256="))
            .expect("a signature");
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
        let tag = ring::hmac::sign(&key, body.as_bytes());
        let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(signature, hex);
    }
    let batch: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(batch["time_ms"].as_u64().unwrap() > 0);
    let events = batch["events"].as_array().unwrap();
    let kinds: Vec<(&str, &str, Option<u64>)> = events
        .iter()
        .map(|e| {
            assert!(e["time_ms"].as_u64().unwrap() > 0);
            (
                e["event"].as_str().unwrap(),
                e["channel"].as_str().unwrap(),
                e["user"].as_u64(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("channel_occupied", "room", None),
            ("member_added", "room", Some(42))
        ]
    );
    // The leave reaches it in a later batch.
    drop(a);
    let (_, body) = receive(&listener, 200);
    let batch: serde_json::Value = serde_json::from_str(&body).unwrap();
    let kinds: Vec<&str> = batch["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["member_removed", "channel_vacated"]);
    let stats = server.wait_stats("two batches sent", |s| s["webhook"]["sent_batches"] == 2);
    assert_eq!(stats["webhook"]["retries"], 1, "{stats}");
    assert_eq!(stats["webhook"]["dropped"], 0, "{stats}");
}
