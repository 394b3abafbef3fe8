//! Access decisions in the core, with a virtual clock: a remote peer without API
//! keys configured, and a token that expires while the clock moves.

use super::harness::Harness;
use super::*;
use crate::clock::TICK_MS;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use std::sync::Arc;

const SECRET: &[u8] = b"a-test-secret-of-at-least-32-bytes!!";
/// The virtual Unix time at tick 0.
const START: u64 = 1_700_000_000;

fn with_jwt(h: &mut Harness) {
    let keys = auth::JwtKeys::hs256(SECRET).unwrap();
    h.config.access = Arc::new(Access {
        jwt: Some(auth::JwtVerifier::new(keys).with_leeway(0)),
        api_keys: Default::default(),
        origins: Default::default(),
        hosts: Default::default(),
        publish_rates: Default::default(),
        pusher: Default::default(),
    });
    h.config.unix_start_ms = START * 1000;
}

#[test]
fn without_api_keys_a_remote_peer_gets_403_and_health_still_answers() {
    let mut h = Harness::new();
    h.conn.set_peer_loopback(false);
    let step = h.bytes(b"POST /pub/1 HTTP/1.1\r\nContent-Length: 1\r\n\r\nx");
    assert!(step.text().starts_with("HTTP/1.1 403 "), "{}", step.text());
    assert!(step.text().contains("loopback peers only"));
    assert!(step.requests.is_empty(), "nothing reached the bus");

    let mut h = Harness::new();
    h.conn.set_peer_loopback(false);
    let step = h.bytes(b"GET /stats HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n");
    let text = step.text();
    assert!(text.starts_with("HTTP/1.1 403 "), "{text}");
    assert!(
        text.contains("HTTP/1.1 200 OK"),
        "keep-alive went on: {text}"
    );
}

#[test]
fn a_token_is_checked_against_the_clock_of_the_ticks() {
    let exp = START + 60;
    let token = encode(
        &Header::new(Algorithm::HS256),
        &serde_json::json!({"sub": "9", "exp": exp}),
        &EncodingKey::from_secret(SECRET),
    )
    .unwrap();
    let request = format!("GET /sub/9?token={token} HTTP/1.1\r\n\r\n");

    let mut h = Harness::new();
    with_jwt(&mut h);
    let step = h.bytes(request.as_bytes());
    assert!(matches!(
        step.requests[..],
        [Request::Login { user: 9, .. }]
    ));

    let mut h = Harness::new();
    with_jwt(&mut h);
    // 60 s later in ticks: the token has just expired.
    h.now = (60 * 1000 / TICK_MS) as Tick;
    let step = h.bytes(request.as_bytes());
    assert!(step.text().starts_with("HTTP/1.1 401 "), "{}", step.text());
    assert!(step.text().contains("token expired"));
    assert!(step.requests.is_empty());
}

#[test]
fn only_a_keyless_listener_beyond_loopback_is_warned_about() {
    let at = |a: &str| a.parse::<std::net::SocketAddr>().unwrap();
    let warned = |listen: &str, key: bool| open_api_warning(at(listen), key, "--listen");
    for open in [
        "0.0.0.0:8000",
        "192.0.2.1:80",
        "[::]:8000",
        "[2001:db8::1]:80",
    ] {
        let text = warned(open, false).unwrap_or_else(|| panic!("{open}: no warning"));
        assert!(
            text.contains("reverse proxy") && text.contains("--api-key"),
            "{text}"
        );
    }
    for local in [
        "127.0.0.1:8000",
        "127.0.0.9:1",
        "[::1]:8000",
        "[::ffff:127.0.0.1]:8000",
    ] {
        assert_eq!(warned(local, false), None, "{local}");
    }
    assert_eq!(warned("0.0.0.0:8000", true), None, "a key closes the API");
}
