//! A server without `--api-key` whose listener reaches beyond loopback says so at
//! start: its API trusts loopback-looking peers, which is every client behind a
//! reverse proxy on the same host.

mod common;

use common::spawn_logging;
use std::io::{BufRead, BufReader};
use std::process::Command;
use std::time::{Duration, Instant};

/// The log lines of `myriad serve ARGS` up to and including its start line.
fn start_lines(args: &[&str]) -> Vec<String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_myriad"));
    cmd.args(["serve", "--store", "memory", "--loops", "1"])
        .args(args);
    let mut child = spawn_logging(&mut cmd);
    let stderr = child.stderr.take().expect("piped stderr");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        assert!(Instant::now() < deadline, "no start line in 30 s: {seen:?}");
        let last = line.contains("listen=");
        seen.push(line);
        if last {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        seen.last().is_some_and(|l| l.contains("listen=")),
        "myriad exited before its start line: {seen:?}"
    );
    seen
}

fn warning(lines: &[String]) -> Option<&String> {
    lines
        .iter()
        .find(|l| l.contains("WARN") && l.contains("no --api-key"))
}

#[test]
fn a_keyless_server_on_every_address_warns_that_a_local_proxy_opens_its_api() {
    let lines = start_lines(&["--listen", "0.0.0.0:0"]);
    let line = warning(&lines).unwrap_or_else(|| panic!("no warning in {lines:#?}"));
    assert!(
        line.contains("reverse proxy") && line.contains("publish"),
        "{line}"
    );
}

#[test]
fn loopback_or_a_key_means_no_warning() {
    let lines = start_lines(&["--listen", "127.0.0.1:0"]);
    assert_eq!(warning(&lines), None, "{lines:#?}");
    let lines = start_lines(&["--listen", "0.0.0.0:0", "--api-key", "k-0123456789abcdef"]);
    assert_eq!(warning(&lines), None, "{lines:#?}");
}
