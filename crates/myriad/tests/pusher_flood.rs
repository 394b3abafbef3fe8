//! The Pusher load mode against a real `myriad serve --pusher-app`, so that the bench
//! client cannot silently break: `myriad flood --transport pusher` (subscribe once
//! established, open once subscribed) and `myriad msggen --pusher` (events through a
//! signed `POST /apps/<id>/events`), with exact counts.

mod common;

use common::flood::Flood;
use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const APP: &str = "app1:key1:secret1";
const CLIENTS: u64 = 200;

/// The CSV's `open` column of its last row (connections subscribed now).
fn open_now(flood: &Flood) -> u64 {
    let text = std::fs::read_to_string(&flood.csv).unwrap_or_default();
    text.lines()
        .last()
        .and_then(|l| l.split(',').nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn wait(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn pusher_flood_subscribes_every_client_and_counts_every_signed_event() {
    let server = Server::start(&["--pusher-app", APP]);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("flood.csv");
    let url = format!("ws://{}/app/key1?protocol=7", server.addr);
    let child = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(["flood", "--transport", "pusher", "--pusher-channel", "news"])
        .args(["--url", &url, "-n", &CLIENTS.to_string(), "--rate", "0"])
        .args(["--max-time", "60", "--json", "--quiet", "--procs", "1"])
        .arg("--csv")
        .arg(&csv)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut flood = Flood { child, csv };
    wait("every client subscribed", || open_now(&flood) == CLIENTS);

    let out = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(["msggen", "--url", &format!("http://{}", server.addr)])
        .args([
            "--pusher", APP, "--path", "news", "--max", "1", "--rate", "20",
        ])
        .args(["--duration", "1", "--publishers", "2", "--size", "60"])
        .args(["--json", "--quiet"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let sent: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = sent["sent"].as_u64().unwrap();
    assert!(n >= 10, "{sent}");
    assert_eq!(sent["errors"], 0, "{sent}");
    wait("every event to every client", || {
        flood.messages() >= n * CLIENTS
    });
    // Nothing more arrives: no protocol frame (ping, subscription) passes for an event.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(flood.messages(), n * CLIENTS);

    let summary = flood.finish();
    assert_eq!(summary["opened"], CLIENTS, "{summary}");
    assert_eq!(summary["failed"], 0, "{summary}");
    assert_eq!(summary["messages"], n * CLIENTS, "{summary}");
    assert!(summary["lat_p99_us"].as_u64().unwrap_or(0) > 0, "{summary}");
}

#[test]
fn pusher_flood_counts_a_refused_subscription_as_failed() {
    // A private channel without `auth` is refused: no client counts as open.
    let server = Server::start(&["--pusher-app", APP]);
    let url = format!("ws://{}/app/key1?protocol=7", server.addr);
    let out = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args([
            "flood",
            "--transport",
            "pusher",
            "--pusher-channel",
            "private-x",
        ])
        .args(["--url", &url, "-n", "5", "--rate", "0", "--hold", "1"])
        .args(["--max-time", "20", "--json", "--quiet", "--procs", "1"])
        .output()
        .unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["opened"], 0, "{summary}");
    assert_eq!(summary["failed"], 5, "{summary}");
}
