//! Real Pusher clients from npm (`tests/pusher`, installed by `scripts/setup.sh`):
//! one run of a script there per scenario, read one JSON line at a time.

use super::Server;
use serde_json::Value;
use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The app the scripts are given by default.
pub const APP: &str = "app1:key1:secret1";

/// `serve --processes 2` with the app: two gateways on one port and a router, linked
/// by a nats-server the supervisor starts (so clients land on either gateway), and
/// `extra` flags.
pub fn supervised(extra: &[&str]) -> Server {
    let nats = format!("nats://127.0.0.1:{}", super::free_port());
    let mut flags = vec!["--pusher-app", APP];
    flags.extend_from_slice(extra);
    super::start_supervisor(&nats, 2, &flags)
}

/// One run of `tests/pusher/client.mjs <scenario>` against `server`.
pub struct Node {
    child: Child,
    /// Held open: a scenario that waits reads it until the test ends.
    pub stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Node {
    pub fn run(scenario: &str, server: &Server) -> Node {
        Node::spawn(scenario, &server.addr.to_string())
    }

    /// The script against `addr` (a scenario may be told more on its stdin).
    pub fn spawn(scenario: &str, addr: &str) -> Node {
        Node::script("client.mjs", scenario, addr, &["app1", "key1", "secret1"])
    }

    /// `tests/pusher/<script> <scenario> <addr> <args…>`.
    pub fn script(script: &str, scenario: &str, addr: &str, args: &[&str]) -> Node {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/pusher");
        assert!(
            dir.join("node_modules/pusher-js").is_dir(),
            "pusher-js not installed: run scripts/setup.sh (npm ci in tests/pusher)"
        );
        let mut child = Command::new("node")
            .arg(dir.join(script))
            .arg(scenario)
            .arg(addr)
            .args(args)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("node must be installed");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Node {
            child,
            stdin,
            lines,
        }
    }

    /// The script's next JSON line (the script bounds its own time).
    pub fn next(&mut self) -> Value {
        let line = self
            .lines
            .next()
            .expect("the script printed nothing more")
            .unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert!(v.get("error").is_none(), "script failed: {line}");
        v
    }

    pub fn finish(mut self) {
        assert!(self.child.wait().unwrap().success(), "the script failed");
    }
}

/// Hands a webhook scenario `server`'s address and reads its answer: every post it
/// received must check with the app's secret (`valid`) and not with another
/// (`forged`). Returns the answer and every event of the posts, in order.
pub fn webhook_events(node: &mut Node, server: &Server) -> (Value, Vec<Value>) {
    use std::io::Write;
    writeln!(node.stdin, "{}", server.addr).unwrap();
    let got = node.next();
    let posts = got["posts"].as_array().unwrap();
    assert!(posts.iter().all(|p| p["valid"] == true), "{got}");
    assert!(posts.iter().all(|p| p["forged"] == false), "{got}");
    let events = posts
        .iter()
        .flat_map(|p| p["events"].as_array().unwrap().clone())
        .collect();
    (got, events)
}
