//! Pusher users and apps on the connection core, without sockets: a sign-in joins
//! the user's internal channel and is answered once joined, a forged one is closed
//! with 4009, a message to the user is shown on `#server-to-user-<id>`, a terminate
//! closes with 4009, and a later app's channels are namespaced.

use crate::harness::Harness;
use crate::pusher_tests::{client_text, connected, events, frames, joined, subscribe};
use crate::*;
use bus::Request;
use router::Message;
use std::sync::Arc;

fn signin_frame(socket_id: &str, user_data: &str, secret: &str) -> Vec<u8> {
    let app = auth::PusherApp::parse(&format!("app1:key1:{secret}")).unwrap();
    let auth = format!(
        "key1:{}",
        app.sign(&format!("{socket_id}::user::{user_data}"))
    );
    let frame = serde_json::json!({"event": "pusher:signin", "data": {"auth": auth, "user_data": user_data}});
    client_text(&frame.to_string())
}

/// The close frame's code in `bytes`, if one is there.
fn close_code(bytes: &[u8]) -> Option<u16> {
    frames(bytes)
        .into_iter()
        .find(|(op, _)| *op == 8)
        .map(|(_, p)| u16::from_be_bytes([p[0], p[1]]))
}

/// A connection signed in as `bob`, and its user channel's name.
fn signed_in() -> (Harness, String) {
    let (mut h, id) = connected();
    let data = r#"{"id":"bob","user_info":{"n":1}}"#;
    let step = h.bytes(&signin_frame(&id, data, "secret1"));
    assert!(step.bytes.is_empty(), "signin_success waits for the join");
    let [Request::Join { channels, user, .. }] = &step.requests[..] else {
        panic!("{:?}", step.requests);
    };
    assert_eq!(*user, None, "a sign-in is not a myriad login");
    let name = channels[0].name.to_string();
    assert_eq!(
        name,
        format!("{}~user", auth::pusher_user_key("bob")),
        "the user's key"
    );
    let ev = events(&h.reply(joined(&[&name])).bytes);
    assert_eq!(ev[0]["event"], "pusher:signin_success", "{ev:?}");
    let got: serde_json::Value = serde_json::from_str(ev[0]["data"].as_str().unwrap()).unwrap();
    assert_eq!(got["user_data"], data);
    (h, name)
}

#[test]
fn a_signed_in_user_gets_its_messages_and_its_own_server_to_user_channel() {
    let (mut h, name) = signed_in();
    let ev = subscribe(&mut h, "#server-to-user-bob", None);
    assert_eq!(ev[0]["event"], "pusher_internal:subscription_succeeded");
    assert_eq!(ev[0]["channel"], "#server-to-user-bob");
    let ev = subscribe(&mut h, "#server-to-user-eve", None);
    assert_eq!(ev[0]["event"], "pusher:subscription_error");
    let payload =
        wire::pusher::Published::envelope_shown("hello", "{}", None, Some("#server-to-user-bob"));
    let msg = Message::to_channel(&name, payload.into());
    let step = h.step(|c, cx| {
        c.handle_delivery(cx, 1, 1, &mut Frames::of(&msg));
    });
    assert_eq!(
        events(&step.bytes),
        [serde_json::json!({"event": "hello", "channel": "#server-to-user-bob", "data": "{}"})]
    );
    // A second sign-in is refused without a close.
    let step = h.bytes(&signin_frame("1.1", r#"{"id":"x"}"#, "secret1"));
    assert!(step.requests.is_empty());
    assert_eq!(close_code(&step.bytes), None);
}

#[test]
fn a_terminate_closes_with_4009() {
    let (mut h, name) = signed_in();
    let msg = Message::to_channel(
        &name,
        bytes::Bytes::from_static(wire::pusher_user::TERMINATE),
    );
    let step = h.step(|c, cx| {
        c.handle_delivery(cx, 1, 1, &mut Frames::of(&msg));
    });
    assert_eq!(events(&step.bytes)[0]["data"]["code"], 4009);
    assert_eq!(close_code(&step.bytes), Some(4009));
}

#[test]
fn a_forged_or_bad_sign_in_is_closed_with_4009() {
    for (data, secret) in [
        (r#"{"id":"bob"}"#, "not-the-secret"),
        (r#"{"name":"no id"}"#, "secret1"),
    ] {
        let (mut h, id) = connected();
        let step = h.bytes(&signin_frame(&id, data, secret));
        assert!(step.requests.is_empty(), "{data}");
        assert_eq!(events(&step.bytes)[0]["data"]["code"], 4009, "{data}");
        assert_eq!(close_code(&step.bytes), Some(4009), "{data}");
    }
}

#[test]
fn a_later_app_s_channels_are_namespaced_and_shown_without_it() {
    let mut h = Harness::new();
    h.config.access = Arc::new(Access {
        pusher: auth::PusherApps::parse(["app1:key1:secret1", "app2:key2:secret2"]).unwrap(),
        ..Access::default()
    });
    let headers = "Upgrade: websocket\r\nConnection: Upgrade\r\n\
        Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
    h.bytes(format!("GET /app/key2?protocol=7 HTTP/1.1\r\nHost: t\r\n{headers}\r\n").as_bytes());
    h.reply(joined(&[]));
    let step = h.bytes(&client_text(
        r#"{"event":"pusher:subscribe","data":{"channel":"news"}}"#,
    ));
    let [Request::Join { channels, .. }] = &step.requests[..] else {
        panic!("{:?}", step.requests);
    };
    assert_eq!(&*channels[0].name, "app2:news");
    let ev = events(&h.reply(joined(&["app2:news"])).bytes);
    assert_eq!(ev[0]["channel"], "news");
    let msg = Message::to_channel("app2:news", bytes::Bytes::from_static(b"x"));
    let step = h.step(|c, cx| {
        c.handle_delivery(cx, 1, 1, &mut Frames::of(&msg));
    });
    assert_eq!(events(&step.bytes)[0]["channel"], "news");
    // Another app's name is not a Pusher name.
    let step = h.bytes(&client_text(
        r#"{"event":"pusher:subscribe","data":{"channel":"app1:news"}}"#,
    ));
    assert!(step.requests.is_empty());
    assert_eq!(events(&step.bytes)[0]["event"], "pusher:subscription_error");
}
