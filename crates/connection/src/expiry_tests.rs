//! Token lifetime in the core, with a virtual clock: each transport's goodbye when
//! its token expires, `pub` rights that end on the second, a WebSocket refresh in
//! place, and the connection closed after too many failed authentications.

use super::harness::{history, Harness, KEY};
use super::*;
use crate::clock::TICK_MS;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use std::sync::Arc;

const SECRET: &[u8] = b"a-test-secret-of-at-least-32-bytes!!";
/// The virtual Unix time at tick 0; the harness starts at tick 1000 (10 s later).
const START: u64 = 1_700_000_000;
/// The harness's Unix time at its first tick.
const T0: u64 = START + 10;

fn token(claims: serde_json::Value) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET),
    )
    .unwrap()
}

/// A harness whose server takes HS256 tokens with no leeway.
fn with_jwt() -> Harness {
    let mut h = Harness::new();
    let keys = auth::JwtKeys::hs256(SECRET).unwrap();
    h.config.access = Arc::new(Access {
        jwt: Some(auth::JwtVerifier::new(keys).with_leeway(0)),
        ..Default::default()
    });
    h.config.unix_start_ms = START * 1000;
    h
}

/// Moves the virtual clock to Unix second `t`.
fn at(h: &mut Harness, t: u64) {
    h.now = ((t - START) * 1000 / TICK_MS) as Tick;
}

/// What the loop does each tick: end the connections whose token expired.
fn run_expiries(h: &mut Harness, t: u64) -> Option<super::harness::Step> {
    at(h, t);
    let key = h.credentials.pop_expired(t)?;
    assert_eq!(key, KEY);
    Some(h.step(|c, cx| c.handle_expired(cx)))
}

fn subscribed(h: &mut Harness, request: &str) {
    let step = h.bytes(request.as_bytes());
    assert!(
        matches!(step.requests[..], [Request::Login { .. }]),
        "{}",
        step.text()
    );
    h.reply(Reply::History(history(0, &[], false)));
}

fn upgrade(token: &str) -> String {
    format!(
        "GET /ws/9?token={token} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
}

fn text_frame(text: &str) -> Vec<u8> {
    wire::ws_client_frame(wire::Opcode::Text, true, [1, 2, 3, 4], text.as_bytes())
}

/// The close code of a server close frame at the end of `bytes`.
fn close_code(bytes: &[u8]) -> Option<u16> {
    let pos = bytes.windows(1).rposition(|w| w[0] == 0x88)?;
    Some(u16::from_be_bytes([bytes[pos + 2], bytes[pos + 3]]))
}

#[test]
fn each_transport_ends_in_its_own_words_when_the_token_expires() {
    let exp = T0 + 5;
    let t = token(serde_json::json!({"sub": "9", "exp": exp}));

    let mut h = with_jwt();
    subscribed(
        &mut h,
        &format!("GET /sub/9?token={t} HTTP/1.1\r\nHost: t\r\n\r\n"),
    );
    assert!(run_expiries(&mut h, exp - 1).is_none(), "not before exp");
    let step = run_expiries(&mut h, exp).expect("due at exp (no leeway)");
    assert_eq!(step.text(), "e\r\ntoken expired\n\r\n0\r\n\r\n");
    assert!(h.conn.is_closing());

    let mut h = with_jwt();
    subscribed(
        &mut h,
        &format!("GET /sse/9?token={t} HTTP/1.1\r\nHost: t\r\n\r\n"),
    );
    let step = run_expiries(&mut h, exp).unwrap();
    assert_eq!(
        step.text(),
        "event: expired\ndata: {\"reason\":\"token expired\"}\n\n"
    );
    assert!(h.conn.is_closing());

    let mut h = with_jwt();
    subscribed(&mut h, &upgrade(&t));
    let step = run_expiries(&mut h, exp).unwrap();
    assert_eq!(close_code(&step.bytes), Some(WS_TOKEN_EXPIRED));
    assert!(step.text().ends_with("token expired"));

    // A waiting long-poll: 401, and keep-alive goes on (the framing is intact).
    let mut h = with_jwt();
    h.bytes(format!("GET /poll/9?token={t} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    h.reply(Reply::History(history(3, &[], false)));
    assert_eq!(h.conn.state(), State::PollWaiting);
    let step = run_expiries(&mut h, exp).unwrap();
    let text = step.text();
    assert!(text.starts_with("HTTP/1.1 401 "), "{text}");
    assert!(text.contains("WWW-Authenticate: Bearer error=\"invalid_token\""));
    assert!(text.ends_with("token expired\n") && text.contains("Keep-Alive"));
    assert_eq!(h.conn.state(), State::Idle);

    // A poll answered in time leaves nothing behind.
    let mut h = with_jwt();
    h.bytes(format!("GET /poll/9?token={t} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    h.reply(Reply::History(history(3, &[], false)));
    h.deliver(4, b"news");
    assert!(h.credentials.is_empty());
    // No exp: no entry at all.
    let mut h = with_jwt();
    let forever = token(serde_json::json!({"sub": "9"}));
    subscribed(&mut h, &upgrade(&forever));
    assert!(h.credentials.is_empty());
}

#[test]
fn publish_rights_end_on_the_second_before_the_timer_closes() {
    let exp = T0 + 5;
    let t = token(serde_json::json!({"sub": "9", "exp": exp, "pub": [9]}));
    let mut h = with_jwt();
    subscribed(&mut h, &upgrade(&t));
    at(&mut h, exp - 1);
    let step = h.bytes(&text_frame(r#"{"publish":9,"data":"in time"}"#));
    assert!(matches!(
        step.requests[..],
        [Request::Publish { subject: 9, .. }]
    ));
    // The loop has not run its expiries yet; the rights are gone all the same.
    at(&mut h, exp);
    let step = h.bytes(&text_frame(r#"{"publish":9,"data":"too late"}"#));
    // Nothing published; the closing connection is logged out at once.
    assert!(
        matches!(step.requests[..], [Request::Logout { user: 9 }]),
        "{:?}",
        step.requests
    );
    assert!(step.text().contains(r#"{"error":"token expired"}"#));
    assert_eq!(close_code(&step.bytes), Some(WS_TOKEN_EXPIRED));
    assert!(h.conn.is_closing());
}

#[test]
fn a_websocket_refreshes_its_token_in_place() {
    let exp = T0 + 5;
    let first = token(serde_json::json!({"sub": "9", "exp": exp, "pub": [9]}));
    let mut h = with_jwt();
    subscribed(&mut h, &upgrade(&first));
    // Same user, later exp, a pub claim for another subject.
    let later = token(serde_json::json!({"sub": 9, "exp": exp + 60, "pub": ["100-199"]}));
    let step = h.bytes(&text_frame(&format!(r#"{{"refresh":"{later}"}}"#)));
    assert!(
        step.text().ends_with(&format!(
            r#"{{"refreshed":{{"valid_until":{}}}}}"#,
            exp + 60
        )),
        "{}",
        step.text()
    );
    assert!(
        run_expiries(&mut h, exp).is_none(),
        "the first exp is forgotten"
    );
    let step = h.bytes(&text_frame(r#"{"publish":150,"data":"x"}"#));
    assert!(matches!(
        step.requests[..],
        [Request::Publish { subject: 150, .. }]
    ));
    let step = h.bytes(&text_frame(r#"{"publish":9,"data":"x"}"#));
    assert!(
        step.text().contains("does not allow publishing to 9"),
        "replaced"
    );
    // A token without pub: no more publishing; without exp: no end.
    let plain = token(serde_json::json!({"sub": "9"}));
    let step = h.bytes(&text_frame(&format!(r#"{{"refresh":"{plain}"}}"#)));
    assert!(step
        .text()
        .ends_with(r#"{"refreshed":{"valid_until":null}}"#));
    let step = h.bytes(&text_frame(r#"{"publish":150,"data":"x"}"#));
    assert!(step.text().contains("needs a token whose pub claim"));
    assert!(h.credentials.is_empty());
    assert!(run_expiries(&mut h, exp + 600).is_none());
}

#[test]
fn refused_refreshes_count_and_the_last_one_closes() {
    let t = token(serde_json::json!({"sub": "9", "exp": T0 + 60}));
    let mut h = with_jwt();
    subscribed(&mut h, &upgrade(&t));
    let other_user = token(serde_json::json!({"sub": "10", "exp": T0 + 600}));
    let step = h.bytes(&text_frame(&format!(r#"{{"refresh":"{other_user}"}}"#)));
    assert!(
        step.text()
            .contains("refresh refused: token is for user 10, not 9"),
        "{}",
        step.text()
    );
    let step = h.bytes(&text_frame(r#"{"refresh":"not.a.token"}"#));
    assert!(step.text().contains("refresh refused: malformed token"));
    assert!(!h.conn.is_closing());
    let step = h.bytes(&text_frame(r#"{"refresh":7}"#));
    assert_eq!(close_code(&step.bytes), Some(WS_AUTH_FAILURES));
    assert!(h.conn.is_closing());
    assert_eq!(h.credentials.take_failed(), 3);
}

#[test]
fn the_last_allowed_failed_authentication_closes_a_keep_alive_connection() {
    let mut h = with_jwt();
    let bad = "GET /sub/9?token=x.y.z HTTP/1.1\r\nHost: t\r\n\r\n";
    for i in 1..=MAX_AUTH_FAILURES {
        let step = h.bytes(bad.as_bytes());
        let text = step.text();
        assert!(text.starts_with("HTTP/1.1 401 "), "{text}");
        if i < MAX_AUTH_FAILURES {
            assert!(
                text.contains("Keep-Alive") && !h.conn.is_closing(),
                "{i}: {text}"
            );
        } else {
            assert!(text.contains("Connection: close"), "{text}");
            assert!(h.conn.is_closing());
        }
    }
    // A refusal that is not about credentials (a host, an origin) does not count.
    let mut h = with_jwt();
    h.config.access = Arc::new(Access {
        hosts: Hosts::parse(&["push.example".into()]).unwrap(),
        ..Default::default()
    });
    for _ in 0..MAX_AUTH_FAILURES + 1 {
        let step = h.bytes(b"GET /sub/9 HTTP/1.1\r\nHost: evil.example\r\n\r\n");
        assert!(step.text().starts_with("HTTP/1.1 421 "));
    }
    assert!(!h.conn.is_closing());
}
