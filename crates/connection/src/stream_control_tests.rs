//! `POST /subscribe` and `/unsubscribe` for an HTTP/2 stream, both cores driven
//! without a socket: the named stream (`Connection::handle_control`, then its join's
//! reply) and the POST (`stream_control::ask`, `Connection::handle_control_answer`).

use super::harness::{history, Harness, Step};
use super::*;
use bus::HistoryRead;
use bytes::Bytes;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use std::sync::Arc;
use wire::StreamControl;

fn control(subscribe: bool, channel: &str, since: Option<&str>) -> StreamControl {
    StreamControl {
        session: "tab".into(),
        channel: channel.into(),
        since: since.map(str::to_string),
        subscribe,
        presence: false,
    }
}

/// A multiplexed stream with `request` (a session's), its join answered.
fn stream(h: &mut Harness, request: &str, joined: Vec<(String, HistoryRead)>) -> String {
    h.conn.set_multiplexed();
    let step = h.bytes(request.as_bytes());
    assert!(
        matches!(step.requests[..], [Request::Join { .. }]),
        "{step:?}"
    );
    assert_eq!(h.out.take_session().as_deref(), Some("tab"));
    let step = h.reply(Reply::Joined {
        login: None,
        channels: joined,
        refused: Vec::new(),
    });
    step.text()
}

fn at(epoch: u32, last: u64) -> HistoryRead {
    HistoryRead {
        epoch: Some(epoch),
        ..history(last, &[], false)
    }
}

/// `handle_control`'s answer now, as (status, body).
fn ask(h: &mut Harness, c: StreamControl) -> (Option<(u16, String)>, Step) {
    let mut answer = None;
    let step = h.step(|conn, cx| answer = conn.handle_control(cx, &c));
    (answer.map(|a| (a.status, a.body)), step)
}

fn deliver_to(h: &mut Harness, channel: &str, seq: u64, text: &'static str) -> (Outcome, String) {
    let msg = router::Message::to_channel(channel, Bytes::from_static(text.as_bytes()));
    let mut outcome = Outcome::Skipped;
    let step = h.step(|c, cx| outcome = c.handle_delivery(cx, 5, seq, &mut Frames::of(&msg)));
    (outcome, step.text())
}

#[test]
fn a_session_stream_joins_later_gets_the_channel_and_leaves_it() {
    let mut h = Harness::new();
    let text = stream(
        &mut h,
        "GET /sse?session=tab&channel=a HTTP/1.1\r\nHost: t\r\n\r\n",
        vec![("a".into(), at(9, 2))],
    );
    assert!(text.ends_with("id: 9-2\n\n"), "{text}");
    // Subscribe: the join goes to the bus, the answer waits for its reply.
    let (answer, step) = ask(&mut h, control(true, "b", None));
    assert_eq!(answer, None);
    assert!(
        matches!(&step.requests[..], [Request::Join { login: false, channels, .. }]
        if &*channels[0].name == "b" && channels[0].since.is_none())
    );
    let (answer, _) = ask(&mut h, control(true, "b", None));
    assert_eq!(
        answer,
        Some((
            409,
            r#"{"channel":"b","error":"already subscribed"}"#.into()
        ))
    );
    let step = h.reply(Reply::Joined {
        login: None,
        channels: vec![("b".into(), at(5, 3))],
        refused: Vec::new(),
    });
    assert_eq!(step.text(), "id: 9-2_5-3\n\n", "where every stream stands");
    let mut answers = Vec::new();
    h.out.take_answers(&mut answers);
    assert_eq!(
        answers,
        [ControlAnswer {
            channel: "b".into(),
            status: 200,
            body: r#"{"gap":false,"pos":"5-3","subscribed":"b"}"#.into(),
        }]
    );
    let (outcome, text) = deliver_to(&mut h, "b", 4, "hi b");
    assert_eq!(outcome, Outcome::Sent);
    assert_eq!(text, "id: 9-2_5-4\nevent: b\ndata: hi b\n\n");
    // Leaving a channel of the URL keeps its place in the ids, empty.
    let (answer, step) = ask(&mut h, control(false, "a", None));
    assert_eq!(answer, Some((200, r#"{"unsubscribed":"a"}"#.into())));
    assert!(matches!(&step.requests[..], [Request::Leave { channels, .. }] if channels == &["a"]));
    assert_eq!(deliver_to(&mut h, "a", 3, "late").0, Outcome::Skipped);
    assert_eq!(
        deliver_to(&mut h, "b", 5, "x").1,
        "id: _5-5\nevent: b\ndata: x\n\n"
    );
    // Leaving one joined later leaves no place; joining the URL's again takes its own.
    assert_eq!(ask(&mut h, control(false, "b", None)).0.unwrap().0, 200);
    assert!(ask(&mut h, control(true, "a", Some("9-3"))).0.is_none());
    let step = h.reply(Reply::Joined {
        login: None,
        channels: vec![("a".into(), at(9, 4))],
        refused: Vec::new(),
    });
    assert!(step.text().ends_with("id: 9-4\n\n"), "{}", step.text());
    assert_eq!(
        ask(&mut h, control(false, "b", None)).0,
        Some((409, r#"{"channel":"b","error":"not subscribed"}"#.into()))
    );
    // A stream on its way out (told to resume) is as good as gone.
    h.step(|c, cx| c.handle_lost(cx));
    assert_eq!(ask(&mut h, control(true, "b", None)).0.unwrap().0, 404);
}

#[test]
fn a_later_subscribe_with_since_replays_and_answers_the_gap() {
    let mut h = Harness::new();
    stream(
        &mut h,
        "GET /sub/7?session=tab HTTP/1.1\r\nHost: t\r\n\r\n",
        vec![],
    );
    assert!(ask(&mut h, control(true, "news", Some("4-1"))).0.is_none());
    let kept = |seq, text: &'static str| {
        let msg = router::Message::to_channel("news", Bytes::from_static(text.as_bytes()));
        (seq, Arc::new(msg))
    };
    let read = HistoryRead {
        messages: vec![kept(2, "two"), kept(3, "three")],
        last: 3,
        gap: true,
        epoch: Some(5),
    };
    let step = h.reply(Reply::Joined {
        login: None,
        channels: vec![("news".into(), read)],
        refused: Vec::new(),
    });
    let text = step.text();
    // A chunked stream of a session tags its lines from the start.
    assert!(text.contains("news gap 5-1"), "{text}");
    assert!(
        text.contains("news two") && text.contains("news three"),
        "{text}"
    );
    let mut answers = Vec::new();
    h.out.take_answers(&mut answers);
    assert_eq!(
        answers[0].body,
        r#"{"gap":true,"pos":"5-1","subscribed":"news"}"#
    );
}

#[test]
fn refusals_say_what_a_framed_websocket_is_told() {
    let mut h = Harness::new();
    h.config.max_channels = 1;
    h.conn.set_multiplexed();
    h.bytes(b"GET /sse?session=tab&channel=a HTTP/1.1\r\nHost: t\r\n\r\n");
    let _ = h.out.take_session();
    let (early, _) = ask(&mut h, control(true, "b", None));
    assert_eq!(early.unwrap().0, 409, "not open before its head");
    h.reply(Reply::Joined {
        login: None,
        channels: vec![("a".into(), at(1, 0))],
        refused: Vec::new(),
    });
    for (c, status, why) in [
        (
            control(true, "gap", None),
            400,
            "this channel name is one of the SSE event names myriad sends",
        ),
        (
            control(true, "b", Some("x")),
            400,
            "since is not <epoch>-<seq>",
        ),
        (
            control(true, "b", None),
            409,
            "too many channels on this connection (--max-channels-per-connection)",
        ),
    ] {
        let (answer, step) = ask(&mut h, c);
        let body = serde_json::json!({"channel": if why.starts_with("this") {"gap"} else {"b"}, "error": why});
        assert_eq!(answer, Some((status, body.to_string())));
        assert!(step.requests.is_empty());
    }
}

#[test]
fn the_streams_own_grant_decides() {
    const SECRET: &[u8] = b"a-test-secret-of-at-least-32-bytes!!";
    let mut h = Harness::new();
    h.config.access = Arc::new(Access {
        jwt: Some(auth::JwtVerifier::new(
            auth::JwtKeys::hs256(SECRET).unwrap(),
        )),
        ..Access::default()
    });
    h.config.unix_start_ms = 1_700_000_000_000;
    let token = encode(
        &Header::new(Algorithm::HS256),
        &serde_json::json!({"sub": "x", "chan": ["a", "ok*"]}),
        &EncodingKey::from_secret(SECRET),
    )
    .unwrap();
    let request =
        format!("GET /sse?session=tab&channel=a&token={token} HTTP/1.1\r\nHost: t\r\n\r\n");
    stream(&mut h, &request, vec![("a".into(), at(1, 0))]);
    let (answer, step) = ask(&mut h, control(true, "secret", None));
    assert_eq!(
        answer,
        Some((
            403,
            r#"{"channel":"secret","error":"the token does not allow this channel"}"#.into()
        ))
    );
    assert!(step.requests.is_empty());
    assert_eq!(ask(&mut h, control(true, "ok:1", None)).0, None);
}

#[test]
fn a_post_waits_for_the_named_streams_answer() {
    let mut h = Harness::new();
    h.conn.set_multiplexed();
    let step =
        h.bytes(b"POST /subscribe?session=tab&channel=a&since=1-2 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(step.bytes.is_empty() && step.requests.is_empty());
    assert_eq!(
        h.out.take_control().map(|c| *c),
        Some(control(true, "a", Some("1-2")))
    );
    assert_eq!(h.conn.state(), State::Controlling);
    let answer = ControlAnswer::no_stream("a");
    let text = h.step(|c, cx| c.handle_control_answer(cx, &answer)).text();
    assert!(text.starts_with("HTTP/1.1 404 "), "{text}");
    assert!(text.contains("application/json"), "{text}");
    assert!(
        text.ends_with(r#"{"error":"no stream with this session on this connection"}"#),
        "{text}"
    );
    // One that no stream answers in time.
    h.bytes(b"POST /unsubscribe?session=tab&channel=a HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(h.out.take_control().is_some());
    assert!(h.fire_timer().text().starts_with("HTTP/1.1 503 "));
}

#[test]
fn over_http11_there_is_no_stream_to_reach() {
    let mut h = Harness::new();
    let text = h
        .bytes(b"POST /subscribe?session=tab&channel=a HTTP/1.1\r\nHost: t\r\n\r\n")
        .text();
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    assert!(
        text.contains(
            r#"{"error":"subscribe and unsubscribe reach a stream through its own HTTP/2"#
        ),
        "{text}"
    );
    assert!(h.out.take_control().is_none());
    // A session's stream with nothing to hold yet would hold nothing for good.
    let text = h
        .bytes(b"GET /sse?session=tab HTTP/1.1\r\nHost: t\r\n\r\n")
        .text();
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    // With a channel it is an ordinary subscription; its session names nothing.
    let mut h = Harness::new();
    let step = h.bytes(b"GET /sse?session=tab&channel=a HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(matches!(step.requests[..], [Request::Join { .. }]));
    assert!(h.out.take_session().is_none());
}
