//! `serve --ktls` (issue 13): the kernel's TLS is probed once at start. On a kernel
//! without it (this development machine: `tcp_available_ulp` lists only `mptcp`) a
//! warning says why and the server serves exactly as without the flag; on one with it
//! the start line says `ktls=tx` and the same clients exercise the offloaded path.
//! Either way SSE (HTTP/1.1 and HTTP/2), chunked streaming and WebSocket over TLS
//! deliver. `myriad doctor` reports the same availability.

mod common;
mod tls_common;

use common::{spawn_logging, Curl, Server};
use std::io::{BufRead, BufReader, Write};
use std::process::Command;
use std::time::{Duration, Instant};
use tls_common::*;

/// What this kernel offers, as the server will find it.
fn kernel_has_ktls() -> bool {
    tls::ktls::probe() == tls::ktls::Availability::Available
}

/// `myriad serve ARGS` on TLS with `pki`; the log lines up to and including the
/// start line, and the server.
fn serve_logged(pki: &Pki, extra: &[&str]) -> (Server, Vec<String>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_myriad"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--store", "memory"])
        .arg("--tls-cert")
        .arg(&pki.cert)
        .arg("--tls-key")
        .arg(&pki.key)
        .args(extra);
    let mut child = spawn_logging(&mut cmd);
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    let addr = loop {
        assert!(Instant::now() < deadline, "no start line: {seen:?}");
        let line = match lines.next() {
            Some(Ok(l)) => l,
            _ => panic!("myriad exited: {seen:?}"),
        };
        seen.push(line.clone());
        if let Some(at) = line.find("listen=") {
            let v = line[at + 7..].split_whitespace().next().unwrap();
            break v.parse().unwrap();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let server = Server {
        child,
        addr,
        admin: None,
    };
    (server, seen)
}

#[test]
fn ktls_without_tls_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store", "memory"])
        .arg("--ktls")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--ktls needs TLS"), "{err}");
}

#[test]
fn serving_with_ktls_says_what_the_kernel_can_and_delivers_on_every_transport() {
    let pki = Pki::new();
    let (server, log) = serve_logged(&pki, &["--ktls"]);
    let start = log.last().unwrap();
    if kernel_has_ktls() {
        assert!(start.contains("ktls=tx"), "{start}");
    } else {
        let warning = log
            .iter()
            .find(|l| l.contains("kTLS unavailable:"))
            .unwrap_or_else(|| panic!("no kTLS warning in {log:?}"));
        assert!(warning.contains("TLS stays in user space"), "{warning}");
        assert!(warning.contains("TCP_ULP"), "says why: {warning}");
        assert!(start.contains("ktls=unavailable"), "{start}");
    }
    let ca = pki.ca_file.to_str().unwrap();
    let url = |path: &str| format!("https://localhost:{}{path}", server.addr.port());
    let sse_h1 = Curl::start(&["--cacert", ca, "--http1.1", &url("/sse/5")]);
    let sse_h2 = Curl::start(&["--cacert", ca, "--http2", &url("/sse/5")]);
    let stream = Curl::start(&["--cacert", ca, "--http1.1", &url("/sub/5")]);
    sse_h1.until("retry:");
    sse_h2.until("retry:");
    stream.until("welcome 5");
    let client = pki.client();
    let mut ws = connect(&server, &client).unwrap();
    ws.write_all(
        b"GET /ws/5 HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    let mut ws_buf = Vec::new();
    read_until(&mut ws, &mut ws_buf, "\r\n\r\n");
    assert!(
        ws_buf.starts_with(b"HTTP/1.1 101"),
        "{:?}",
        String::from_utf8_lossy(&ws_buf)
    );
    wait_stats(&server, &client, "four logins", |s| {
        s["connections_logged_in"] == 4
    });
    for (i, text) in ["first over ktls", "second over ktls"].iter().enumerate() {
        assert_eq!(publish(&server, &client, 5, text), 4, "message {i}");
        sse_h1.until(&format!("data: {text}"));
        sse_h2.until(&format!("data: {text}"));
        stream.until(text);
        read_until(&mut ws, &mut ws_buf, text);
    }
    // A long message: many records (or, offloaded, the kernel's record splitting).
    let long = "k".repeat(50_000);
    assert_eq!(publish(&server, &client, 5, &long), 4);
    sse_h1.until(&long);
    stream.until(&long);
    read_until(&mut ws, &mut ws_buf, &long);
}

#[test]
fn doctor_reports_ktls() {
    let out = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(["doctor", "-n", "100"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("ktls"))
        .unwrap_or_else(|| panic!("no ktls line in {text}"));
    let want = if kernel_has_ktls() {
        "available"
    } else {
        "unavailable"
    };
    let first = line.split_whitespace().nth(2).unwrap_or_default();
    assert_eq!(first.trim_end_matches(':'), want, "{line}");
}
