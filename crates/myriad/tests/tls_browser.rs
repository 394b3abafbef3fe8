//! Headless Chromium's own EventSource and WebSocket over `https://` and `wss://`
//! (issue 13): the browser trusts a throwaway test CA through its NSS store (a
//! temporary HOME with `.pki/nssdb`, filled by `certutil`), not through a flag that
//! skips verification; every published message arrives on both, in order.

mod common;
mod tls_common;

use common::BrowserScript;
use tls_common::*;

#[test]
fn chromium_eventsource_and_websocket_over_https_and_wss() {
    let pki = Pki::new();
    let home = nss_home(&pki.ca_file);
    let server = pki.serve(&[]);
    let client = pki.client();
    let base = format!("https://127.0.0.1:{}", server.addr.port());
    let mut browser = BrowserScript::run(
        BROWSER_INSTALL,
        "clients.mjs",
        &base,
        &["81", "3"],
        Some(home.path()),
    );
    let first = browser.next_line();
    assert_eq!(first, r#"{"ready":true}"#, "browser clients did not open");
    wait_stats(&server, &client, "browser logins", |s| {
        s["connections_logged_in"] == 2
    });
    for text in ["one", "two\nlines", "three"] {
        assert_eq!(publish(&server, &client, 81, text), 2);
    }
    let got = browser.result();
    let want = serde_json::json!(["one", "two\nlines", "three"]);
    assert_eq!(got["sse"], want, "{got}");
    assert_eq!(got["ws"], want, "{got}");
    // SSE ids are `<epoch>-<seq>` (resume across restarts, SPEC B6).
    let last = got["lastEventId"].as_str().unwrap_or_default();
    assert!(last.ends_with("-3"), "{got}");
    assert_eq!(got["problems"], serde_json::json!([]), "{got}");
}
