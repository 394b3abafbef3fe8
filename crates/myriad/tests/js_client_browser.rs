//! The JavaScript client (`clients/js`, SPEC H5) in headless Chromium: the page imports
//! the library and opens one client per transport (WebSocket, the browser's own
//! EventSource, fetch long-poll), each subscribed to two channels; every message
//! published to them arrives on each client once and in order.

mod common;

use common::*;

const INSTALL: &str = "run: apt-get install -y chromium && npm ci --prefix crates/observe/tests/browser (or ./scripts/setup.sh)";

#[test]
fn chromium_loads_the_js_client_and_receives_two_channels_on_each_transport() {
    let server = Server::start(&["--poll-timeout", "2"]);
    let base = format!("http://{}", server.addr);
    let client_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/js");
    let client_dir = client_dir.to_str().unwrap();
    let mut browser = BrowserScript::run(INSTALL, "js_client.mjs", &base, &[client_dir, "3"], None);
    let first: serde_json::Value = serde_json::from_str(&browser.next_line()).unwrap();
    assert_eq!(
        first["ready"], true,
        "browser clients did not subscribe: {first}"
    );
    assert_eq!(
        first["transports"],
        serde_json::json!(["websocket", "sse", "longpoll"]),
        "{first}"
    );
    for i in 1..=3 {
        for channel in ["room:1", "news"] {
            let (status, body) = server.request(
                "POST",
                &format!("/pub/{channel}"),
                format!("{channel} {i}").as_bytes(),
            );
            assert_eq!(status, 200, "{body}");
        }
    }
    let got = browser.result();
    for transport in ["websocket", "sse", "longpoll"] {
        for channel in ["room:1", "news"] {
            let want: Vec<String> = (1..=3).map(|i| format!("{channel} {i}")).collect();
            assert_eq!(got[transport][channel], serde_json::json!(want), "{got}");
        }
    }
    assert_eq!(got["errors"], serde_json::json!([]), "{got}");
    assert_eq!(got["problems"], serde_json::json!([]), "{got}");
}
