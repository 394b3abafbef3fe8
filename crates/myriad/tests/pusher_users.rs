//! Pusher users and apps (SPEC J1, issue 43): user ids that are not numbers,
//! `pusher:signin` and sending to a user, terminating a user's connections, and
//! separate channel namespaces per app; the real pusher-js and `pusher` server SDK
//! from npm (`tests/pusher/users.mjs`) against a real `myriad serve`, over loopback.

mod common;

use common::pusher::{webhook_events, Node, APP};
use common::*;
use serde_json::json;

const APP2: &str = "app2:key2:secret2";

fn users(scenario: &str, server: &Server) -> Node {
    users_at(scenario, &server.addr.to_string())
}

/// The script against `addr` (a scenario that starts receivers is told the
/// server's address on its stdin later).
fn users_at(scenario: &str, addr: &str) -> Node {
    let args = ["app1", "key1", "secret1", "app2", "key2", "secret2"];
    Node::script("users.mjs", scenario, addr, &args)
}

#[test]
fn presence_ids_that_are_not_numbers_come_back_as_the_app_gave_them() {
    // A grace of 1 s: the leave is announced from the router's tick, after it.
    let server = Server::start(&["--pusher-app", APP, "--presence-grace", "1"]);
    let mut node = users("string-ids", &server);
    let got = node.next();
    let uuid = "0b7e6c1e-93c4-4c1f-8a55-5a6c9d1e2f30";
    assert_eq!(
        got["first"],
        json!({"count": 1, "me": {"id": "user-a", "info": {"name": "a"}}}),
        "{got}"
    );
    assert_eq!(
        got["seen"],
        json!([[uuid, {"name": "b"}], ["user-a", {"name": "a"}]]),
        "{got}"
    );
    assert_eq!(
        got["added"],
        json!([[uuid, {"name": "b"}], ["7", null]]),
        "{got}"
    );
    let mut ids: Vec<String> = got["users"]["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, [uuid, "7", "user-a"], "{got}");
    // pusher-js emits member_removed only for a member it knows by that id.
    assert_eq!(got["removed"], json!([uuid, "7"]), "{got}");
    node.finish();
}

#[test]
fn signed_in_users_get_what_is_sent_to_them_on_every_connection() {
    signin(&Server::start(&["--pusher-app", APP]));
}

fn signin(server: &Server) {
    let mut node = users("signin", server);
    let got = node.next();
    assert_eq!(got["user_data"][0]["id"], "user-x", "{got}");
    assert_eq!(got["user_data"][2]["id"], "user-y", "{got}");
    let got = node.next();
    assert_eq!(got["status"], 200, "{got}");
    assert_eq!(got["received"], json!([{"n": 1}, {"n": 1}]), "{got}");
    assert_eq!(got["toY"], json!([]), "{got}");
    let forged = node.next()["forged"].clone();
    assert_eq!(forged["code"], 4009, "{forged}");
    assert_eq!(
        forged["events"],
        json!(["pusher:connection_established", "pusher:error"]),
        "{forged}"
    );
    node.finish();
}

#[test]
fn terminating_a_user_closes_each_of_its_connections_with_4009() {
    terminate(&Server::start(&["--pusher-app", APP]));
}

fn terminate(server: &Server) {
    let mut node = users("terminate", server);
    let got = node.next();
    assert_eq!(got["status"], 200, "{got}");
    for x in ["x1", "x2"] {
        assert!(
            got[x]["errors"].as_array().unwrap().contains(&json!(4009)),
            "{got}"
        );
    }
    assert_eq!(got["y"]["states"], json!([]), "{got}");
    assert_eq!(got["still"], json!({"ok": 1}), "{got}");
    node.finish();
}

#[test]
fn users_are_reached_across_gateways_through_nats() {
    // `serve --processes 2`: the signed-in connections land on either gateway.
    let server = common::pusher::supervised(&[]);
    signin(&server);
    terminate(&server);
}

#[test]
fn two_apps_do_not_see_each_other_s_channels() {
    let server = Server::start(&["--pusher-app", APP, "--pusher-app", APP2]);
    let mut node = users("apps", &server);
    let got = node.next();
    assert_eq!(got["cross"]["ok"], false, "{got}");
    // myriad's own publish: app 1's channels by their names, app 2's as `app2:<name>`.
    let (status, body) = server.request("POST", "/pub/news", b"one");
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.request("POST", "/pub/app2:news", b"two");
    assert_eq!(status, 200, "{body}");
    let got = node.next();
    assert_eq!(
        got["got1"],
        json!([["for-one", {"n": 1}], ["message", "one"]]),
        "{got}"
    );
    assert_eq!(
        got["got2"],
        json!([["for-two", {"n": 2}], ["message", "two"]]),
        "{got}"
    );
    node.finish();
}

#[test]
fn client_events_reach_the_webhook_as_pusher_s_client_event() {
    let mut node = Node::script(
        "users.mjs",
        "client-webhook",
        "127.0.0.1:9",
        &["app1", "key1", "secret1"],
    );
    let port = node.next()["port"].as_u64().unwrap();
    let url = format!("http://127.0.0.1:{port}/hook");
    let server = Server::start(&[
        "--pusher-app",
        APP,
        "--webhook",
        &url,
        "--webhook-secret",
        "secret1",
        "--webhook-pusher-key",
        "key1",
    ]);
    let (got, events) = webhook_events(&mut node, &server);
    let events: Vec<serde_json::Value> = events
        .into_iter()
        .filter(|e| e["name"] == "client_event")
        .collect();
    assert_eq!(
        events,
        [json!({
            "name": "client_event",
            "channel": "private-chat",
            "event": "client-typing",
            "data": "{\"x\":1}",
            "socket_id": got["socket"],
        })],
        "{got}"
    );
    node.finish();
}

#[test]
fn each_app_s_webhook_carries_its_own_channels_signed_with_its_secret() {
    app_webhooks(|hooks| {
        let mut args = vec!["--pusher-app", APP];
        args.extend(hooks);
        Server::start(&args)
    });
}

#[test]
fn app_webhooks_from_a_router_process_name_members_of_every_gateway() {
    // `serve --processes 2`: the router posts; the clients are on either gateway.
    app_webhooks(common::pusher::supervised);
}

/// Each app: "alice" (app 1) or "bob" (app 2) and "7" join presence-room, the first
/// sends a client event and leaves; each app's receiver checks its webhook. `start`
/// starts the server (with app 1) given the other flags.
fn app_webhooks(start: impl FnOnce(&[&str]) -> Server) {
    let mut node = users_at("app-webhooks", "127.0.0.1:9");
    let ports = node.next()["ports"].clone();
    let hook = |i: usize| format!("app{}=http://127.0.0.1:{}/hook", i + 1, ports[i]);
    let (one, two) = (hook(0), hook(1));
    let server = start(&[
        "--pusher-app",
        APP2,
        "--pusher-webhook",
        &one,
        "--pusher-webhook",
        &two,
        "--presence-grace",
        "0",
    ]);
    use std::io::Write;
    writeln!(node.stdin, "{}", server.addr).unwrap();
    let got = node.next();
    // pusher-js hands a presence client event's sender to the callback.
    assert_eq!(
        got["metadata"],
        json!([[{"from": "alice"}, {"user_id": "alice"}], [{"from": "bob"}, {"user_id": "bob"}]]),
        "{got}"
    );
    for (i, (key, member, stranger)) in [("key1", "alice", "bob"), ("key2", "bob", "alice")]
        .into_iter()
        .enumerate()
    {
        let posts = got["posts"][i].as_array().unwrap();
        assert!(!posts.is_empty(), "{got}");
        for p in posts {
            assert_eq!(p["valid"], true, "app {i}: {p}");
            assert_eq!(p["forged"], false, "app {i}: {p}");
            assert_eq!(p["key"], key, "app {i}: {p}");
        }
        let events: Vec<serde_json::Value> = posts
            .iter()
            .flat_map(|p| p["events"].as_array().unwrap().clone())
            .collect();
        // Each app's channels by the names its clients use (app 2's without `app2:`).
        assert!(
            events.iter().all(|e| e["channel"] == "presence-room"),
            "{events:?}"
        );
        let added: Vec<&str> = events
            .iter()
            .filter(|e| e["name"] == "member_added")
            .map(|e| e["user_id"].as_str().unwrap())
            .collect();
        assert!(
            added.contains(&member) && added.contains(&"7"),
            "{events:?}"
        );
        assert!(!added.contains(&stranger), "{events:?}");
        let removed: Vec<&str> = events
            .iter()
            .filter(|e| e["name"] == "member_removed")
            .map(|e| e["user_id"].as_str().unwrap())
            .collect();
        assert_eq!(removed, [member], "{events:?}");
        let client: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| e["name"] == "client_event")
            .collect();
        assert_eq!(client.len(), 1, "{events:?}");
        assert_eq!(client[0]["event"], "client-typing", "{events:?}");
        assert_eq!(
            client[0]["data"],
            json!({"from": member}).to_string(),
            "{events:?}"
        );
        assert_eq!(client[0]["user_id"], member, "{events:?}");
        assert!(
            client[0]["socket_id"].as_str().unwrap().contains('.'),
            "{events:?}"
        );
    }
    node.finish();
}

/// The `channels` scenario's answers, on `server`.
fn channel_list(server: &Server) {
    let mut node = users("channels", server);
    let got = node.next();
    assert_eq!(
        got["presence"],
        json!({"channels": {"presence-a": {"user_count": 2}, "presence-b": {"user_count": 1}}}),
        "{got}"
    );
    assert_eq!(
        got["all"],
        json!({"channels": {"news": {}, "presence-a": {}, "presence-b": {}, "private-x": {}}}),
        "{got}"
    );
    assert_eq!(got["refused"]["status"], 400, "{got}");
    node.finish();
}

#[test]
fn the_sdk_lists_occupied_channels_by_prefix() {
    channel_list(&Server::start(&["--pusher-app", APP]));
}

#[test]
fn the_channel_list_is_gathered_from_every_router_shard() {
    // presence-a, news on shard 0; presence-b, private-x on shard 1 (FNV-1a mod 2).
    let nats = common::cluster::Nats::start();
    let _routers = common::cluster::Router::shards(&nats, 2);
    let gateway =
        common::cluster::gateway_with(&nats, &["--router-shards", "2", "--pusher-app", APP]);
    // Both shards answer (subjects 2 and 3: shards 0 and 1).
    common::cluster::publish_when_up(&gateway, 2, "up");
    common::cluster::publish_when_up(&gateway, 3, "up");
    channel_list(&gateway);
}
