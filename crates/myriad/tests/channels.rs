//! Named channels over real sockets (docs/protocol.md "Channels"): many per
//! connection on SSE, the chunked stream, long-poll and a framed WebSocket, with
//! the user's own deliveries beside them; composite positions that resume every
//! channel from its own place; history read then subscribed from with nothing lost
//! or repeated; the token's `chan` and `pub` claims; the per-connection limit.
//! Across processes and router shards: `channels_cluster.rs`.

mod common;

use common::channels::*;
use common::*;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use std::io::{Read, Write};
use std::net::TcpStream;

const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";

fn hs(claims: serde_json::Value) -> String {
    let key = EncodingKey::from_secret(SECRET.as_bytes());
    encode(&Header::new(Algorithm::HS256), &claims, &key).unwrap()
}

#[test]
fn one_sse_connection_holds_its_user_and_several_channels_with_composite_ids() {
    let server = Server::start(&[]);
    let (mut s, mut buf) = open(&server, "/sse/5?channel=room:1&channel=news", "", "retry:");
    server.wait_stats("joined", |st| st["channel_subscriptions"] == 2);
    assert_eq!(
        publish_to(&server, "room:1", "r1"),
        serde_json::json!({"connections": 1, "users": 1})
    );
    assert_eq!(server.publish(5, "u1")["connections"], 1);
    publish_to(&server, "news", "n1");
    // Another channel's message never arrives here.
    assert_eq!(publish_to(&server, "room:2", "x")["connections"], 0);
    read_until(&mut s, &mut buf, "data: n1");
    let got = events(&buf);
    let kinds: Vec<(&str, &str)> = got.iter().map(|e| (e.1.as_str(), e.2.as_str())).collect();
    assert_eq!(kinds, [("room:1", "r1"), ("", "u1"), ("news", "n1")]);
    // Every id has three parts (user, room:1, news), each `<epoch>-<seq>` once set.
    let parts: Vec<&str> = got[2].0.split('_').collect();
    assert_eq!(parts.len(), 3, "{}", got[2].0);
    assert!(parts.iter().all(|p| p.ends_with("-1")), "{parts:?}");

    // Resuming from the first event's id replays exactly what came after it.
    drop(s);
    let resume = format!("Last-Event-ID: {}\r\n", got[0].0);
    let (mut s, mut buf) = open(
        &server,
        "/sse/5?channel=room:1&channel=news",
        &resume,
        "data: n1",
    );
    publish_to(&server, "room:1", "r2");
    read_until(&mut s, &mut buf, "data: r2");
    let again: Vec<String> = events(&buf).into_iter().map(|e| e.2).collect();
    assert_eq!(again, ["u1", "n1", "r2"], "nothing lost, nothing repeated");
}

#[test]
fn a_page_reads_history_then_subscribes_from_its_position_without_gap_or_repeat() {
    let server = Server::start(&[]);
    for i in 1..=5 {
        publish_to(&server, "feed", &format!("m{i}"));
    }
    let (status, text) = server.request("GET", "/history/feed?limit=3", b"");
    assert_eq!(status, 200, "{text}");
    let page: serde_json::Value = serde_json::from_str(&text).unwrap();
    let seqs: Vec<u64> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [3, 4, 5]);
    assert_eq!(page["gap"], false);
    let pos = page["pos"].as_str().unwrap().to_string();
    // Paging forward from the first: the oldest after it, read on from `pos`.
    let epoch = pos.split('-').next().unwrap();
    let (_, text) = server.request(
        "GET",
        &format!("/history/feed?since={epoch}-1&limit=2"),
        b"",
    );
    let forward: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(forward["pos"], format!("{epoch}-3"));

    let (mut s, mut buf) = open(
        &server,
        &format!("/sub?channel=feed&since={pos}"),
        "",
        "welcome",
    );
    server.wait_stats("joined", |st| st["channel_subscriptions"] == 1);
    publish_to(&server, "feed", "m6");
    read_until(&mut s, &mut buf, "m6");
    let text = String::from_utf8_lossy(&buf);
    assert!(!text.contains("feed m5"), "nothing repeated: {text}");
    assert!(text.contains("feed m6"), "{text}");
}

#[test]
fn a_long_poll_names_channels_and_moves_on_with_its_composite_position() {
    let server = Server::start(&[]);
    publish_to(&server, "a", "old");
    let poll = |path: &str| -> serde_json::Value {
        let (status, text) = server.request("GET", path, b"");
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap()
    };
    // From now: waits, and the next message of either channel answers it.
    let waiting = std::thread::spawn({
        let addr = server.addr;
        move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(
                b"GET /poll?channel=a&channel=b HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            )
            .unwrap();
            let mut out = Vec::new();
            s.read_to_end(&mut out).unwrap();
            parse_response(&out).1
        }
    });
    server.wait_stats("poll joined", |st| st["channel_subscriptions"] == 2);
    publish_to(&server, "b", "b1");
    let first: serde_json::Value = serde_json::from_str(&waiting.join().unwrap()).unwrap();
    assert_eq!(first["messages"][0]["channel"], "b");
    assert_eq!(first["messages"][0]["data"], "b1");
    let since = first["since"].as_str().unwrap().to_string();
    assert_eq!(since.split('_').count(), 2, "{since}");
    // Two more meanwhile: the next poll gets both, each from its channel's place.
    publish_to(&server, "a", "a2");
    publish_to(&server, "b", "b2");
    let next = poll(&format!("/poll?channel=a&channel=b&since={since}"));
    let got: Vec<(String, String)> = next["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["channel"].as_str().unwrap().into(),
                m["data"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(got, [("a".into(), "a2".into()), ("b".into(), "b2".into())]);
    assert_eq!(next["gaps"], serde_json::json!([]));
}

#[test]
fn tokens_name_the_channels_a_client_may_subscribe_and_publish_to() {
    let server = Server::start(&["--jwt-secret", SECRET]);
    let token = hs(serde_json::json!({"sub": "9", "chan": ["room:*"], "pub": ["room:1"]}));
    // A refused channel is said on that channel; the connection stays open.
    let path = format!("/sse?channel=room:1&channel=news&token={token}");
    let (mut s, mut buf) = open(&server, &path, "", "event: refused");
    server.wait_stats("joined", |st| st["channel_subscriptions"] == 1);
    assert!(String::from_utf8_lossy(&buf).contains("\"channel\":\"news\""));
    publish_to(&server, "room:1", "hi");
    read_until(&mut s, &mut buf, "data: hi");
    // Without a token, a channels-only subscription is refused.
    let (_, head) = open(&server, "/sse?channel=room:1", "", "\r\n\r\n");
    assert!(String::from_utf8_lossy(&head).starts_with("HTTP/1.1 401"));

    // A framed WebSocket: subscribe where the claim allows, publish where `pub` does.
    let (mut ws, mut wbuf) = ws_open(&server, &format!("/ws?framed=1&token={token}"));
    let mut said = |frame: &str| {
        ws.write_all(&client_text(frame)).unwrap();
        server_text(&mut ws, &mut wbuf)
    };
    assert!(said(r#"{"subscribe":"room:7"}"#).contains(r#""subscribed":"room:7""#));
    let refused = said(r#"{"subscribe":"news"}"#);
    assert!(refused.contains("does not allow"), "{refused}");
    let published = said(r#"{"publish":"room:1","data":"from ws"}"#);
    assert!(published.contains(r#""published""#), "{published}");
    read_until(&mut s, &mut buf, "data: from ws");
    let refused = said(r#"{"publish":"room:2","data":"no"}"#);
    assert!(
        refused.contains("does not allow publishing to room:2"),
        "{refused}"
    );
    assert!(said(r#"{"unsubscribe":"room:7"}"#).contains(r#""unsubscribed":"room:7""#));
    assert!(said(r#"{"unsubscribe":"room:7"}"#).contains("not subscribed"));
}

#[test]
fn a_connection_holds_at_most_the_configured_number_of_channels() {
    let server = Server::start(&["--max-channels-per-connection", "2"]);
    let (_, head) = open(
        &server,
        "/sse?channel=a&channel=b&channel=c",
        "",
        "\r\n\r\n",
    );
    let head = String::from_utf8_lossy(&head).into_owned();
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    let (status, text) = server.request("GET", "/sse?channel=42", b"");
    assert_eq!(status, 400, "an all-digit name is a subject id: {text}");
    assert_eq!(server.request("POST", "/pub/a%20b", b"x").0, 400);
}

/// A loopback TCP proxy that can cut every connection and refuse new ones for a
/// while: the network going away under a browser.
struct Cutter {
    addr: std::net::SocketAddr,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<std::sync::Mutex<Vec<TcpStream>>>,
}

impl Cutter {
    fn start(to: std::net::SocketAddr) -> Cutter {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (c, o) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                if c.load(Ordering::SeqCst) {
                    continue; // dropped: refused while cut
                }
                let Ok(server) = TcpStream::connect(to) else {
                    return;
                };
                let mut held = o.lock().unwrap();
                held.push(client.try_clone().unwrap());
                held.push(server.try_clone().unwrap());
                for (mut from, mut into) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut into);
                        let _ = into.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Cutter { addr, cut, open }
    }

    /// Cuts every connection now; new ones are refused until `heal`.
    fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    fn heal(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Chromium's EventSource on two channels, cut for two seconds while both channels
/// are published to: it comes back by itself with its last composite id, and holds
/// every message once, in order, per channel.
#[test]
fn chromium_eventsource_resumes_two_channels_after_a_cut_losing_and_repeating_nothing() {
    const INSTALL: &str = "run: apt-get install -y chromium && npm ci --prefix crates/observe/tests/browser (or ./scripts/setup.sh)";
    let server = Server::start(&[]);
    let proxy = Cutter::start(server.addr);
    let base = format!("http://{}", proxy.addr);
    let mut browser = BrowserScript::run(
        INSTALL,
        "channels.mjs",
        &base,
        &["room:1", "news", "4"],
        None,
    );
    assert_eq!(
        browser.next_line(),
        r#"{"ready":true}"#,
        "EventSource did not open"
    );
    server.wait_stats("browser joined", |s| s["channel_subscriptions"] == 2);
    publish_to(&server, "room:1", "r1");
    publish_to(&server, "news", "n1");
    std::thread::sleep(std::time::Duration::from_millis(300));
    proxy.cut();
    server.wait_stats("browser cut off", |s| s["channel_subscriptions"] == 0);
    for (channel, text) in [
        ("room:1", "r2"),
        ("news", "n2"),
        ("room:1", "r3"),
        ("news", "n3"),
    ] {
        assert_eq!(publish_to(&server, channel, text)["connections"], 0);
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    proxy.heal();
    server.wait_stats("browser back", |s| s["channel_subscriptions"] == 2);
    publish_to(&server, "room:1", "r4");
    publish_to(&server, "news", "n4");
    let got = browser.result();
    assert_eq!(
        got["got"]["room:1"],
        serde_json::json!(["r1", "r2", "r3", "r4"]),
        "{got}"
    );
    assert_eq!(
        got["got"]["news"],
        serde_json::json!(["n1", "n2", "n3", "n4"]),
        "{got}"
    );
    assert!(got["opens"].as_u64() >= Some(2), "it reconnected: {got}");
    assert_eq!(got["problems"], serde_json::json!([]), "{got}");
}

/// `POST /pub` lines naming channels: each reaches its channel in the batch's
/// order, the answer sums the reach; a batch mixing subjects and channels is a 400
/// naming the line.
#[test]
fn a_batch_publishes_to_channels_in_order() {
    let server = Server::start(&[]);
    let (mut s, mut buf) = open(&server, "/sse?channel=a&channel=b", "", "retry:");
    server.wait_stats("joined", |st| st["channel_subscriptions"] == 2);
    let body = b"{\"channel\":\"a\",\"data\":\"1\"}\n{\"channel\":\"b\",\"data\":\"2\"}\n{\"channel\":\"a\",\"data\":\"3\"}\n";
    let (status, text) = server.request("POST", "/pub", body);
    assert_eq!(status, 200, "{text}");
    let reply: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        reply,
        serde_json::json!({"messages": 3, "connections": 3, "users": 0})
    );
    read_until(&mut s, &mut buf, "data: 3");
    let got: Vec<(String, String)> = events(&buf).into_iter().map(|e| (e.1, e.2)).collect();
    let want = [("a", "1"), ("b", "2"), ("a", "3")].map(|(c, d)| (c.to_string(), d.to_string()));
    assert_eq!(got, want);
    let mixed = b"{\"channel\":\"a\",\"data\":\"1\"}\n{\"subject\":4,\"data\":\"2\"}\n";
    let (status, text) = server.request("POST", "/pub", mixed);
    assert_eq!(status, 400);
    assert!(text.contains("line 2"), "{text}");
}

/// An SSE subscription opens with an `id:` of where every stream stands (no data, so
/// an EventSource fires no event but keeps it as its last id): a channel quiet until
/// a drop resumes from the join, and gets what was published while the client was
/// away.
#[test]
fn a_quiet_channel_resumes_from_where_the_sse_connection_joined() {
    let server = Server::start(&[]);
    publish_to(&server, "quiet", "before");
    let (s, buf) = open(&server, "/sse?channel=quiet", "", "\n\n");
    let mut buf = buf;
    let mut s = s;
    read_until(&mut s, &mut buf, "id: ");
    read_until(&mut s, &mut buf, "\n\n");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let id = text
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("an id at the start")
        .to_string();
    assert!(id.ends_with("-1"), "the channel's place at the join: {id}");
    assert!(
        !text.contains("data: before"),
        "nothing replayed without a position: {text}"
    );
    drop(s);
    server.wait_stats("left", |st| st["channel_subscriptions"] == 0);
    publish_to(&server, "quiet", "while away");
    let resume = format!("Last-Event-ID: {id}\r\n");
    let (_s, buf) = open(&server, "/sse?channel=quiet", &resume, "data: while away");
    assert!(!String::from_utf8_lossy(&buf).contains("data: before"));
}
