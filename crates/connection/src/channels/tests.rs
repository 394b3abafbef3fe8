//! Channels the router refuses (a user past `--max-subscriptions-per-user`) in each
//! transport's words, as the token's refusals are, the connection keeping its
//! other streams.

use crate::harness::{history, Harness};
use crate::*;
use bus::Refusal;

const TOO_MANY: &str =
    "too many channel subscriptions for this user (--max-subscriptions-per-user)";

const WS_HEADERS: &str = "Upgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

fn joined(joined: &[&str], refused: &[&str]) -> Reply {
    Reply::Joined {
        login: None,
        channels: joined
            .iter()
            .map(|n| (n.to_string(), history(0, &[], false)))
            .collect(),
        refused: refused
            .iter()
            .map(|n| (n.to_string(), Refusal::UserLimit))
            .collect(),
    }
}

/// Opens `path` (with `extra` header lines) naming channels `a` and `b`, and
/// answers its join with `a` joined and `b` refused: what went out.
fn opened(path: &str, extra: &str) -> (Harness, Vec<u8>) {
    let mut h = Harness::new();
    let step = h.bytes(format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").as_bytes());
    assert!(
        matches!(&step.requests[..], [Request::Join { channels, .. }] if channels.len() == 2),
        "{:?}",
        step.requests
    );
    let out = h.reply(joined(&["a"], &["b"])).bytes;
    (h, out)
}

/// The text frames in `bytes` (server frames: unmasked, short).
fn ws_texts(mut bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    while bytes.len() >= 2 {
        let len = usize::from(bytes[1] & 0x7f);
        assert!(len < 126, "test frames are short");
        if bytes[0] & 0x0f == 1 {
            out.push(String::from_utf8_lossy(&bytes[2..2 + len]).into_owned());
        }
        bytes = &bytes[2 + len..];
    }
    out
}

fn refusal(name: &str) -> serde_json::Value {
    serde_json::json!({"channel": name, "error": TOO_MANY})
}

#[test]
fn a_channel_the_router_refuses_is_told_on_sse_the_stream_and_long_poll() {
    let sse = String::from_utf8(opened("/sse?channel=a&channel=b", "").1).unwrap();
    let event = format!("event: refused\ndata: {}\n\n", refusal("b"));
    assert!(sse.contains(&event), "{sse}");
    assert!(
        sse.ends_with("_\n\n"),
        "b keeps its place, empty, in the composite id: {sse}"
    );

    let stream = String::from_utf8(opened("/sub?channel=a&channel=b", "").1).unwrap();
    assert!(stream.contains(&format!("! b {TOO_MANY}\n")), "{stream}");

    let (mut h, poll) = opened("/poll?channel=a&channel=b", "");
    let poll = String::from_utf8(poll).unwrap();
    let body = poll.split("\r\n\r\n").nth(1).unwrap_or_default();
    let answer: serde_json::Value = serde_json::from_str(body).expect(&poll);
    assert_eq!(answer["refused"], serde_json::json!([refusal("b")]));
    // The next poll of the keep-alive connection asks for b again.
    let step = h.bytes(b"GET /poll?channel=a&channel=b HTTP/1.1\r\nHost: t\r\n\r\n");
    let asked: Vec<&str> = match &step.requests[..] {
        [Request::Join { channels, .. }] => channels.iter().map(|c| &*c.name).collect(),
        other => panic!("{other:?}"),
    };
    assert_eq!(asked, ["a", "b"]);
}

#[test]
fn a_framed_websocket_is_told_per_channel_and_may_subscribe_again() {
    let (_, out) = opened("/ws?channel=a&channel=b", WS_HEADERS);
    let head_end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let texts = ws_texts(&out[head_end..]);
    assert_eq!(texts[0], refusal("b").to_string(), "{texts:?}");
    assert!(texts[1].contains(r#""subscribed":"a""#), "{texts:?}");

    let mut h = Harness::new();
    h.bytes(format!("GET /ws?framed=1 HTTP/1.1\r\nHost: t\r\n{WS_HEADERS}\r\n").as_bytes());
    h.reply(joined(&[], &[]));
    let subscribe = wire::ws_client_frame(
        wire::Opcode::Text,
        true,
        [1, 2, 3, 4],
        br#"{"subscribe":"c"}"#,
    );
    for _ in 0..2 {
        let step = h.bytes(&subscribe);
        assert!(
            matches!(&step.requests[..], [Request::Join { channels, .. }] if &*channels[0].name == "c"),
            "a refused channel is not held: subscribing again asks again: {:?}",
            step.requests
        );
        let step = h.reply(joined(&[], &["c"]));
        assert_eq!(ws_texts(&step.bytes), [refusal("c").to_string()]);
    }
}
