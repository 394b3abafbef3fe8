//! The channels example page (`/example/` on the admin listener, what `myriad demo`
//! points to) in headless Chromium: it loads the JavaScript client from the admin
//! listener, subscribes to its two channels on the server over WebSocket, and shows
//! a message published to one of them.

mod common;

use common::*;

const INSTALL: &str = "run: apt-get install -y chromium && npm ci --prefix crates/observe/tests/browser (or ./scripts/setup.sh)";

#[test]
fn the_example_page_shows_what_its_channels_get() {
    let server = Server::start(&["--admin", "127.0.0.1:0"]);
    let admin = server.admin.expect("the admin listener's address");
    let base = format!("http://{}", server.addr);
    let page = format!("http://{admin}/example/?server={base}");
    let mut browser = BrowserScript::run(
        INSTALL,
        "example.mjs",
        &base,
        &[&page, "hello from the test"],
        None,
    );
    assert_eq!(
        browser.next_line(),
        r#"{"ready":true}"#,
        "the page did not subscribe"
    );
    let (status, text) = server.request("POST", "/pub/demo:chat", b"hello from the test");
    assert_eq!(status, 200, "{text}");
    let got = browser.result();
    let shown = got["shown"].to_string();
    assert!(shown.contains("demo:chat"), "{got}");
    assert_eq!(got["transport"], "websocket", "{got}");
    assert_eq!(got["problems"], serde_json::json!([]), "{got}");
}
