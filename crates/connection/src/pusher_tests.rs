//! A Pusher client on the connection core, without sockets: the greeting, a
//! subscription's answer, a channel message as a Pusher event, a client event never
//! echoed and rate-limited, the heartbeat and the drain's close code.

use crate::harness::{history, Harness, Step};
use crate::*;
use bus::Request;
use router::Message;
use std::sync::Arc;

const WS_HEADERS: &str = "Upgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

/// A harness with app `app1:key1:secret1`, opened on `path`.
pub(crate) fn open(path: &str) -> (Harness, Step) {
    let mut h = Harness::new();
    h.config.access = Arc::new(Access {
        pusher: auth::PusherApps::parse(["app1:key1:secret1"]).unwrap(),
        ..Access::default()
    });
    let step = h.bytes(format!("GET {path} HTTP/1.1\r\nHost: t\r\n{WS_HEADERS}\r\n").as_bytes());
    (h, step)
}

pub(crate) fn joined(names: &[&str]) -> Reply {
    Reply::Joined {
        login: None,
        channels: names
            .iter()
            .map(|n| (n.to_string(), history(0, &[], false)))
            .collect(),
        refused: Vec::new(),
    }
}

/// Server frames in `bytes` past the HTTP head: (opcode, payload).
pub(crate) fn frames(bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut b = match bytes.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) if bytes.starts_with(b"HTTP/") => &bytes[i + 4..],
        _ => bytes,
    };
    let mut out = Vec::new();
    while b.len() >= 2 {
        let (len, at) = match b[1] & 0x7f {
            126 => (usize::from(u16::from_be_bytes([b[2], b[3]])), 4),
            n => (usize::from(n), 2),
        };
        out.push((b[0] & 0x0f, b[at..at + len].to_vec()));
        b = &b[at + len..];
    }
    out
}

/// The JSON of each text frame.
pub(crate) fn events(bytes: &[u8]) -> Vec<serde_json::Value> {
    frames(bytes)
        .into_iter()
        .filter(|(op, _)| *op == 1)
        .map(|(_, p)| serde_json::from_slice(&p).unwrap())
        .collect()
}

/// A masked client text frame (mask 0), any length below 64 KiB.
pub(crate) fn client_text(text: &str) -> Vec<u8> {
    let mut f = vec![0x81];
    if text.len() < 126 {
        f.push(0x80 | text.len() as u8);
    } else {
        f.push(0x80 | 126);
        f.extend_from_slice(&(text.len() as u16).to_be_bytes());
    }
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(text.as_bytes());
    f
}

/// An opened, greeted Pusher connection and its socket id.
pub(crate) fn connected() -> (Harness, String) {
    let (mut h, out) = open("/app/key1?protocol=7");
    assert!(out.bytes.is_empty(), "nothing before the join's reply");
    assert!(
        matches!(&out.requests[..], [Request::Join { user: None, channels, .. }] if channels.is_empty())
    );
    let step = h.reply(joined(&[]));
    assert!(step.text().starts_with("HTTP/1.1 101"), "{}", step.text());
    let ev = events(&step.bytes);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["event"], "pusher:connection_established");
    let data: serde_json::Value = serde_json::from_str(ev[0]["data"].as_str().unwrap()).unwrap();
    // --heartbeat of the harness: 400 ticks of 10 ms.
    assert_eq!(data["activity_timeout"], 4);
    let id = data["socket_id"].as_str().unwrap().to_string();
    assert!(id.ends_with(".257"), "the loop's key after the dot: {id}");
    (h, id)
}

pub(crate) fn subscribe(
    h: &mut Harness,
    channel: &str,
    auth: Option<&str>,
) -> Vec<serde_json::Value> {
    let frame = serde_json::json!({"event": "pusher:subscribe", "data": {"channel": channel, "auth": auth}});
    let step = h.bytes(&client_text(&frame.to_string()));
    if step.requests.is_empty() {
        return events(&step.bytes);
    }
    assert!(
        matches!(&step.requests[..], [Request::Join { channels, .. }] if &*channels[0].name == channel)
    );
    events(&h.reply(joined(&[channel])).bytes)
}

fn sign(socket_id: &str, channel: &str) -> String {
    let app = auth::PusherApp::parse("app1:key1:secret1").unwrap();
    format!("key1:{}", app.sign(&format!("{socket_id}:{channel}")))
}

#[test]
fn unknown_keys_and_old_protocols_are_told_and_closed() {
    for (path, code) in [
        ("/app/nope?protocol=7", 4001u16),
        ("/app/key1?protocol=6", 4007),
        ("/app/key1", 4007),
    ] {
        let (_, out) = open(path);
        assert!(out.requests.is_empty(), "{path}");
        let f = frames(&out.bytes);
        let error: serde_json::Value = serde_json::from_slice(&f[0].1).unwrap();
        assert_eq!(error["event"], "pusher:error", "{path}");
        assert_eq!(error["data"]["code"], code, "{path}");
        assert_eq!(f[1].0, 8, "then a close frame");
        assert_eq!(u16::from_be_bytes([f[1].1[0], f[1].1[1]]), code, "{path}");
    }
}

#[test]
fn ping_is_answered_and_the_heartbeat_is_a_pusher_ping() {
    let (mut h, _) = connected();
    let step = h.bytes(&client_text(r#"{"event":"pusher:ping","data":{}}"#));
    assert_eq!(events(&step.bytes)[0]["event"], "pusher:pong");
    let step = h.fire_timer();
    assert_eq!(events(&step.bytes)[0]["event"], "pusher:ping");
}

#[test]
fn a_channel_message_is_a_pusher_event_with_string_data() {
    let (mut h, _) = connected();
    let ev = subscribe(&mut h, "news", None);
    assert_eq!(ev[0]["event"], "pusher_internal:subscription_succeeded");
    assert_eq!(ev[0]["channel"], "news");
    let msg = Message::to_channel("news", bytes::Bytes::from_static(br#"{"a":1}"#));
    let step = h.step(|c, cx| {
        assert_eq!(
            c.handle_delivery(cx, 1, 1, &mut Frames::of(&msg)),
            Outcome::Sent
        );
    });
    let ev = events(&step.bytes);
    assert_eq!(
        ev[0],
        serde_json::json!({"event": "message", "channel": "news", "data": "{\"a\":1}"})
    );
}

#[test]
fn private_channels_check_the_signature() {
    let (mut h, id) = connected();
    let ev = subscribe(&mut h, "private-a", Some("key1:00"));
    assert_eq!(ev[0]["event"], "pusher:subscription_error");
    let data: serde_json::Value = serde_json::from_str(ev[0]["data"].as_str().unwrap()).unwrap();
    assert_eq!(data["status"], 401);
    let ev = subscribe(&mut h, "private-a", Some(&sign(&id, "private-a")));
    assert_eq!(ev[0]["event"], "pusher_internal:subscription_succeeded");
    // Another socket's signature does not open it.
    let ev = subscribe(&mut h, "private-b", Some(&sign("1.1", "private-b")));
    assert_eq!(ev[0]["event"], "pusher:subscription_error");
}

#[test]
fn client_events_are_published_not_echoed_and_rate_limited() {
    let (mut h, id) = connected();
    let ev = subscribe(&mut h, "news", None);
    assert_eq!(ev[0]["event"], "pusher_internal:subscription_succeeded");
    // Not on a public channel.
    let step = h.bytes(&client_text(
        r#"{"event":"client-x","channel":"news","data":{}}"#,
    ));
    assert!(step.requests.is_empty());
    assert_eq!(events(&step.bytes)[0]["data"]["code"], 4009);

    subscribe(&mut h, "private-room", Some(&sign(&id, "private-room")));
    let text = r#"{"event":"client-x","channel":"private-room","data":{"n":1}}"#;
    let step = h.bytes(&client_text(text));
    let [Request::PublishChannel { channel, payload }] = &step.requests[..] else {
        panic!("{:?}", step.requests);
    };
    assert_eq!(channel, "private-room");
    // The message comes back to the sender: it writes nothing.
    let msg = Message::to_channel("private-room", payload.clone());
    let step = h.step(|c, cx| {
        assert_eq!(
            c.handle_delivery(cx, 1, 1, &mut Frames::of(&msg)),
            Outcome::Skipped
        );
    });
    assert!(step.bytes.is_empty());
    // Ten a second: the burst's rest, then a refusal.
    for _ in 1..CLIENT_EVENTS_PER_SECOND {
        assert_eq!(h.bytes(&client_text(text)).requests.len(), 1);
    }
    let step = h.bytes(&client_text(text));
    assert!(step.requests.is_empty());
    assert_eq!(events(&step.bytes)[0]["data"]["code"], 4301);
    h.now += 10; // 100 ms: one more
    assert_eq!(h.bytes(&client_text(text)).requests.len(), 1);
}

#[test]
fn a_drain_closes_with_4200() {
    let (mut h, _) = connected();
    let step = h.step(|c, cx| assert!(c.handle_drain(cx)));
    let f = frames(&step.bytes);
    assert_eq!(f[0].0, 8);
    assert_eq!(u16::from_be_bytes([f[0].1[0], f[0].1[1]]), 4200);
}

#[test]
fn a_presence_member_is_its_channel_data_s_user_and_gets_the_members() {
    let (mut h, id) = connected();
    let data = r#"{"user_id":"7","user_info":{"n":"a"}}"#;
    let app = auth::PusherApp::parse("app1:key1:secret1").unwrap();
    let auth = format!("key1:{}", app.sign(&format!("{id}:presence-a:{data}")));
    // Signed without the channel data: refused.
    let ev = subscribe(&mut h, "presence-a", Some(&sign(&id, "presence-a")));
    assert_eq!(ev[0]["event"], "pusher:subscription_error");

    let frame = serde_json::json!({"event": "pusher:subscribe",
        "data": {"channel": "presence-a", "auth": auth, "channel_data": data}});
    let step = h.bytes(&client_text(&frame.to_string()));
    let [Request::Join {
        user,
        login,
        channels,
        info,
        ..
    }] = &step.requests[..]
    else {
        panic!("{:?}", step.requests);
    };
    assert_eq!((*user, *login), (Some(7), true));
    assert_eq!(info.as_deref(), Some(r#"{"n":"a"}"#));
    let names: Vec<&str> = channels.iter().map(|c| &*c.name).collect();
    assert_eq!(names, ["presence-a", "presence-a~presence"]);
    // Joined: the members are asked before the answer.
    let step = h.reply(joined(&["presence-a", "presence-a~presence"]));
    assert!(step.bytes.is_empty(), "{}", step.text());
    let [Request::Presence { list: true, .. }] = &step.requests[..] else {
        panic!("{:?}", step.requests);
    };
    let mut me = router::Member::new(7, 1);
    me.info = Some(r#"{"n":"a"}"#.into());
    let presence = bus::Presence {
        users: vec![me, router::Member::new(9, 2)],
        count: 2,
        connections: 3,
        cut: false,
    };
    let of = bus::PresenceOf::Channel("presence-a".into());
    let ev = events(&h.reply(Reply::Presence { of, presence }).bytes);
    assert_eq!(ev[0]["event"], "pusher_internal:subscription_succeeded");
    let data: serde_json::Value = serde_json::from_str(ev[0]["data"].as_str().unwrap()).unwrap();
    assert_eq!(
        data,
        serde_json::json!({"presence": {"ids": ["7", "9"], "hash": {"7": {"n": "a"}, "9": null}, "count": 2}})
    );
    // The companion's pushes, in Pusher's words.
    for (payload, event, data) in [
        (
            r#"+8 {"n":"b"}"#,
            "pusher_internal:member_added",
            r#"{"user_id":"8","user_info":{"n":"b"}}"#,
        ),
        ("+10", "pusher_internal:member_added", r#"{"user_id":"10"}"#),
        ("-9", "pusher_internal:member_removed", r#"{"user_id":"9"}"#),
    ] {
        let msg = Message::to_channel("presence-a~presence", bytes::Bytes::from(payload));
        let step = h.step(|c, cx| {
            assert_eq!(
                c.handle_delivery(cx, 1, 1, &mut Frames::of(&msg)),
                Outcome::Sent
            );
        });
        let ev = events(&step.bytes);
        assert_eq!(ev[0]["event"], event);
        assert_eq!(ev[0]["channel"], "presence-a");
        assert_eq!(ev[0]["data"], data);
    }
    // Another user on the same connection: refused.
    let other = r#"{"user_id":"8"}"#;
    let auth = format!("key1:{}", app.sign(&format!("{id}:presence-b:{other}")));
    let frame = serde_json::json!({"event": "pusher:subscribe",
        "data": {"channel": "presence-b", "auth": auth, "channel_data": other}});
    let step = h.bytes(&client_text(&frame.to_string()));
    assert!(step.requests.is_empty());
    assert_eq!(events(&step.bytes)[0]["event"], "pusher:subscription_error");
}
