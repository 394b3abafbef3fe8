//! Headless Chromium's own EventSource and WebSocket against myriad (SPEC A2, A4): the
//! browser opens both for one user, every published message arrives on both in order,
//! multi-line payloads come back whole, and the EventSource tracks the last event id.

mod common;

use common::*;

const INSTALL: &str = "run: apt-get install -y chromium && npm ci --prefix crates/observe/tests/browser (or ./scripts/setup.sh)";

#[test]
fn chromium_eventsource_and_websocket_receive_every_message() {
    let server = Server::start(&[]);
    let base = format!("http://{}", server.addr);
    let mut browser = BrowserScript::run(INSTALL, "clients.mjs", &base, &["81", "3"], None);
    let first = browser.next_line();
    assert_eq!(first, r#"{"ready":true}"#, "browser clients did not open");
    server.wait_stats("browser logins", |s| s["connections_logged_in"] == 2);
    for text in ["one", "two\nlines", "three"] {
        assert_eq!(server.publish(81, text)["connections"], 2);
    }
    let got = browser.result();
    assert_eq!(
        got["sse"],
        serde_json::json!(["one", "two\nlines", "three"]),
        "{got}"
    );
    assert_eq!(
        got["ws"],
        serde_json::json!(["one", "two\nlines", "three"]),
        "{got}"
    );
    // `<epoch>-<seq>` (SPEC B6).
    let last = got["lastEventId"].as_str().unwrap_or_default();
    assert!(last.ends_with("-3"), "{got}");
    assert_eq!(got["problems"], serde_json::json!([]), "{got}");
}

#[test]
fn subscriptions_allow_any_origin() {
    let server = Server::start(&[]);
    let mut s = server.connect();
    std::io::Write::write_all(
        &mut s,
        b"GET /sse/1 HTTP/1.1\r\nOrigin: http://elsewhere.example\r\n\r\n",
    )
    .unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "retry:");
    assert!(String::from_utf8_lossy(&buf).contains("Access-Control-Allow-Origin: *"));
}
