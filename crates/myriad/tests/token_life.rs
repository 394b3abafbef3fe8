//! Token lifetime and failed authentications over real sockets, against the real
//! binary: every transport ends when its token expires (WebSocket close 4001, SSE
//! `event: expired`, a stream's last line, a waiting long-poll's 401; SSE and a
//! stream over HTTP/2 the same way, with curl `--http2`), a WebSocket
//! refreshed in place outlives its first token, a publish sent after `exp` is
//! refused, `--jwt-audience` / `--jwt-issuer` refuse other services' tokens, and
//! the last allowed bad token on a keep-alive connection closes it.
//!
//! Tokens are made to expire 9 to 10 s after they are made (whole seconds): the
//! server accepts a token until `exp` + 30 s of leeway (`auth::DEFAULT_LEEWAY`), so
//! their `exp` is 20 s in the past. Closes are waited for with bounded deadlines.

mod common;
mod tls_common;

use common::*;
use connection::{MAX_AUTH_FAILURES, WS_TOKEN_EXPIRED};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";
/// `auth::DEFAULT_LEEWAY`: seconds a token is accepted after its `exp`.
const LEEWAY: u64 = 30;
/// Seconds the short-lived tokens of these tests stay valid, at most (a Python
/// client must start and connect within the first 9: a Python start on a loaded CI
/// machine took more than the 3 s this once allowed).
const LIFE: u64 = 10;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn hs(claims: serde_json::Value) -> String {
    let key = EncodingKey::from_secret(SECRET.as_bytes());
    encode(&Header::new(Algorithm::HS256), &claims, &key).unwrap()
}

/// A token for `user` that the server stops accepting at the returned Unix second
/// (at most [`LIFE`] s from now), with `extra` claims.
fn short(user: u64, extra: serde_json::Value) -> (String, u64) {
    let exp = now() + LIFE - LEEWAY;
    let mut claims = json!({"sub": user.to_string(), "exp": exp});
    claims
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    (hs(claims), exp + LEEWAY)
}

/// Runs a Python `websockets` script with `args`; returns its stdout lines.
fn python(script: &str, args: &[&str]) -> Vec<String> {
    let mut child = Command::new("python3")
        .args(["-c", script])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 (pip install -r tests/requirements.txt)");
    let lines: Vec<String> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .collect();
    assert!(
        child.wait().unwrap().success(),
        "python failed (pip install websockets?): {lines:?}"
    );
    lines
}

/// Two WebSockets of user 42 open with tokens that end in 9 to 10 s: A is left alone and
/// is closed with 4001; B first tries user 43's token (refused), then refreshes
/// with a long-lived token of its own user, and still gets a delivery after A's end.
const WS_SCRIPT: &str = r#"
import asyncio, json, sys, time, urllib.request, websockets
base, token_a, token_b, other, later, until = sys.argv[1:7]
async def main():
    a = await websockets.connect(f"ws://{base}/ws/42?token={token_a}", ping_interval=None)
    b = await websockets.connect(f"ws://{base}/ws/42?token={token_b}", ping_interval=None)
    await b.send(json.dumps({"refresh": other}))
    print("other:", await asyncio.wait_for(b.recv(), 10), flush=True)
    await b.send(json.dumps({"refresh": later}))
    print("later:", await asyncio.wait_for(b.recv(), 10), flush=True)
    try:
        print("a got:", await asyncio.wait_for(a.recv(), 20), flush=True)
    except websockets.ConnectionClosed as e:
        print("a closed:", e.rcvd.code, e.rcvd.reason, flush=True)
    # Past the first token's end (A's close says it came): B is still open.
    while time.time() < int(until) + 1:
        await asyncio.sleep(0.1)
    req = urllib.request.Request(f"http://{base}/pub/42", data=b"after", method="POST")
    print("publish:", urllib.request.urlopen(req, timeout=10).read().decode().strip(), flush=True)
    print("b got:", await asyncio.wait_for(b.recv(), 10), flush=True)
    await b.close()
asyncio.run(main())
"#;

#[test]
fn a_websocket_closes_with_4001_at_expiry_unless_refreshed_in_place() {
    let server = Server::start(&["--jwt-secret", SECRET]);
    let (token_a, until) = short(42, json!({}));
    let (token_b, _) = short(42, json!({}));
    let other = hs(json!({"sub": "43", "exp": now() + 600}));
    let later = hs(json!({"sub": "42", "exp": now() + 600}));
    let base = server.addr.to_string();
    let lines = python(
        WS_SCRIPT,
        &[
            &base,
            &token_a,
            &token_b,
            &other,
            &later,
            &until.to_string(),
        ],
    );
    assert_eq!(
        lines[0],
        r#"other: {"error":"refresh refused: token is for user 43, not 42"}"#
    );
    assert_eq!(
        lines[1],
        format!(
            r#"later: {{"refreshed":{{"valid_until":{}}}}}"#,
            now_plus_leeway(&later)
        )
    );
    assert_eq!(
        lines[2],
        format!("a closed: {WS_TOKEN_EXPIRED} token expired")
    );
    assert_eq!(lines[3], r#"publish: {"connections":1,"users":1}"#);
    assert_eq!(lines[4], "b got: after");
    // The refused refresh is counted.
    server.wait_stats("auth_failures", |s| s["auth_failures"] == 1);
}

/// `exp` + leeway of a token made by [`hs`].
fn now_plus_leeway(token: &str) -> u64 {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    let claims: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    claims["exp"].as_u64().unwrap() + LEEWAY
}

#[test]
fn sse_ends_with_an_expired_event() {
    let server = Server::start(&["--jwt-secret", SECRET]);
    let (token, _) = short(7, json!({}));
    let url = format!("http://{}/sse/7?token={token}", server.addr);
    let curl = Curl::start(&[&url]);
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    server.publish(7, "before");
    curl.until("data: before");
    let lines = curl.until("event: expired");
    assert_eq!(lines.last().unwrap(), "event: expired");
    assert_eq!(
        curl.until("data: "),
        [r#"data: {"reason":"token expired"}"#]
    );
    // Then the stream ends: curl has nothing more and exits.
    curl.until_end();
}

#[test]
fn http2_streams_end_like_their_http1_transports() {
    let pki = tls_common::Pki::new();
    let server = pki.serve(&["--jwt-secret", SECRET]);
    let ca = pki.ca_file.to_str().unwrap();
    let (token, _) = short(6, json!({}));
    let url = |path: &str| {
        format!(
            "https://localhost:{}{path}?token={token}",
            server.addr.port()
        )
    };
    let sse = Curl::start(&["--http2", "--cacert", ca, &url("/sse/6")]);
    let stream = Curl::start(&["--http2", "--cacert", ca, &url("/sub/6")]);
    stream.until("welcome 6");
    sse.until("retry:");
    sse.until("event: expired");
    assert_eq!(sse.until("data: "), [r#"data: {"reason":"token expired"}"#]);
    assert_eq!(stream.until("token expired"), ["token expired"]);
    // Each stream then ends (END_STREAM, or a reset once the SSE stream lingered).
    sse.until_end();
    stream.until_end();
}

#[test]
fn a_chunked_stream_ends_with_a_last_line() {
    let server = Server::start(&["--jwt-secret", SECRET]);
    let (token, _) = short(8, json!({}));
    let mut s = server.connect();
    write!(
        s,
        "GET /sub/8 HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "welcome 8");
    // A last chunk, then the final one (within the 10 s of `read_until`), then EOF.
    read_until(&mut s, &mut buf, "e\r\ntoken expired\n\r\n0\r\n\r\n");
    assert!(
        String::from_utf8_lossy(&buf).ends_with("0\r\n\r\n"),
        "{:?}",
        String::from_utf8_lossy(&buf)
    );
    let mut more = [0u8; 64];
    assert_eq!(s.read(&mut more).expect("EOF, not a timeout"), 0);
}

#[test]
fn a_waiting_long_poll_is_answered_401_when_its_token_expires() {
    let server = Server::start(&["--jwt-secret", SECRET, "--poll-timeout", "60"]);
    let (token, _) = short(9, json!({}));
    let mut s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET /poll/9?token={token} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "token expired\n");
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 401 "), "{text}");
    assert!(
        text.contains("WWW-Authenticate: Bearer error=\"invalid_token\""),
        "{text}"
    );
}

/// The server's frames on `s` until its close frame: (text frames, close code).
fn frames_until_close(s: &mut std::net::TcpStream, mut buf: Vec<u8>) -> (Vec<String>, u16) {
    let mut texts = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if buf.len() >= 2 && buf.len() >= 2 + (buf[1] & 0x7f) as usize {
            let len = (buf[1] & 0x7f) as usize;
            let op = buf[0] & 0x0f;
            let payload: Vec<u8> = buf.drain(..2 + len).skip(2).collect();
            match op {
                1 => texts.push(String::from_utf8(payload).unwrap()),
                8 => return (texts, u16::from_be_bytes([payload[0], payload[1]])),
                _ => {}
            }
            continue;
        }
        assert!(Instant::now() < deadline, "no close frame: {texts:?}");
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed without a close frame: {texts:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `kill -SIG pid` (the test's own server).
fn signal(server: &Server, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &server.pid().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig}");
}

#[test]
fn a_client_publish_sent_after_exp_is_refused() {
    let server = Server::start(&["--jwt-secret", SECRET]);
    let (room, mut room_buf) = {
        let mut s = server.connect();
        write!(
            s,
            "GET /sub/150?token={} HTTP/1.1\r\nHost: t\r\n\r\n",
            hs(json!({"sub": 150}))
        )
        .unwrap();
        let mut buf = Vec::new();
        read_until(&mut s, &mut buf, "welcome 150");
        (s, buf)
    };
    let mut room = room;
    let (token, until) = short(5, json!({"pub": [150]}));
    let mut ws = server.connect();
    write!(
        ws,
        "GET /ws/5?token={token} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    read_until(&mut ws, &mut buf, "\r\n\r\n");
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    buf.drain(..end);
    ws.write_all(&client_text(r#"{"publish":150,"data":"in time"}"#))
        .unwrap();
    read_until(&mut room, &mut room_buf, "in time");
    // The server is stopped across the token's end and the publish sent while it
    // is, so the frame is there before the server could have closed anything: when
    // it runs again the frame and the expiry are both due, and whichever it takes
    // first, nothing is published (which one wins is the loop's business; the
    // core's tests drive "the frame first" exactly, with a virtual clock).
    signal(&server, "-STOP");
    while now() < until + 1 {
        std::thread::sleep(Duration::from_millis(100));
    }
    let sent = ws.write_all(&client_text(r#"{"publish":150,"data":"too late"}"#));
    signal(&server, "-CONT");
    sent.unwrap();
    let (texts, code) = frames_until_close(&mut ws, buf);
    assert_eq!(code, WS_TOKEN_EXPIRED, "{texts:?}");
    // The first publish's answer, then at most the refusal of the late one.
    assert_eq!(texts[0], r#"{"published":{"connections":1,"users":1}}"#);
    assert!(
        texts[1..]
            .iter()
            .all(|t| t == r#"{"error":"token expired"}"#),
        "{texts:?}"
    );
    // The room's next message is the one published after, not "too late".
    server.publish(150, "sentinel");
    read_until(&mut room, &mut room_buf, "sentinel");
    assert!(
        !String::from_utf8_lossy(&room_buf).contains("too late"),
        "{:?}",
        String::from_utf8_lossy(&room_buf)
    );
}

fn key(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../auth/tests/keys")
        .join(name)
}

fn rs(private: &str, claims: serde_json::Value) -> String {
    let pem = std::fs::read(key(private)).unwrap();
    let key = EncodingKey::from_rsa_pem(&pem).unwrap();
    encode(&Header::new(Algorithm::RS256), &claims, &key).unwrap()
}

/// The status and text of one request on a fresh connection: the head of a
/// subscription that stays open, or a whole refusal (the server closes after it).
fn answer(server: &Server, path: &str) -> (u16, String) {
    let mut s = server.connect();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "\r\n\r\n");
    let status = String::from_utf8_lossy(&buf)
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if status != 200 {
        buf.extend(read_all(&mut s));
    }
    (status, String::from_utf8_lossy(&buf).into_owned())
}

#[test]
fn tokens_for_another_audience_or_issuer_are_refused() {
    let server = Server::start(&[
        "--jwt-key",
        key("rsa_a.pub.pem").to_str().unwrap(),
        "--jwt-audience",
        "push",
        "--jwt-audience",
        "push-staging",
        "--jwt-issuer",
        "https://id.example",
    ]);
    let exp = now() + 600;
    for (claims, want, why) in [
        (
            json!({"sub": "1", "exp": exp, "iss": "https://id.example", "aud": "push"}),
            200,
            "",
        ),
        (
            json!({"sub": "1", "iss": "https://id.example", "aud": ["billing", "push-staging"]}),
            200,
            "",
        ),
        (
            json!({"sub": "1", "iss": "https://id.example", "aud": "billing"}),
            401,
            "token audience (aud) missing or not this server",
        ),
        (
            json!({"sub": "1", "iss": "https://id.example"}),
            401,
            "token audience (aud) missing",
        ),
        (
            json!({"sub": "1", "iss": "https://other.example", "aud": "push"}),
            401,
            "token issuer (iss) missing or not accepted here",
        ),
        (
            json!({"sub": "1", "aud": "push"}),
            401,
            "token issuer (iss) missing",
        ),
    ] {
        let token = rs("rsa_a.key.pem", claims.clone());
        let (status, text) = answer(&server, &format!("/sse/1?token={token}"));
        assert_eq!(status, want, "{claims}: {text}");
        assert!(text.contains(why), "{claims}: {text}");
        if want == 401 {
            assert!(text.contains("WWW-Authenticate: Bearer error=\"invalid_token\""));
        }
    }
}

#[test]
fn the_variables_take_comma_separated_lists() {
    let server = Server::start_env(
        &["--jwt-secret", SECRET],
        &[
            ("MYRIAD_JWT_AUDIENCE", "billing,push"),
            ("MYRIAD_JWT_ISSUER", "idp-a,idp-b"),
        ],
    );
    for (iss, aud, want) in [
        ("idp-b", "push", 200),
        ("idp-a", "billing", 200),
        ("idp-c", "push", 401),
        ("idp-a", "billing,push", 401),
    ] {
        let token = hs(json!({"sub": "1", "iss": iss, "aud": aud}));
        let (status, text) = answer(&server, &format!("/sse/1?token={token}"));
        assert_eq!(status, want, "iss {iss} aud {aud}: {text}");
    }
}

#[test]
fn the_last_allowed_bad_token_on_a_keep_alive_connection_closes_it() {
    let server = Server::start(&[
        "--jwt-key",
        key("rsa_a.pub.pem").to_str().unwrap(),
        "--admin",
        "127.0.0.1:0",
    ]);
    // Signed with another key: each costs the server an RSA signature check.
    let forged = rs("rsa_b.key.pem", json!({"sub": "1"}));
    let mut s = server.connect();
    let request =
        format!("GET /sub/1 HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {forged}\r\n\r\n");
    let mut buf = Vec::new();
    for i in 1..=MAX_AUTH_FAILURES {
        s.write_all(request.as_bytes()).unwrap();
        read_until(&mut s, &mut buf, "token signature invalid\n");
        let text = String::from_utf8_lossy(&buf).into_owned();
        assert!(text.starts_with("HTTP/1.1 401 "), "{i}: {text}");
        let closes = text.contains("Connection: close");
        assert_eq!(closes, i == MAX_AUTH_FAILURES, "{i}: {text}");
        buf.clear();
    }
    // The next one finds the connection closed.
    let _ = s.write_all(request.as_bytes());
    assert!(read_all(&mut s).is_empty(), "no answer after the close");
    server.wait_stats("auth_failures", |s| {
        s["auth_failures"] == u64::from(MAX_AUTH_FAILURES)
    });
    let admin = server.admin.expect("--admin").to_string();
    let metrics = common::cluster::get(&admin, "/metrics");
    let line = format!("myriad_auth_failures_total {MAX_AUTH_FAILURES}");
    assert!(metrics.lines().any(|l| l == line), "{metrics}");
}
