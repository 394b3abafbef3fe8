//! Headless Chromium's own EventSource and WebSocket over `https://` and `wss://`
//! (issue 13): the browser trusts a throwaway test CA through its NSS store (a
//! temporary HOME with `.pki/nssdb`, filled by `certutil`), not through a flag that
//! skips verification; every published message arrives on both, in order.

mod common;
mod tls_common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use tls_common::*;

#[test]
fn chromium_eventsource_and_websocket_over_https_and_wss() {
    let (chromium, playwright) = common::browser(BROWSER_INSTALL);
    let pki = Pki::new();
    let home = nss_home(&pki.ca_file);
    let server = pki.serve(&[]);
    let client = pki.client();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/clients.mjs");
    let mut node = Command::new("node")
        .arg(script)
        .arg(format!("https://127.0.0.1:{}", server.addr.port()))
        .args(["81", "3"])
        .env("HOME", home.path())
        .env("CHROMIUM", &chromium)
        .env("PLAYWRIGHT_PACKAGE_JSON", &playwright)
        .stdout(Stdio::piped())
        .spawn()
        .expect("node must be installed");
    let mut lines = BufReader::new(node.stdout.take().unwrap()).lines();
    let first = lines.next().expect("node printed nothing").unwrap();
    assert_eq!(first, r#"{"ready":true}"#, "browser clients did not open");
    wait_stats(&server, &client, "browser logins", |s| {
        s["connections_logged_in"] == 2
    });
    for text in ["one", "two\nlines", "three"] {
        assert_eq!(publish(&server, &client, 81, text), 2);
    }
    let last = lines.next().expect("no result line").unwrap();
    assert!(node.wait().unwrap().success(), "{last}");
    let got: serde_json::Value = serde_json::from_str(&last).unwrap();
    let want = serde_json::json!(["one", "two\nlines", "three"]);
    assert_eq!(got["sse"], want, "{got}");
    assert_eq!(got["ws"], want, "{got}");
    // SSE ids are `<epoch>-<seq>` (resume across restarts, SPEC B6).
    let last = got["lastEventId"].as_str().unwrap_or_default();
    assert!(last.ends_with("-3"), "{got}");
    assert_eq!(got["problems"], serde_json::json!([]), "{got}");
}
