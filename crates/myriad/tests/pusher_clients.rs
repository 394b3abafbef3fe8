//! Pusher Channels clients (SPEC J1): the real, unmodified `pusher-js`, Laravel
//! Echo and `pusher` server SDK from npm (`tests/pusher`, installed by `scripts/setup.sh`) against a
//! real `myriad serve --pusher-app`, over loopback sockets. One test per behaviour.

mod common;

use common::pusher::{webhook_events, Node, APP};
use common::*;
use serde_json::Value;

fn pusher_server(extra: &[&str]) -> Server {
    let mut args = vec!["--pusher-app", APP];
    args.extend(extra);
    Server::start(&args)
}

#[test]
fn pusher_js_connects_and_is_answered_ping_and_refused_keys_and_protocols() {
    let server = pusher_server(&[]);
    let mut node = Node::run("connect", &server);
    let id = node.next()["socket_id"].as_str().unwrap().to_string();
    let (a, b) = id.split_once('.').expect("socket id N.N");
    assert!(a.parse::<u64>().is_ok() && b.parse::<u64>().is_ok(), "{id}");

    let raw = node.next()["raw"].clone();
    let events: Vec<&str> = raw["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        ["pusher:connection_established", "pusher:pong"],
        "{raw}"
    );
    // `data` is a JSON string, as Pusher sends it.
    let data: Value = serde_json::from_str(raw["events"][0]["data"].as_str().unwrap()).unwrap();
    assert!(data["activity_timeout"].as_u64().unwrap() >= 1, "{data}");

    let unknown = node.next()["unknown_key"].clone();
    assert_eq!(unknown["code"], 4001, "{unknown}");
    assert_eq!(unknown["events"][0]["event"], "pusher:error", "{unknown}");
    assert_eq!(unknown["events"][0]["data"]["code"], 4001, "{unknown}");
    let old = node.next()["old_protocol"].clone();
    assert_eq!(old["code"], 4007, "{old}");
    node.finish();
}

#[test]
fn pusher_js_receives_a_myriad_publish_on_a_public_channel() {
    let server = pusher_server(&[]);
    let mut node = Node::run("public", &server);
    assert_eq!(node.next()["subscribed"]["ok"], true);
    let (status, body) = server.request("POST", "/pub/news", br#"{"headline":"hi"}"#);
    assert_eq!(status, 200, "{body}");
    let got = node.next();
    // pusher-js parsed the data string back into the object published.
    assert_eq!(
        got["received"],
        serde_json::json!({"headline": "hi"}),
        "{got}"
    );
    node.finish();
}

#[test]
fn private_channels_need_the_apps_signature() {
    let server = pusher_server(&[]);
    let mut node = Node::run("private", &server);
    assert_eq!(node.next()["good"]["ok"], true);
    let bad = node.next()["bad"].clone();
    assert_eq!(bad["ok"], false, "{bad}");
    assert_eq!(bad["error"]["status"], 401, "{bad}");
    let unsigned = node.next()["unsigned"].clone();
    assert_eq!(unsigned["ok"], false, "{unsigned}");
    node.finish();
}

#[test]
fn client_events_reach_others_on_the_channel_and_never_the_sender() {
    client_events(&pusher_server(&[]));
}

/// Two pusher-js clients' events on a private channel, and a myriad SSE
/// subscriber of it, on `server`.
fn client_events(server: &Server) {
    // myriad's own SSE subscriber of the same channel sees them too.
    let url = format!("http://{}/sse?channel=private-room", server.addr);
    let sse = Curl::start(&[&url]);
    sse.until("retry:");
    let mut node = Node::run("client-events", server);
    let got = node.next();
    assert_eq!(
        got["received"],
        serde_json::json!([{"n": 1}, {"n": 2}]),
        "{got}"
    );
    assert_eq!(got["echoed"], serde_json::json!([]), "{got}");
    node.finish();
    let lines = sse.until("client-hello");
    let data = lines.last().unwrap().strip_prefix("data: ").unwrap();
    let envelope: Value = serde_json::from_str(data).unwrap();
    assert_eq!(envelope["event"], "client-hello", "{lines:?}");
    assert_eq!(envelope["data"], r#"{"n":1}"#, "{lines:?}");
}

#[test]
fn the_pusher_sdk_publishes_to_pusher_js_and_myriad_subscribers_and_bad_signatures_are_refused() {
    let server = pusher_server(&[]);
    let url = format!("http://{}/sse?channel=news", server.addr);
    let sse = Curl::start(&[&url]);
    sse.until("retry:");
    let mut node = Node::run("api", &server);
    let got = node.next();
    assert_eq!(got["trigger"], 200, "{got}");
    assert_eq!(got["received"], serde_json::json!({"x": 1}), "{got}");
    let got = node.next();
    assert_eq!(got["batch"], 2, "{got}");
    assert_eq!(got["skipped"], serde_json::json!([]), "{got}");
    let got = node.next();
    assert_eq!(got["wrong"], 401, "{got}");
    assert_eq!(got["old"], 401, "{got}");
    node.finish();
    // myriad's own SSE subscriber got the SDK's event, as its envelope.
    let lines = sse.until("greet");
    let data = lines.last().unwrap().strip_prefix("data: ").unwrap();
    let envelope: Value = serde_json::from_str(data).unwrap();
    assert_eq!(envelope["event"], "greet", "{lines:?}");
    assert_eq!(envelope["data"], r#"{"x":1}"#, "{lines:?}");
}

#[test]
fn presence_members_one_added_and_removed_per_user_and_the_sdk_s_channel_queries() {
    presence(&pusher_server(&["--presence-grace", "0"]));
}

/// The presence scenario on `server` (started with `--presence-grace 0`).
fn presence(server: &Server) {
    let mut node = Node::run("presence", server);
    let first = node.next()["first"].clone();
    assert_eq!(first["count"], 1, "{first}");
    assert_eq!(
        first["me"],
        serde_json::json!({"id": "1", "info": {"name": "a"}}),
        "{first}"
    );
    let api = node.next();
    assert_eq!(
        api["channel"],
        serde_json::json!({"occupied": true, "user_count": 2, "subscription_count": 3}),
        "{api}"
    );
    assert_eq!(
        api["users"],
        serde_json::json!({"users": [{"id": "1"}, {"id": "2"}]}),
        "{api}"
    );
    assert_eq!(api["notPresence"]["status"], 400, "{api}");
    let got = node.next();
    assert_eq!(got["seen"]["count"], 2, "{got}");
    assert_eq!(
        got["seen"]["members"],
        serde_json::json!([["1", {"name": "a"}], ["2", {"name": "b"}]]),
        "{got}"
    );
    // One arrival for user 2 however many connections; no leave while one stays.
    assert_eq!(
        got["added"],
        serde_json::json!([["2", {"name": "b"}]]),
        "{got}"
    );
    assert_eq!(got["removedWhileB2"], serde_json::json!([]), "{got}");
    assert_eq!(got["removed"], serde_json::json!(["2"]), "{got}");
    node.finish();
}

#[test]
fn laravel_echo_listens_whispers_and_joins() {
    let server = pusher_server(&["--presence-grace", "0"]);
    let mut node = Node::run("echo", &server);
    let got = node.next();
    assert_eq!(got["shipped"], serde_json::json!({"id": 7}), "{got}");
    let got = node.next();
    assert_eq!(got["whisper"], serde_json::json!({"who": "Bob"}), "{got}");
    let got = node.next();
    let ada = serde_json::json!({"name": "Ada"});
    let bob = serde_json::json!({"name": "Bob"});
    assert_eq!(got["here"], serde_json::json!([ada]), "{got}");
    assert_eq!(got["bHere"], serde_json::json!([ada, bob]), "{got}");
    assert_eq!(got["joined"], bob, "{got}");
    assert_eq!(got["left"], bob, "{got}");
    node.finish();
}

#[test]
fn presence_webhooks_in_pusher_s_format_pass_the_sdk_s_check() {
    let mut node = Node::spawn("webhook", "127.0.0.1:9");
    let port = node.next()["port"].as_u64().unwrap();
    let url = format!("http://127.0.0.1:{port}/hook");
    let server = pusher_server(&[
        "--presence-grace",
        "0",
        "--webhook",
        &url,
        "--webhook-secret",
        "secret1",
        "--webhook-pusher-key",
        "key1",
    ]);
    let (got, events) = webhook_events(&mut node, &server);
    let hook = |name: &str| serde_json::json!({"name": name, "channel": "presence-hook"});
    let member =
        |name: &str| serde_json::json!({"name": name, "channel": "presence-hook", "user_id": "5"});
    assert_eq!(
        events,
        [
            hook("channel_occupied"),
            member("member_added"),
            member("member_removed"),
            hook("channel_vacated")
        ],
        "{got}"
    );
    node.finish();
}

#[test]
fn encrypted_channels_pass_through_and_pusher_js_decrypts() {
    let server = pusher_server(&[]);
    let url = format!("http://{}/sse?channel=private-encrypted-vault", server.addr);
    let sse = Curl::start(&[&url]);
    sse.until("retry:");
    let mut node = Node::run("encrypted", &server);
    assert_eq!(node.next()["subscribed"]["ok"], true);
    let got = node.next();
    assert_eq!(got["received"], serde_json::json!({"code": 42}), "{got}");
    node.finish();
    // What crossed the server: the envelope of a ciphertext, not the data.
    let lines = sse.until("secret");
    let data = lines.last().unwrap().strip_prefix("data: ").unwrap();
    let envelope: Value = serde_json::from_str(data).unwrap();
    let inner: Value = serde_json::from_str(envelope["data"].as_str().unwrap()).unwrap();
    assert!(
        inner["ciphertext"].is_string() && inner["nonce"].is_string(),
        "{data}"
    );
    assert!(!data.contains("42"), "{data}");
}

#[test]
fn supervised_gateways_carry_pusher_clients_through_nats() {
    // The clients land on either gateway of `serve --processes 2`.
    let server = common::pusher::supervised(&["--presence-grace", "0"]);
    client_events(&server);
    presence(&server);
}

#[test]
fn a_drain_makes_pusher_js_reconnect_at_once() {
    let mut server = pusher_server(&["--drain", "1"]);
    let mut node = Node::run("drain", &server);
    assert_eq!(node.next()["connected"], true);
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(server.pid() as i32, libc::SIGTERM) }, 0);
    let got = node.next();
    assert_eq!(got["states"], serde_json::json!(["connecting"]), "{got}");
    // Only a close code with an action (4200: "retry") raises a WebSocketError.
    assert_eq!(got["actions"], serde_json::json!([4200]), "{got}");
    node.finish();
    assert!(server.child.wait().unwrap().success());
}
