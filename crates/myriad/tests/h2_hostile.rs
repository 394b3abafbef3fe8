//! Hostile HTTP/2 clients against one server (issue 39): `tests/h2_hostile.py` drives
//! the Python `h2`, `hpack` and `hyperframe` libraries frame by frame — the 10-byte
//! frame that once aborted the process, Huffman and HPACK bombs, CONTINUATION floods,
//! rapid reset, SETTINGS/PING/empty-frame floods, oversized and malformed frames,
//! bodies sent without the API key, a connection that opens no stream. Each ends in
//! its documented GOAWAY, RST_STREAM or answer, and after each an honest HTTP/2
//! subscriber on its own connection still receives a publish.

mod common;
mod h2_common;
mod tls_common;

use common::{parse_response, Server};
use h2_common::*;
use std::io::{Read, Write};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tls_common::{connect, Pki};

const KEY: &str = "h2-hostile-test-key-0123456789abcdef";

const NO_ERROR: u64 = 0x0;
const FRAME_SIZE_ERROR: u64 = 0x6;
const COMPRESSION_ERROR: u64 = 0x9;
const ENHANCE_YOUR_CALM: u64 = 0xb;

/// What a case must end with.
enum Expect {
    /// GOAWAY with this code.
    GoAway(u64),
    /// These `:status` answers on these streams, and no GOAWAY.
    Status(&'static [(u32, u64)]),
    /// These answers, then GOAWAY with this code.
    GoAwayAfter(u64, &'static [(u32, u64)]),
}

const CASES: &[(&str, Expect)] = &[
    ("truncated_size_update", Expect::GoAway(COMPRESSION_ERROR)),
    (
        "huffman_bomb",
        Expect::Status(&[(1, 431), (3, 431), (5, 431), (7, 431), (9, 431)]),
    ),
    (
        "plain_block",
        Expect::Status(&[(1, 431), (3, 431), (5, 431), (7, 431), (9, 431)]),
    ),
    ("hpack_bomb", Expect::Status(&[(1, 431)])),
    ("continuation_flood", Expect::GoAway(ENHANCE_YOUR_CALM)),
    (
        "empty_continuation_flood",
        Expect::GoAway(ENHANCE_YOUR_CALM),
    ),
    ("rapid_reset", Expect::GoAway(ENHANCE_YOUR_CALM)),
    ("settings_flood", Expect::GoAway(ENHANCE_YOUR_CALM)),
    ("ping_flood", Expect::GoAway(ENHANCE_YOUR_CALM)),
    ("empty_data_flood", Expect::GoAway(ENHANCE_YOUR_CALM)),
    ("oversized_frame", Expect::GoAway(FRAME_SIZE_ERROR)),
    ("malformed_ping", Expect::GoAway(FRAME_SIZE_ERROR)),
    ("unauthenticated_body", Expect::Status(&[(1, 401)])),
    (
        "many_unauthenticated_bodies",
        Expect::GoAwayAfter(ENHANCE_YOUR_CALM, &[(1, 401), (3, 401), (5, 401)]),
    ),
    ("idle_after_a_stream", Expect::GoAway(NO_ERROR)),
    ("idle_without_streams", Expect::GoAway(NO_ERROR)),
];

fn script() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/h2_hostile.py")
}

/// Runs one case of the script; its JSON result.
fn hostile(server: &Server, pki: &Pki, case: &str) -> serde_json::Value {
    let out = Command::new("python3")
        .arg(script())
        .args(["--addr", &server.addr.to_string(), "--ca"])
        .arg(&pki.ca_file)
        .args(["--api-key", KEY, case])
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named"),
        "the Python h2 package is missing: pip install -r tests/requirements.txt (or ./scripts/setup.sh)\n{stderr}"
    );
    assert!(out.status.success(), "{case}: {stderr}");
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{case}: {e}: {stdout}"))
}

fn check(case: &str, expect: &Expect, got: &serde_json::Value) {
    let status = |stream: u32| got["status"][stream.to_string()].as_u64();
    match expect {
        Expect::GoAway(code) => {
            assert_eq!(got["goaway"].as_u64(), Some(*code), "{case}: {got}")
        }
        Expect::Status(wanted) => {
            assert!(got["goaway"].is_null(), "{case}: {got}");
            for &(stream, code) in *wanted {
                assert_eq!(status(stream), Some(code), "{case} stream {stream}: {got}");
            }
        }
        Expect::GoAwayAfter(code, wanted) => {
            assert_eq!(got["goaway"].as_u64(), Some(*code), "{case}: {got}");
            for &(stream, status_code) in *wanted {
                assert_eq!(
                    status(stream),
                    Some(status_code),
                    "{case} stream {stream}: {got}"
                );
            }
        }
    }
}

/// An API call with the key over a fresh TLS connection: the body of its 200.
fn call(server: &Server, pki: &Pki, method: &str, path: &str, body: &str) -> String {
    let mut s = connect(server, &pki.client()).expect("tls connect");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {KEY}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("clean TLS end");
    let (status, answer) = parse_response(&out);
    assert_eq!(status, 200, "{method} {path}: {answer}");
    answer
}

fn publish(server: &Server, pki: &Pki, text: &str) {
    call(server, pki, "POST", "/pub/7", text);
}

#[test]
fn hostile_h2_clients_are_answered_and_an_honest_subscriber_is_served_throughout() {
    let pki = Pki::new();
    let server = pki.serve(&["--api-key", KEY, "--keepalive-timeout", "1"]);
    // The honest subscriber: an SSE stream over HTTP/2 (the `h2` crate), read on its
    // own thread so its connection answers the server's PINGs all along.
    let (lines, seen) = mpsc::channel::<String>();
    let (addr_server, ca) = (server.addr, pki.ca_file.clone());
    std::thread::spawn(move || {
        let rt = runtime();
        rt.block_on(async move {
            let client = h2_connect_to(addr_server, &ca, 1 << 20).await;
            let mut r = h2_request(&client, "GET", "/sse/7", Some("text/event-stream"), b"")
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let body = r.body_mut();
            while let Some(Ok(chunk)) = body.data().await {
                let _ = body.flow_control().release_capacity(chunk.len());
                if lines
                    .send(String::from_utf8_lossy(&chunk).into_owned())
                    .is_err()
                {
                    return;
                }
            }
        });
    });
    let mut text = String::new();
    let mut wait_for = |needle: &str| {
        let deadline = Instant::now() + TIMEOUT;
        while !text.contains(needle) {
            let left = deadline.saturating_duration_since(Instant::now());
            match seen.recv_timeout(left.max(Duration::from_millis(1))) {
                Ok(chunk) => text.push_str(&chunk),
                Err(_) => panic!("the honest subscriber got no {needle:?}; it has {text:?}"),
            }
        }
    };
    wait_for("retry:");
    for (case, expect) in CASES {
        let got = hostile(&server, &pki, case);
        check(case, expect, &got);
        let marker = format!("after-{case}");
        publish(&server, &pki, &marker);
        wait_for(&marker);
    }
    // Nothing was left behind: every hostile stream logged out, only the honest
    // subscriber is in.
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let stats: serde_json::Value =
            serde_json::from_str(&call(&server, &pki, "GET", "/stats", "")).unwrap();
        if stats["connections_logged_in"] == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "{stats}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
