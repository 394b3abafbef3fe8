//! TLS on the client listener (issue 13) with real clients: curl (`--cacert`) for
//! chunked streaming, SSE, long-poll and the API over `https://`, Python `websockets`
//! over `wss://` with an ssl context, a certificate reload on SIGHUP that keeps open
//! connections, and `--tls self-signed`.

mod common;
mod tls_common;

use common::{Curl, Server};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;
use tls_common::*;

/// curl once, to completion: its stdout.
fn curl(args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl must be installed");
    assert!(out.status.success(), "curl {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn url(server: &Server, path: &str) -> String {
    format!("https://127.0.0.1:{}{path}", server.addr.port())
}

#[test]
fn curl_streams_sse_polls_and_publishes_over_https() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let ca = pki.ca_file.to_str().unwrap();
    let stream = Curl::start(&["--cacert", ca, &url(&server, "/sub/7")]);
    stream.until("welcome 7");
    let sse = Curl::start(&[
        "--cacert",
        ca,
        "-H",
        "Accept: text/event-stream",
        &url(&server, "/sub/7"),
    ]);
    sse.until("retry:");
    let client = pki.client();
    wait_stats(&server, &client, "two logins", |s| {
        s["connections_logged_in"] == 2
    });
    // The API over curl too: publish, and the reply counts both subscribers.
    let reply = curl(&[
        "--cacert",
        ca,
        "-d",
        "first over tls",
        &url(&server, "/pub/7"),
    ]);
    assert_eq!(reply.trim(), r#"{"connections":2,"users":1}"#);
    assert_eq!(publish(&server, &client, 7, "second\nline"), 2);
    assert!(stream
        .until("first over tls")
        .last()
        .unwrap()
        .contains("first"));
    stream.until("line");
    let events: Vec<String> = sse
        .until("data: line")
        .into_iter()
        .filter(|l| l.starts_with("id:") || l.starts_with("data:"))
        // Ids are `<epoch>-<seq>` (SPEC B6); the sequence is what this test checks.
        .map(|l| match l.strip_prefix("id: ") {
            Some(id) => format!("id: {}", id.rsplit('-').next().unwrap_or(id)),
            None => l,
        })
        .collect();
    assert_eq!(
        events,
        [
            "id: 1",
            "data: first over tls",
            "id: 2",
            "data: second",
            "data: line"
        ]
    );
    // Long-poll answers at once from history, over a fresh TLS connection.
    let poll = curl(&["--cacert", ca, &url(&server, "/poll/7?since=1")]);
    let v: serde_json::Value = serde_json::from_str(&poll).unwrap();
    assert_eq!(v["messages"][0]["data"], "second\nline", "{poll}");
    assert_eq!(v["last"], 2);
}

#[test]
fn curl_refuses_a_server_it_does_not_trust() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", &url(&server, "/stats")])
        .output()
        .expect("curl must be installed");
    // 60: peer certificate cannot be authenticated with known CA certificates.
    assert_eq!(out.status.code(), Some(60), "{out:?}");
    // ... and the server still serves a client that trusts the CA.
    assert_eq!(stats(&server, &pki.client())["pid"], server.pid());
}

#[test]
fn python_websockets_over_wss() {
    let pki = Pki::new();
    let server = pki.serve(&["--heartbeat", "1"]);
    let script = r#"
import asyncio, ssl, sys, websockets
async def main(url, ca):
    ctx = ssl.create_default_context(cafile=ca)
    async with websockets.connect(url, ssl=ctx, ping_interval=None) as ws:
        print("open", flush=True)
        pong = await ws.ping(b"hi")
        await asyncio.wait_for(pong, 5)
        print("pong", flush=True)
        for _ in range(2):
            print("msg", await asyncio.wait_for(ws.recv(), 10), flush=True)
        await ws.close()
        print("closed", ws.close_code, flush=True)
asyncio.run(main(sys.argv[1], sys.argv[2]))
"#;
    let ws_url = format!("wss://localhost:{}/sub/41", server.addr.port());
    let mut child = Command::new("python3")
        .args(["-c", script, &ws_url, pki.ca_file.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || {
        out.next()
            .expect("python exited early (pip install websockets?)")
            .unwrap()
    };
    assert_eq!(next(), "open");
    assert_eq!(next(), "pong");
    let client = pki.client();
    wait_stats(&server, &client, "login", |s| {
        s["connections_logged_in"] == 1
    });
    assert_eq!(publish(&server, &client, 41, "one"), 1);
    assert_eq!(publish(&server, &client, 41, "two"), 1);
    assert_eq!(next(), "msg one");
    assert_eq!(next(), "msg two");
    assert_eq!(next(), "closed 1000");
    assert!(child.wait().unwrap().success());
}

#[test]
fn sighup_reloads_the_certificate_and_keeps_open_connections() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let old = pki.client();
    let mut held = connect(&server, &old).unwrap();
    held.write_all(b"GET /sub/9 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    read_until(&mut held, &mut buf, "welcome 9");

    // A new CA signs a new certificate, written over the files the server reads.
    let ca2 = tls::TestCa::new("myriad second CA").unwrap();
    let ca2_file = pki.dir.path().join("ca2.pem");
    std::fs::write(&ca2_file, ca2.cert_pem()).unwrap();
    ca2.issue(&names()).unwrap().write(pki.dir.path()).unwrap();
    let new = client_trusting(&ca2_file);
    assert!(connect(&server, &new).is_err(), "not reloaded yet");
    let kill = Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    // The reload happens on a loop's next tick: wait for new handshakes to see it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while connect(&server, &new).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "no reload after SIGHUP"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        connect(&server, &old).is_err(),
        "the old certificate is gone"
    );
    // The connection opened before the reload still receives.
    assert_eq!(publish(&server, &new, 9, "after reload"), 1);
    read_until(&mut held, &mut buf, "after reload");

    // A broken file keeps the current certificate.
    std::fs::write(pki.dir.path().join("cert.pem"), "not pem").unwrap();
    Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap();
    assert_eq!(publish(&server, &new, 9, "still serving"), 1);
    read_until(&mut held, &mut buf, "still serving");
}

#[test]
fn self_signed_writes_the_certificate_clients_trust() {
    let server = Server::start(&["--tls", "self-signed"]);
    let ca = std::env::temp_dir()
        .join(format!("myriad-tls-{}", server.pid()))
        .join("cert.pem");
    let reply = curl(&[
        "--cacert",
        ca.to_str().unwrap(),
        "-d",
        "hi",
        &format!("https://localhost:{}/pub/1", server.addr.port()),
    ]);
    assert_eq!(reply.trim(), r#"{"connections":0,"users":0}"#);
    let _ = std::fs::remove_dir_all(ca.parent().unwrap());
}
