//! Pusher's browser clients in headless Chromium (issue 43): pusher-js's web build
//! and Laravel Echo's browser build, unmodified, as an app's page loads them, against
//! `myriad serve --pusher-app`. Echo subscribes to a public, a private and a presence
//! channel (the presence members list names the page's own user); messages published
//! with myriad's `POST /pub/<channel>` arrive as Pusher events on the public and the
//! private channel; a second pusher-js client's client events (`client-typing`)
//! arrive at Echo's `listenForWhisper`.

mod common;

use common::*;

const INSTALL: &str = "run: ./scripts/setup.sh (apt-get install -y chromium, npm ci in \
                       crates/observe/tests/browser and tests/pusher)";

#[test]
fn chromium_runs_pusher_js_and_laravel_echo_on_public_private_and_presence_channels() {
    let server = Server::start(&["--pusher-app", "app1:key1:secret1"]);
    let base = format!("http://{}", server.addr);
    let modules =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/pusher/node_modules");
    assert!(
        modules.join("pusher-js").is_dir(),
        "pusher-js not installed; {INSTALL}"
    );
    let mut browser = BrowserScript::run(
        INSTALL,
        "pusher.mjs",
        &base,
        &[modules.to_str().unwrap(), "key1", "secret1", "3"],
        None,
    );
    let ready: serde_json::Value = serde_json::from_str(&browser.next_line()).unwrap();
    assert_eq!(ready["ready"], true, "the page did not subscribe: {ready}");
    assert_eq!(
        ready["here"],
        serde_json::json!([{"name": "Ada"}]),
        "the presence channel's members: {ready}"
    );
    for i in 1..=3 {
        for channel in ["news", "private-room"] {
            let (status, body) = server.request(
                "POST",
                &format!("/pub/{channel}"),
                format!(r#"{{"n":{i}}}"#).as_bytes(),
            );
            assert_eq!(status, 200, "{channel}: {body}");
        }
    }
    let got = browser.result();
    let want: Vec<serde_json::Value> = (1..=3).map(|i| serde_json::json!({"n": i})).collect();
    assert_eq!(got["news"], serde_json::json!(want), "{got}");
    assert_eq!(got["room"], serde_json::json!(want), "{got}");
    let whispers: Vec<serde_json::Value> = (1..=3).map(|i| serde_json::json!({"i": i})).collect();
    assert_eq!(got["whispers"], serde_json::json!(whispers), "{got}");
    assert_eq!(got["problems"], serde_json::json!([]), "{got}");
}
