//! The live dashboard in a real headless Chromium (Debian's `chromium`, driven by npm
//! `playwright-core` from `tests/browser/dashboard.mjs`): the page loads, every chart
//! receives samples and draws them, no console errors. Leaves a screenshot at
//! `target/tmp/dashboard.png` for a person to look at.

mod common;

use std::path::Path;
use std::process::Command;

const INSTALL: &str =
    "run: apt-get install -y chromium && npm ci --prefix crates/observe/tests/browser";

#[test]
fn dashboard_in_headless_chromium() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "{chromium} not found; {INSTALL}"
    );
    assert!(
        dir.join("node_modules/playwright-core").is_dir(),
        "playwright-core not installed; {INSTALL}"
    );
    let node_ok = Command::new("node")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        node_ok,
        "node not found; install Node.js (apt-get install -y nodejs npm), then {INSTALL}"
    );

    // The feeder moves real LoopMetrics until stopped (120 s at most).
    let mut fed = common::fed_monitor(120);
    let addr = fed.monitor.admin_addr().expect("admin bound");
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    let out = Command::new("node")
        .arg(dir.join("dashboard.mjs"))
        .arg(format!("http://{addr}/"))
        .arg(&shot)
        .arg("5")
        .env("CHROMIUM", &chromium)
        .output()
        .expect("run node");
    fed.stop();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "browser test failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let summary: serde_json::Value =
        serde_json::from_str(stdout.trim()).expect("JSON summary from dashboard.mjs");
    assert!(summary["samples"].as_u64().unwrap() >= 5, "{summary}");
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000,
        "screenshot is not a real PNG"
    );
    eprintln!("dashboard screenshot: {}", shot.display());
}
