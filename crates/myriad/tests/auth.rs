//! Auth over real sockets (SPEC C5): subscriptions need a JWT for the path's user,
//! the API needs a key; every hostile token gets 401 (or 403 for another user), and
//! the server goes on serving.

mod common;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use common::*;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::json;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";
const API_KEY: &str = "test-api-key";

fn key(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../auth/tests/keys")
        .join(name)
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn hs(claims: serde_json::Value) -> String {
    let key = EncodingKey::from_secret(SECRET.as_bytes());
    encode(&Header::new(Algorithm::HS256), &claims, &key).unwrap()
}

fn rs(claims: serde_json::Value) -> String {
    let pem = std::fs::read(key("rsa_a.key.pem")).unwrap();
    let key = EncodingKey::from_rsa_pem(&pem).unwrap();
    encode(&Header::new(Algorithm::RS256), &claims, &key).unwrap()
}

/// Sends `request` on a fresh connection and returns the response head (up to the
/// blank line) — enough to see the status of a subscription that stays open.
fn head_of(server: &Server, request: &str) -> String {
    let mut s = server.connect();
    s.write_all(request.as_bytes()).unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "\r\n\r\n");
    String::from_utf8_lossy(&buf).into_owned()
}

fn status(head: &str) -> u16 {
    head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn sub(path: &str, authorization: Option<&str>) -> String {
    let auth = authorization.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n{auth}\r\n")
}

fn ws(path: &str, authorization: Option<&str>) -> String {
    let auth = authorization.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!(
        "GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{auth}\r\n"
    )
}

/// A token whose payload was swapped after signing (the signature is the original's).
fn tampered(token: &str, claims: serde_json::Value) -> String {
    let p: Vec<&str> = token.split('.').collect();
    let body = URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("{}.{body}.{}", p[0], p[2])
}

fn alg_none(claims: serde_json::Value) -> String {
    let h = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#);
    let b = URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("{h}.{b}.")
}

#[test]
fn subscriptions_need_a_token_for_their_user() {
    let server = Server::start(&["--jwt-secret", SECRET, "--api-key", API_KEY]);
    let good = hs(json!({"sub": "42", "exp": now() + 600}));
    let cases: Vec<(&str, String, u16)> = vec![
        ("stream, no token", sub("/sub/42", None), 401),
        ("stream, header token", sub("/sub/42", Some(&good)), 200),
        (
            "sse, query token",
            sub(&format!("/sse/42?token={good}"), None),
            200,
        ),
        ("poll, no token", sub("/poll/42?since=0", None), 401),
        ("ws, no token", ws("/ws/42", None), 401),
        (
            "ws, query token",
            ws(&format!("/ws/42?token={good}"), None),
            101,
        ),
        ("another user's token", sub("/sub/43", Some(&good)), 403),
        (
            "numeric sub",
            sub("/sub/42", Some(&hs(json!({"sub": 42})))),
            200,
        ),
        (
            "expired",
            sub(
                "/sub/42",
                Some(&hs(json!({"sub": "42", "exp": now() - 120}))),
            ),
            401,
        ),
        (
            "not yet valid",
            sub(
                "/sub/42",
                Some(&hs(json!({"sub": "42", "nbf": now() + 600}))),
            ),
            401,
        ),
        (
            "tampered payload",
            sub("/sub/43", Some(&tampered(&good, json!({"sub": "43"})))),
            401,
        ),
        (
            "alg none",
            sub("/sub/42", Some(&alg_none(json!({"sub": "42"})))),
            401,
        ),
        (
            "signed with another secret",
            sub(
                "/sub/42",
                Some(
                    &encode(
                        &Header::new(Algorithm::HS256),
                        &json!({"sub": "42"}),
                        &EncodingKey::from_secret(b"another-secret-of-at-least-32-bytes!"),
                    )
                    .unwrap(),
                ),
            ),
            401,
        ),
        (
            "RS256 token against the HS256 secret",
            sub("/sub/42", Some(&rs(json!({"sub": "42"})))),
            401,
        ),
        ("garbage", sub("/sub/42", Some("not.a.jwt")), 401),
    ];
    for (name, request, want) in &cases {
        let head = head_of(&server, request);
        assert_eq!(status(&head), *want, "{name}: {head}");
        if *want == 401 {
            assert!(head.contains("WWW-Authenticate: Bearer"), "{name}: {head}");
        }
    }
    // Still serving: an authorised subscriber gets a publish made with the key.
    let mut s = server.connect();
    s.write_all(sub("/sub/42", Some(&good)).as_bytes()).unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "welcome 42");
    let (code, body) = api(&server, "POST", "/pub/42", Some(API_KEY), b"hello");
    assert_eq!(code, 200, "{body}");
    read_until(&mut s, &mut buf, "hello");
}

#[test]
fn rsa_key_refuses_hs256_made_with_the_public_key() {
    let pem = key("rsa_a.pub.pem");
    let server = Server::start(&["--jwt-key", pem.to_str().unwrap()]);
    let good = rs(json!({"sub": "7", "exp": now() + 600}));
    assert_eq!(status(&head_of(&server, &sub("/sub/7", Some(&good)))), 200);
    // The classic confusion: the public key's PEM used as an HMAC secret.
    let public = std::fs::read(&pem).unwrap();
    let confused = encode(
        &Header::new(Algorithm::HS256),
        &json!({"sub": "7"}),
        &EncodingKey::from_secret(&public),
    )
    .unwrap();
    assert_eq!(
        status(&head_of(&server, &sub("/sub/7", Some(&confused)))),
        401
    );
    assert_eq!(
        status(&head_of(
            &server,
            &sub("/sub/7", Some(&alg_none(json!({"sub": "7"}))))
        )),
        401
    );
    assert_eq!(status(&head_of(&server, &sub("/sub/7", Some(&good)))), 200);
}

/// One API request with an optional key; returns (status, body).
fn api(server: &Server, method: &str, path: &str, key: Option<&str>, body: &[u8]) -> (u16, String) {
    let mut s = server.connect();
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    s.write_all(&request).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    parse_response(&out)
}

#[test]
fn api_calls_need_a_configured_key() {
    let server = Server::start(&["--api-key", API_KEY, "--api-key", "second-key"]);
    for (method, path, body) in [
        ("POST", "/pub/1", &b"x"[..]),
        ("POST", "/pub", b"{\"subject\":1,\"data\":\"x\"}\n"),
        ("PUT", "/subscriptions/1/2", b""),
        ("DELETE", "/subscriptions/1/2", b""),
        ("POST", "/subscriptions", b"1 2\n"),
        ("GET", "/subscribers/2", b""),
        ("GET", "/subscriptions/1", b""),
        ("GET", "/stats", b""),
    ] {
        let (code, text) = api(&server, method, path, None, body);
        assert_eq!(code, 401, "{method} {path} without a key: {text}");
        let (code, text) = api(&server, method, path, Some("wrong"), body);
        assert_eq!(code, 401, "{method} {path} with a wrong key: {text}");
        let (code, text) = api(&server, method, path, Some(API_KEY), body);
        assert_eq!(code, 200, "{method} {path} with the key: {text}");
        let (code, _) = api(&server, method, path, Some("second-key"), body);
        assert_eq!(code, 200, "{method} {path} with the second key");
    }
    // Health needs nothing; subscriptions stay open without a JWT configured.
    assert_eq!(api(&server, "GET", "/healthz", None, b"").0, 200);
    assert_eq!(status(&head_of(&server, &sub("/sub/5", None))), 200);
}

/// The status of `request_line` sent with `Origin: origin` and `extra` (headers, then
/// optionally a blank line and a body).
fn with_origin(server: &Server, request_line: &str, origin: &str, extra: &str) -> u16 {
    let end = if extra.contains("\r\n\r\n") {
        ""
    } else {
        "\r\n"
    };
    let request = format!("{request_line}\r\nHost: t\r\nOrigin: {origin}\r\n{extra}{end}");
    status(&head_of(server, &request))
}

#[test]
fn origins_gate_subscriptions_websockets_and_the_api() {
    let server = Server::start(&[
        "--allowed-origins",
        "https://app.example,http://b.example:81",
    ]);
    let ws_extra = "Upgrade: websocket\r\nConnection: Upgrade\r\n\
                    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";
    let post = "Content-Type: text/plain\r\nContent-Length: 1\r\n\r\nx";
    for (line, origin, extra, want) in [
        ("GET /sse/1 HTTP/1.1", "https://app.example", "", 200),
        ("GET /sse/1 HTTP/1.1", "https://evil.example", "", 403),
        (
            "GET /poll/1?since=0 HTTP/1.1",
            "https://evil.example",
            "",
            403,
        ),
        ("GET /ws/1 HTTP/1.1", "http://b.example:81", ws_extra, 101),
        ("GET /ws/1 HTTP/1.1", "http://b.example:82", ws_extra, 403),
        ("GET /sub/1 HTTP/1.1", "null", "", 403),
        // A "simple" cross-origin POST (no preflight) never publishes.
        ("POST /pub/1 HTTP/1.1", "https://evil.example", post, 403),
        ("POST /pub/1 HTTP/1.1", "https://app.example", post, 200),
        ("OPTIONS /pub/1 HTTP/1.1", "https://evil.example", "", 405),
    ] {
        let got = with_origin(&server, line, origin, extra);
        assert_eq!(got, want, "{line} from {origin}");
    }
    // The default (`*`): any page subscribes, no page calls the API.
    let open = Server::start(&[]);
    let page = "https://x.example";
    assert_eq!(with_origin(&open, "GET /sse/1 HTTP/1.1", page, ""), 200);
    assert_eq!(with_origin(&open, "POST /pub/1 HTTP/1.1", page, post), 403);
    assert_eq!(open.publish(2, "still serving")["connections"], 0);
}

#[test]
fn allowed_hosts_refuse_other_host_names_with_421() {
    // `test`: the harness's own requests (publish) name it.
    let server = Server::start(&[
        "--allowed-hosts",
        "push.example,*.cdn.example,127.0.0.1,test",
    ]);
    let post = "Content-Length: 1\r\n\r\nx";
    for (line, host, extra, want) in [
        ("GET /sse/1 HTTP/1.1", Some("push.example:8000"), "", 200),
        ("GET /sse/1 HTTP/1.1", Some("a.cdn.example"), "", 200),
        ("GET /sub/1 HTTP/1.1", Some("127.0.0.1:9"), "", 200),
        // A rebinding name pointing at us: refused before anything happens.
        ("GET /sse/1 HTTP/1.1", Some("evil.example"), "", 421),
        ("GET /poll/1?since=0 HTTP/1.1", Some("cdn.example"), "", 421),
        ("POST /pub/1 HTTP/1.1", Some("evil.example"), post, 421),
        ("POST /pub/1 HTTP/1.1", Some("push.example"), post, 200),
        ("GET /sse/1 HTTP/1.1", None, "", 400),
        // Load balancers probe by address.
        ("GET /healthz HTTP/1.1", Some("10.0.0.1"), "", 200),
    ] {
        let host_line = host.map_or(String::new(), |h| format!("Host: {h}\r\n"));
        let end = if extra.is_empty() { "\r\n" } else { "" };
        let head = head_of(&server, &format!("{line}\r\n{host_line}{extra}{end}"));
        assert_eq!(status(&head), want, "{line} Host {host:?}: {head}");
        if want == 421 {
            assert!(head.contains("421 Misdirected Request"), "{head}");
        }
    }
    // Absolute-form targets name the host too (RFC 9112: it wins over Host).
    let head = head_of(
        &server,
        "GET http://evil.example/sse/1 HTTP/1.1\r\nHost: push.example\r\n\r\n",
    );
    assert_eq!(status(&head), 421, "{head}");
    assert_eq!(server.publish(2, "still serving")["connections"], 0);
    // No list (the default): any host.
    let open = Server::start(&[]);
    let head = head_of(&open, "GET /sse/1 HTTP/1.1\r\nHost: evil.example\r\n\r\n");
    assert_eq!(status(&head), 200, "{head}");
}

#[test]
fn websocket_clients_publish_where_their_token_allows_at_a_bounded_rate() {
    let server = Server::start(&["--jwt-secret", SECRET]);
    let publisher = hs(json!({"sub": "5", "pub": [5, "100-199"], "exp": now() + 600}));
    let listener = hs(json!({"sub": "150"}));
    let mut room = server.connect();
    room.write_all(sub("/sub/150", Some(&listener)).as_bytes())
        .unwrap();
    let mut room_buf = Vec::new();
    read_until(&mut room, &mut room_buf, "welcome 150");
    let mut client = server.connect();
    client
        .write_all(ws(&format!("/ws/5?token={publisher}"), None).as_bytes())
        .unwrap();
    let mut buf = Vec::new();
    read_until(&mut client, &mut buf, "\r\n\r\n");
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    buf.drain(..end);

    client
        .write_all(&client_text(r#"{"publish":150,"data":"hi room"}"#))
        .unwrap();
    assert_eq!(
        server_text(&mut client, &mut buf),
        r#"{"published":{"connections":1,"users":1}}"#
    );
    read_until(&mut room, &mut room_buf, "hi room");
    for (frame, why) in [
        (
            r#"{"publish":300,"data":"x"}"#,
            "does not allow publishing to 300",
        ),
        (r#"{"publish":"x"}"#, "bad publish frame"),
    ] {
        client.write_all(&client_text(frame)).unwrap();
        let answer = server_text(&mut client, &mut buf);
        assert!(
            answer.starts_with(r#"{"error":"#) && answer.contains(why),
            "{answer}"
        );
    }
    // Bounded rate: a burst of 30 gets at most BURST (20) through, the rest refused.
    let mut burst = Vec::new();
    for _ in 0..30 {
        burst.extend(client_text(r#"{"publish":5,"data":"b"}"#));
    }
    let started = std::time::Instant::now();
    client.write_all(&burst).unwrap();
    let answers: Vec<String> = (0..30)
        .map(|_| server_text(&mut client, &mut buf))
        .collect();
    let refused = answers.iter().filter(|a| a.contains("rate limit")).count();
    // The bucket held 19 (one publish above); it earns 10 per second meanwhile.
    let earned = (started.elapsed().as_secs_f64() * 10.0).ceil() as usize;
    assert!(
        refused >= 1,
        "a burst past the bucket is refused: {answers:?}"
    );
    assert!(
        30 - refused <= 19 + earned,
        "{refused} refused: {answers:?}"
    );
    // A token without a pub claim may not publish at all.
    let mut plain = server.connect();
    plain
        .write_all(ws(&format!("/ws/150?token={listener}"), None).as_bytes())
        .unwrap();
    let mut pbuf = Vec::new();
    read_until(&mut plain, &mut pbuf, "\r\n\r\n");
    let end = pbuf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    pbuf.drain(..end);
    plain
        .write_all(&client_text(r#"{"publish":150,"data":"x"}"#))
        .unwrap();
    let answer = server_text(&mut plain, &mut pbuf);
    assert!(answer.contains("needs a token whose pub claim"), "{answer}");
}
