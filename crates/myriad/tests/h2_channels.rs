//! Subscribing and unsubscribing an open HTTP/2 stream (docs/protocol.md "HTTP/2:
//! subscribe on an open connection") over real TLS sockets with the `h2` crate: a
//! subscription stream names itself with `session=`, and `POST /subscribe` and
//! `/unsubscribe` on the same connection change its channels — live messages, a
//! replay from `since` (with its gap), a leave; refusals by the stream's token and
//! the channel limit; an unknown session; HTTP/1.1; a reconnect whose
//! `Last-Event-ID` carries the parts of channels joined later.

mod common;
mod h2_common;
mod tls_common;

use bytes::Bytes;
use common::Server;
use h2_common::*;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use tls_common::*;

type Client = h2::client::SendRequest<Bytes>;

const SSE: Option<&str> = Some("text/event-stream");

/// A request with no body and the headers given; waits for its head.
async fn get(
    client: &Client,
    path: &str,
    headers: &[(&str, &str)],
) -> http::Response<h2::RecvStream> {
    let mut req = http::Request::builder().uri(format!("https://localhost{path}"));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let mut client = client.clone().ready().await.unwrap();
    let (response, _) = client.send_request(req.body(()).unwrap(), true).unwrap();
    tokio::time::timeout(TIMEOUT, response)
        .await
        .expect("response head in time")
        .unwrap()
}

/// A POST without a body on `client`: its status and JSON answer.
async fn post(client: &Client, path: &str) -> (u16, Value) {
    let mut r = h2_request(client, "POST", path, None, b"").await.unwrap();
    let status = r.status().as_u16();
    let text = read_to_end(r.body_mut()).await;
    let value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{path}: {status} {text}"));
    (status, value)
}

/// `POST /pub/<channel>` (the API answers a loopback peer): how many connections.
async fn publish(client: &Client, channel: &str, text: &str) -> u64 {
    let mut r = h2_request(
        client,
        "POST",
        &format!("/pub/{channel}"),
        None,
        text.as_bytes(),
    )
    .await
    .unwrap();
    let answer: Value = serde_json::from_str(&read_to_end(r.body_mut()).await).unwrap();
    answer["connections"].as_u64().unwrap()
}

#[test]
fn a_stream_joins_and_leaves_channels_by_posts_on_its_connection() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    runtime().block_on(async {
        let client = h2_connect(&server, &pki.ca_file, 1 << 20).await;
        let mut sse = h2_request(&client, "GET", "/sse?session=tab-1&channel=a", SSE, b"")
            .await
            .unwrap();
        let mut text = String::new();
        body_until(sse.body_mut(), &mut text, "id: ").await;
        // Subscribe: answered once joined, then the channel's messages arrive.
        let (status, answer) = post(&client, "/subscribe?session=tab-1&channel=b").await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["subscribed"], "b");
        assert_eq!(answer["gap"], false);
        assert!(answer["pos"].as_str().unwrap().ends_with("-0"), "{answer}");
        assert_eq!(publish(&client, "b", "one").await, 1);
        body_until(sse.body_mut(), &mut text, "event: b\ndata: one\n\n").await;
        // With `since`: what the channel kept is replayed first.
        for m in ["c1", "c2"] {
            assert_eq!(publish(&client, "c", m).await, 0);
        }
        let mut r = h2_request(&client, "GET", "/history/c", None, b"").await.unwrap();
        let history: Value = serde_json::from_str(&read_to_end(r.body_mut()).await).unwrap();
        let epoch = history["pos"].as_str().unwrap().split('-').next().unwrap().to_string();
        let path = format!("/subscribe?session=tab-1&channel=c&since={epoch}-0");
        let (status, answer) = post(&client, &path).await;
        assert_eq!((status, &answer), (200, &json!({"subscribed": "c", "pos": format!("{epoch}-0"), "gap": false})));
        body_until(sse.body_mut(), &mut text, "event: c\ndata: c1\n\n").await;
        body_until(sse.body_mut(), &mut text, "event: c\ndata: c2\n\n").await;
        // From a position of another epoch: a gap, told on the stream before the replay.
        let (status, answer) = post(&client, "/subscribe?session=tab-1&channel=c2&since=1-5").await;
        assert_eq!((status, answer["gap"].as_bool()), (200, Some(true)), "{answer}");
        assert_eq!(publish(&client, "c2", "live").await, 1);
        body_until(sse.body_mut(), &mut text, "event: c2\ndata: live").await;
        assert!(text.contains("event: gap\ndata: {\"channel\":\"c2\""), "{text}");
        // Unsubscribe: nothing of b after the answer.
        let (status, answer) = post(&client, "/unsubscribe?session=tab-1&channel=b").await;
        assert_eq!((status, answer), (200, json!({"unsubscribed": "b"})));
        assert_eq!(publish(&client, "b", "after").await, 0);
        assert_eq!(publish(&client, "a", "last").await, 1);
        body_until(sse.body_mut(), &mut text, "event: a\ndata: last").await;
        assert!(!text.contains("after"), "{text}");
        // Refusals, in the framed WebSocket's words.
        for (path, status, answer) in [
            ("/subscribe?session=tab-1&channel=a", 409, json!({"channel": "a", "error": "already subscribed"})),
            ("/unsubscribe?session=tab-1&channel=b", 409, json!({"channel": "b", "error": "not subscribed"})),
            ("/subscribe?session=tab-1&channel=gap", 400, json!({"channel": "gap", "error": "this channel name is one of the SSE event names myriad sends"})),
            ("/subscribe?session=tab-1&channel=d&since=x", 400, json!({"channel": "d", "error": "since is not <epoch>-<seq>"})),
            ("/subscribe?session=tab-2&channel=a", 404, json!({"error": "no stream with this session on this connection"})),
        ] {
            assert_eq!(post(&client, path).await, (status, answer), "{path}");
        }
        // A chunked stream of a user with a session starts with no channel.
        let mut chunked = h2_request(&client, "GET", "/sub/7?session=tab-2", None, b"")
            .await
            .unwrap();
        let mut lines = String::new();
        body_until(chunked.body_mut(), &mut lines, "welcome 7").await;
        assert_eq!(post(&client, "/subscribe?session=tab-2&channel=a").await.0, 200);
        assert_eq!(publish(&client, "a", "both").await, 2);
        body_until(chunked.body_mut(), &mut lines, "a both").await;
        // Another connection cannot reach these streams.
        let other = h2_connect(&server, &pki.ca_file, 1 << 20).await;
        assert_eq!(post(&other, "/unsubscribe?session=tab-1&channel=a").await.0, 404);
    });
}

#[test]
fn a_post_subscribe_with_presence_1_also_brings_the_channels_joins() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    runtime().block_on(async {
        let client = h2_connect(&server, &pki.ca_file, 1 << 20).await;
        let mut sse = h2_request(&client, "GET", "/sse/1?session=s", SSE, b"")
            .await
            .unwrap();
        let mut text = String::new();
        body_until(sse.body_mut(), &mut text, "retry:").await;
        let (status, answer) = post(&client, "/subscribe?session=s&channel=room&presence=1").await;
        assert_eq!(
            (status, &answer["subscribed"]),
            (200, &json!("room")),
            "{answer}"
        );
        let (status, answer) = post(&client, "/subscribe?session=s&channel=quiet").await;
        assert_eq!(status, 200, "{answer}");
        // User 42 joins both (quiet first): only room's join is pushed.
        let mut member = h2_request(
            &client,
            "GET",
            "/sse/42?channel=quiet&channel=room",
            SSE,
            b"",
        )
        .await
        .unwrap();
        body_until(member.body_mut(), &mut String::new(), "retry:").await;
        body_until(
            sse.body_mut(),
            &mut text,
            "event: presence\ndata: {\"channel\":\"room\",\"joined\":42}\n",
        )
        .await;
        assert!(!text.contains("\"channel\":\"quiet\""), "{text}");
        // An unsubscribe takes the pushes with the channel.
        let (status, _) = post(&client, "/unsubscribe?session=s&channel=room").await;
        assert_eq!(status, 200);
        let path = "/unsubscribe?session=s&channel=room&presence=1";
        let r = h2_request(&client, "POST", path, None, b"").await.unwrap();
        assert_eq!(r.status().as_u16(), 400);
    });
}

#[test]
fn the_streams_token_and_the_channel_limit_decide() {
    const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";
    let pki = Pki::new();
    let server = pki.serve(&["--jwt-secret", SECRET, "--max-channels-per-connection", "2"]);
    let key = EncodingKey::from_secret(SECRET.as_bytes());
    let claims = json!({"sub": "9", "chan": ["room:*"]});
    let token = encode(&Header::new(Algorithm::HS256), &claims, &key).unwrap();
    runtime().block_on(async {
        let client = h2_connect(&server, &pki.ca_file, 1 << 20).await;
        let path = format!("/sse?session=s&channel=room:1&token={token}");
        let mut sse = h2_request(&client, "GET", &path, SSE, b"").await.unwrap();
        let mut text = String::new();
        body_until(sse.body_mut(), &mut text, "id: ").await;
        // The POST carries no token: the stream's own grant applies.
        assert_eq!(
            post(&client, "/subscribe?session=s&channel=news").await,
            (403, json!({"channel": "news", "error": "the token does not allow this channel"}))
        );
        assert_eq!(post(&client, "/subscribe?session=s&channel=room:2").await.0, 200);
        assert_eq!(
            post(&client, "/subscribe?session=s&channel=room:3").await,
            (409, json!({"channel": "room:3", "error": "too many channels on this connection (--max-channels-per-connection)"}))
        );
        // A leave makes room again.
        assert_eq!(post(&client, "/unsubscribe?session=s&channel=room:1").await.0, 200);
        assert_eq!(post(&client, "/subscribe?session=s&channel=room:3").await.0, 200);
    });
}

#[test]
fn over_http11_the_posts_are_refused() {
    let server = Server::start(&[]);
    let (status, text) = server.request("POST", "/subscribe?session=s&channel=a", b"");
    assert_eq!(status, 400, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert!(
        answer["error"].as_str().unwrap().contains("HTTP/2"),
        "{answer}"
    );
    let (status, _) = server.request("POST", "/unsubscribe?session=s&channel=a", b"");
    assert_eq!(status, 400);
}

#[test]
fn a_reconnect_resumes_the_urls_streams_and_drops_the_parts_joined_later() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    runtime().block_on(async {
        let client = h2_connect(&server, &pki.ca_file, 1 << 20).await;
        let url = "/sse?session=s&channel=a";
        let mut sse = get(&client, url, &[("accept", "text/event-stream")]).await;
        let mut text = String::new();
        body_until(sse.body_mut(), &mut text, "id: ").await;
        assert_eq!(post(&client, "/subscribe?session=s&channel=b").await.0, 200);
        publish(&client, "a", "a1").await;
        publish(&client, "b", "b1").await;
        body_until(sse.body_mut(), &mut text, "data: b1\n\n").await;
        let last = text
            .lines()
            .filter_map(|l| l.strip_prefix("id: "))
            .next_back()
            .unwrap()
            .to_string();
        assert_eq!(last.split('_').count(), 2, "a's part, then b's: {last}");
        drop(sse);
        publish(&client, "a", "a2").await;
        // The browser's retry: the same URL, the last id with b's part.
        let mut again = get(
            &client,
            url,
            &[("accept", "text/event-stream"), ("last-event-id", &last)],
        )
        .await;
        assert_eq!(again.status(), 200);
        let mut text = String::new();
        body_until(again.body_mut(), &mut text, "event: a\ndata: a2\n\n").await;
        assert!(!text.contains("a1"), "resumed from a's part: {text}");
        assert_eq!(
            publish(&client, "b", "b2").await,
            0,
            "b was joined later, not resumed"
        );
    });
}

/// Over NATS with two router shards: a stream joins by POST channels that fall on
/// both shards (the join goes to each channel's owner), their publishes reach it, and
/// a leave stops them. The POST waits for the stream's head (before it, a cluster
/// answers 409 "not open yet": the stream's own join is still on its way).
#[test]
fn posts_join_channels_on_every_router_shard_over_nats() {
    use common::cluster::{gateway_with, Nats, Router};
    let pki = Pki::new();
    let nats = Nats::start();
    let _routers = Router::shards(&nats, 2);
    let (cert, key) = (pki.cert.to_str().unwrap(), pki.key.to_str().unwrap());
    let gw = gateway_with(
        &nats,
        &["--router-shards", "2", "--tls-cert", cert, "--tls-key", key],
    );
    // Names that fall on both shards (FNV-1a of the name, mod 2).
    let names = ["alpha", "beta", "gamma", "delta"];
    runtime().block_on(async {
        let client = h2_connect(&gw, &pki.ca_file, 1 << 20).await;
        // The routers may still be starting: open the stream until it is served.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let (mut sse, mut text) = loop {
            let mut r = h2_request(&client, "GET", "/sse?session=s&channel=alpha", SSE, b"")
                .await
                .unwrap();
            if r.status() == 200 {
                let mut text = String::new();
                body_until(r.body_mut(), &mut text, "id: ").await;
                break (r, text);
            }
            assert!(std::time::Instant::now() < deadline, "{}", r.status());
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        };
        for name in &names[1..] {
            let (status, answer) =
                post(&client, &format!("/subscribe?session=s&channel={name}")).await;
            assert_eq!(
                (status, &answer["subscribed"]),
                (200, &json!(name)),
                "{answer}"
            );
        }
        for name in names {
            assert_eq!(
                publish(&client, name, &format!("to {name}")).await,
                1,
                "{name}"
            );
            body_until(
                sse.body_mut(),
                &mut text,
                &format!("event: {name}\ndata: to {name}\n\n"),
            )
            .await;
        }
        for name in ["beta", "gamma"] {
            let (status, answer) =
                post(&client, &format!("/unsubscribe?session=s&channel={name}")).await;
            assert_eq!((status, answer), (200, json!({"unsubscribed": name})));
            assert_eq!(publish(&client, name, "after").await, 0, "{name}");
        }
        assert_eq!(publish(&client, "delta", "last").await, 1);
        body_until(sse.body_mut(), &mut text, "data: last").await;
        assert!(!text.contains("after"), "{text}");
    });
}
