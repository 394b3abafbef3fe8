//! Client publish over HTTP (issue 46, docs/protocol.md "Client publish over HTTP")
//! over real sockets: `POST /pub/…` with a client's own JWT (`Authorization: Bearer`
//! or `?token=`) publishes where its `pub` claim allows, at the WebSocket's rate,
//! answered as a back-end's publish; the API key keeps its rights and a JWT never
//! gets them; over HTTP/2 the publish shares the connection with the client's SSE
//! stream; a long-poll client receives what another client sent.

mod common;
mod h2_common;
mod tls_common;

use common::*;
use h2_common::*;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;

const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";
const API_KEY: &str = "test-api-key";

fn hs(claims: Value) -> String {
    let key = EncodingKey::from_secret(SECRET.as_bytes());
    encode(&Header::new(Algorithm::HS256), &claims, &key).unwrap()
}

/// One request on its own connection (`Connection: close`): (status, body).
fn post(server: &Server, path: &str, bearer: Option<&str>, body: &[u8]) -> (u16, String) {
    let mut s = server.connect();
    s.write_all(&request("POST", path, bearer, body, false))
        .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    parse_response(&out)
}

fn request(method: &str, path: &str, bearer: Option<&str>, body: &[u8], keep: bool) -> Vec<u8> {
    let auth = bearer.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    let close = if keep { "" } else { "Connection: close\r\n" };
    let mut r = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\n{auth}{close}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// Reads one response (head and `Content-Length` body) from a keep-alive connection.
fn response(s: &mut TcpStream, buf: &mut Vec<u8>) -> (u16, String) {
    read_until(s, buf, "\r\n\r\n");
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
    let len: usize = head
        .split("content-length:")
        .nth(1)
        .and_then(|r| r.trim_start().split('\r').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < end + len {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed inside a body");
        buf.extend_from_slice(&chunk[..n]);
    }
    let status = head[9..12].parse().unwrap();
    let body = String::from_utf8_lossy(&buf[end..end + len]).into_owned();
    buf.drain(..end + len);
    (status, body)
}

#[test]
fn a_token_publishes_only_where_its_pub_claim_allows() {
    let server = Server::start(&["--jwt-secret", SECRET, "--api-key", API_KEY]);
    let (mut room, mut room_buf) = (server.connect(), Vec::new());
    let listener = hs(json!({"sub": "150"}));
    write!(
        room,
        "GET /sub/150?token={listener} HTTP/1.1\r\nHost: t\r\n\r\n"
    )
    .unwrap();
    read_until(&mut room, &mut room_buf, "welcome 150");

    let client = hs(json!({"sub": "5", "pub": [5, "100-199", "room:*"]}));
    // In the header, and in the query for a page that cannot set one.
    let (code, body) = post(&server, "/pub/150", Some(&client), b"by header");
    assert_eq!((code, body.trim()), (200, r#"{"connections":1,"users":1}"#));
    read_until(&mut room, &mut room_buf, "by header");
    let (code, body) = post(
        &server,
        &format!("/pub/150?token={client}"),
        None,
        b"by query",
    );
    assert_eq!((code, body.trim()), (200, r#"{"connections":1,"users":1}"#));
    read_until(&mut room, &mut room_buf, "by query");
    assert_eq!(post(&server, "/pub/room:1", Some(&client), b"x").0, 200);
    let batch = b"{\"subject\":150,\"data\":\"line 1\"}\n{\"subject\":5,\"data\":\"line 2\"}\n";
    let (code, body) = post(&server, "/pub", Some(&client), batch);
    assert_eq!(
        (code, body.trim()),
        (200, r#"{"messages":2,"connections":1,"users":1}"#)
    );
    read_until(&mut room, &mut room_buf, "line 1");

    // A subject, a channel, a batch line outside the claim: 403, the WebSocket's words.
    for (path, body, why) in [
        (
            "/pub/300",
            &b"x"[..],
            "token does not allow publishing to 300",
        ),
        ("/pub/news", b"x", "token does not allow publishing to news"),
        (
            "/pub",
            b"{\"channel\":\"room:1\",\"data\":\"a\"}\n{\"channel\":\"news\",\"data\":\"b\"}\n",
            "token does not allow publishing to news",
        ),
    ] {
        let (code, text) = post(&server, path, Some(&client), body);
        assert_eq!((code, text.trim()), (403, why), "{path}");
    }
    // A token without a pub claim, a forged token, none at all.
    let (code, text) = post(&server, "/pub/150", Some(&listener), b"x");
    assert_eq!(
        (code, text.trim()),
        (
            403,
            "publishing needs a token whose pub claim lists the subject"
        )
    );
    let signed = hs(json!({"sub": "5", "pub": ["*"]}));
    let (claims, signature) = signed.rsplit_once('.').unwrap();
    let first = if signature.starts_with('A') { "B" } else { "A" };
    let forged = format!("{claims}.{first}{}", &signature[1..]);
    assert_eq!(
        post(&server, &format!("/pub/150?token={forged}"), None, b"x").0,
        401
    );
    assert_eq!(post(&server, "/pub/150", None, b"x").0, 401);

    // The API key keeps its rights; a JWT never gets them, even one claiming "*".
    assert_eq!(post(&server, "/pub/300", Some(API_KEY), b"x").0, 200);
    let everything = hs(json!({"sub": "5", "pub": ["*"]}));
    assert_eq!(post(&server, "/pub/300", Some(&everything), b"x").0, 200);
    for (method, path, body) in [
        ("PUT", "/subscriptions/1/2", &b""[..]),
        ("POST", "/subscriptions", b"1 2\n"),
        ("GET", "/stats", b""),
        ("GET", "/subscribers/2", b""),
    ] {
        let mut s = server.connect();
        s.write_all(&request(method, path, Some(&everything), body, false))
            .unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        let (code, text) = parse_response(&out);
        assert_eq!(code, 401, "{method} {path} with a JWT: {text}");
        let mut s = server.connect();
        let q = format!("{path}?token={everything}");
        s.write_all(&request(method, &q, None, body, false))
            .unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        assert_eq!(parse_response(&out).0, 401, "{method} {q}");
    }
}

#[test]
fn a_client_over_the_rate_is_refused_as_over_websocket_on_any_connection() {
    let server = Server::start(&["--jwt-secret", SECRET]);
    let client = hs(json!({"sub": "7", "pub": [7]}));
    // One keep-alive connection: a burst past the bucket is answered 429.
    let mut s = server.connect();
    let mut burst = Vec::new();
    for _ in 0..30 {
        burst.extend(request("POST", "/pub/7", Some(&client), b"b", true));
    }
    let started = std::time::Instant::now();
    s.write_all(&burst).unwrap();
    let mut buf = Vec::new();
    let answers: Vec<(u16, String)> = (0..30).map(|_| response(&mut s, &mut buf)).collect();
    let refused: Vec<_> = answers.iter().filter(|a| a.0 == 429).collect();
    assert!(!refused.is_empty(), "a burst past the bucket: {answers:?}");
    assert_eq!(
        refused[0].1.trim(),
        "rate limit: at most 10 publishes per second"
    );
    assert!(
        answers.iter().all(|a| a.0 == 200 || a.0 == 429),
        "{answers:?}"
    );
    // New connections are the same user: the bucket is the user's, not the
    // connection's.
    let fresh: Vec<(u16, String)> = (0..5)
        .map(|_| post(&server, "/pub/7", Some(&client), b"again"))
        .collect();
    let fresh_refused = fresh.iter().filter(|a| a.0 == 429).count();
    assert!(fresh_refused >= 1, "{fresh:?}");
    // Everything let through, over both, is within the burst and what the elapsed
    // time earned (10 a second).
    let earned = (started.elapsed().as_secs_f64() * 10.0).ceil() as usize;
    let through = 30 - refused.len() + 5 - fresh_refused;
    assert!(
        through <= 20 + earned,
        "{through} let through: {answers:?} {fresh:?}"
    );
    // Another user has a bucket of its own.
    let other = hs(json!({"sub": "8", "pub": [7]}));
    assert_eq!(post(&server, "/pub/7", Some(&other), b"x").0, 200);
}

#[test]
fn without_a_jwt_key_only_the_back_end_publishes() {
    let server = Server::start(&[]);
    let client = hs(json!({"sub": "7", "pub": [7]}));
    let (code, text) = post(&server, &format!("/pub/7?token={client}"), None, b"x");
    assert_eq!(code, 403, "{text}");
    assert!(text.contains("no JWT key"), "{text}");
    // A loopback back-end without a key publishes as before.
    assert_eq!(post(&server, "/pub/7", None, b"x").0, 200);
}

#[test]
fn a_long_poll_client_receives_a_sprite_from_another_client() {
    let server = Server::start(&["--jwt-secret", SECRET]);
    let poller = hs(json!({"sub": "21", "pub": [22]}));
    let thrower = hs(json!({"sub": "22", "pub": [21]}));
    let mut poll = server.connect();
    write!(
        poll,
        "GET /poll/21?token={poller} HTTP/1.1\r\nHost: t\r\n\r\n"
    )
    .unwrap();
    // The poll waits for the next message; the throw is answered once it is delivered.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (code, body) = post(&server, "/pub/21", Some(&thrower), b"sprite ts=1");
        assert_eq!(code, 200, "{body}");
        let v: Value = serde_json::from_str(body.trim()).unwrap();
        if v["connections"] == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the poll never logged in"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut buf = Vec::new();
    let (code, body) = response(&mut poll, &mut buf);
    assert_eq!(code, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["messages"][0]["data"], "sprite ts=1", "{body}");
}

#[test]
fn over_http2_a_publish_shares_the_connection_with_the_clients_sse_stream() {
    let pki = tls_common::Pki::new();
    let server = pki.serve(&["--jwt-secret", SECRET]);
    let token = hs(json!({"sub": "31", "chan": ["room:*"], "pub": ["room:*"]}));
    runtime().block_on(async {
        let client = h2_connect(&server, &pki.ca_file, 1 << 20).await;
        let path = format!("/sse?channel=room:1&token={token}");
        let mut sse = h2_request(&client, "GET", &path, Some("text/event-stream"), b"")
            .await
            .unwrap();
        assert_eq!(sse.status(), 200);
        let mut text = String::new();
        body_until(sse.body_mut(), &mut text, "id: ").await;
        // The same connection, a second stream: the publish with the token.
        let mut r = h2_request(
            &client,
            "POST",
            &format!("/pub/room:1?token={token}"),
            None,
            b"over h2",
        )
        .await
        .unwrap();
        assert_eq!(r.status(), 200);
        let answer: Value = serde_json::from_str(read_to_end(r.body_mut()).await.trim()).unwrap();
        assert_eq!(answer["connections"], 1, "{answer}");
        body_until(sse.body_mut(), &mut text, "over h2").await;
        // A channel outside the claim, on the same connection: 403, the stream lives on.
        let mut r = h2_request(
            &client,
            "POST",
            &format!("/pub/news?token={token}"),
            None,
            b"no",
        )
        .await
        .unwrap();
        assert_eq!(r.status(), 403);
        let why = read_to_end(r.body_mut()).await;
        assert_eq!(why.trim(), "token does not allow publishing to news");
        let mut r = h2_request(
            &client,
            "POST",
            &format!("/pub/room:1?token={token}"),
            None,
            b"still here",
        )
        .await
        .unwrap();
        assert_eq!(r.status(), 200);
        let answer = read_to_end(r.body_mut()).await;
        assert!(answer.contains(r#""connections":1"#), "{answer}");
        body_until(sse.body_mut(), &mut text, "still here").await;
    });
}
