//! Durable history (`--history-store store|jetstream`) across a whole-server
//! `kill -9` over real sockets, on every backend: SQLite, a real PostgreSQL on
//! 127.0.0.1:5432 (trust, database `test`, a schema per test, dropped after) and
//! JetStream on a nats-server of the test's own (`-js`, a temp store dir). SSE,
//! long-poll and WebSocket clients resume with nothing lost inside the window and
//! the epoch kept; the router role killed alone keeps history the same way.

mod common;

use common::cluster::{gateway, last_sse_id, wait_router_connections, Nats, Router};
use common::postgres::{psql, PgSchema};
use common::resume::*;
use common::*;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A window larger than anything published before the kills.
const WINDOW: &str = "30000";

/// A nats-server with JetStream, storing in a temp dir, on a free port.
fn jetstream() -> (Nats, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let sd = dir.path().display().to_string();
    (Nats::start_with(port, &["-js", "-sd", &sd]), dir)
}

fn sqlite_flags(dir: &tempfile::TempDir) -> Vec<String> {
    let store = format!("sqlite:{}", dir.path().join("myriad.db").display());
    strings(&[
        "--store",
        &store,
        "--history-store",
        "store",
        "--history",
        WINDOW,
    ])
}

fn postgres_flags(schema: &PgSchema) -> Vec<String> {
    strings(&[
        "--store",
        &schema.url(),
        "--history-store",
        "store",
        "--history",
        WINDOW,
    ])
}

/// PostgreSQL refusing history rows (a CHECK constraint added under the running
/// server): the publish is answered 503 saying what reached whom and that a
/// restart will not replay it, the message still goes out live, and once rows are
/// taken again publishes are answered 200 — never a silent 200.
#[test]
fn postgres_refusing_history_rows_is_a_503_to_the_publisher_not_a_silent_200() {
    let schema = PgSchema::new("refuse");
    let server = Server::start(&strs(&postgres_flags(&schema)));
    let (mut stream, mut buf) = subscribe_stream(&server, 41);
    assert_eq!(server.publish(41, "stored one")["connections"], 1);
    read_until(&mut stream, &mut buf, "stored one");

    let table = format!("{}.history", schema.0);
    psql(&format!(
        "ALTER TABLE {table} ADD CONSTRAINT refuse_rows CHECK (false) NOT VALID"
    ));
    let (status, body) = server.request("POST", "/pub/41", b"live only");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("history not stored")
            && body.contains("delivered to 1 connections of 1 users"),
        "{body}"
    );
    assert!(
        body.contains("refuse_rows"),
        "the store's reason is given: {body}"
    );
    read_until(&mut stream, &mut buf, "live only");
    let (status, body) = server.request(
        "POST",
        "/pub",
        b"{\"subject\":41,\"data\":\"batch one\"}\n{\"subject\":41,\"data\":\"batch two\"}\n",
    );
    assert_eq!(status, 503, "a batch is told too: {body}");

    psql(&format!("ALTER TABLE {table} DROP CONSTRAINT refuse_rows"));
    assert_eq!(server.publish(41, "stored two")["connections"], 1);
    read_until(&mut stream, &mut buf, "stored two");
}

fn jetstream_flags(nats: &Nats) -> Vec<String> {
    strings(&[
        "--history-store",
        "jetstream",
        "--nats",
        &nats.url,
        "--history",
        WINDOW,
    ])
}

fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn sqlite_kill_9_every_client_resumes_with_nothing_lost() {
    let dir = tempfile::tempdir().unwrap();
    kill_9_with_durable_history_every_client_resumes_with_nothing_lost(&strs(&sqlite_flags(&dir)));
}

#[test]
fn sqlite_concurrent_publishers_keep_every_answered_message_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    concurrent_publishers_keep_order_and_every_answered_message_after_kill_9(&strs(&sqlite_flags(
        &dir,
    )));
}

#[test]
fn postgres_kill_9_every_client_resumes_with_nothing_lost() {
    let schema = PgSchema::new("resume");
    kill_9_with_durable_history_every_client_resumes_with_nothing_lost(&strs(&postgres_flags(
        &schema,
    )));
}

#[test]
fn postgres_concurrent_publishers_keep_every_answered_message_after_kill_9() {
    let schema = PgSchema::new("concurrent");
    concurrent_publishers_keep_order_and_every_answered_message_after_kill_9(&strs(
        &postgres_flags(&schema),
    ));
}

#[test]
fn jetstream_kill_9_every_client_resumes_with_nothing_lost() {
    let (nats, _dir) = jetstream();
    kill_9_with_durable_history_every_client_resumes_with_nothing_lost(&strs(&jetstream_flags(
        &nats,
    )));
}

#[test]
fn jetstream_concurrent_publishers_keep_every_answered_message_after_kill_9() {
    let (nats, _dir) = jetstream();
    concurrent_publishers_keep_order_and_every_answered_message_after_kill_9(&strs(
        &jetstream_flags(&nats),
    ));
}

/// A nats-server without JetStream: `serve` refuses to start and says why.
#[test]
fn jetstream_history_without_jetstream_is_refused_at_start() {
    let nats = Nats::start(); // no -js
    let mut child = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store", "memory"])
        .args(["--history-store", "jetstream", "--nats", &nats.url])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve kept running without JetStream");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("does not offer JetStream") && err.contains("nats-server -js"),
        "the error says what is missing and how to start it: {err}"
    );
}

/// The router role alone killed (`--role router`, gateways stay): its history
/// comes back from the durable store with the same epoch, nothing lost. The hub
/// commits on the router's NATS runtime thread here, which the blocking
/// PostgreSQL client and a JetStream log must both survive.
fn a_killed_router_role_keeps_history(nats: &Nats, store: &str, flags: &[&str]) {
    let router = Router::start_with(nats, store, flags).0;
    let gw = gateway(nats);
    let (mut s, mut buf) = common::cluster::sse(&gw, 70, None);
    wait_router_connections(&gw, 1);
    for i in 1..=20 {
        gw.publish(70, &format!("m{i}"));
    }
    read_until(&mut s, &mut buf, "data: m20\n");
    let last = last_sse_id(&buf);
    let epoch = last.split('-').next().unwrap().to_string();
    assert_eq!(last, format!("{epoch}-20"));
    router.kill(); // SIGKILL
    let _router = Router::start_with(nats, store, flags).0;
    let answer = poll_once_the_router_answers(&gw, 70, &epoch);
    assert_eq!(answer["gap"], false, "{answer}");
    assert_eq!(answer["since"], format!("{epoch}-20"), "{answer}");
    let got: Vec<&str> = answer["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["data"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (1..=20).map(|i| format!("m{i}")).collect();
    assert_eq!(got, want);
}

#[test]
fn a_killed_router_role_keeps_history_in_jetstream() {
    let (nats, _dir) = jetstream();
    let flags = ["--history-store", "jetstream", "--history", "64"];
    a_killed_router_role_keeps_history(&nats, "memory", &flags);
}

#[test]
fn a_killed_router_role_keeps_history_in_postgres() {
    let nats = Nats::start();
    let schema = PgSchema::new("router");
    let flags = ["--history-store", "store", "--history", "64"];
    a_killed_router_role_keeps_history(&nats, &schema.url(), &flags);
}

/// Concurrent publishes through a gateway reach the router role in runs (one
/// durable commit per run): the subscriber gets every message once, numbered
/// 1..=N in the order it got them, each publisher's in its own order, and a
/// killed router gives the same N back from JetStream.
#[test]
fn concurrent_publishes_through_a_gateway_keep_order_and_survive_a_router_kill() {
    concurrent_publishes_keep_order_and_survive_a_router_kill(false);
}

/// The same through the router's publish port (`--publish-listen`), whose turns
/// take runs of publishes with one commit each.
#[test]
fn concurrent_publishes_through_the_publish_port_keep_order_and_survive_a_router_kill() {
    concurrent_publishes_keep_order_and_survive_a_router_kill(true);
}

fn concurrent_publishes_keep_order_and_survive_a_router_kill(via_port: bool) {
    const PUBLISHERS: usize = 8;
    const EACH: usize = 25;
    let (nats, _dir) = jetstream();
    let flags = [
        "--history-store",
        "jetstream",
        "--history",
        "1000",
        "--publish-listen",
        "127.0.0.1:0",
    ];
    let (router, start) = Router::start_with(&nats, "memory", &flags);
    let gw = gateway(&nats);
    let (mut s, mut buf) = common::cluster::sse(&gw, 71, None);
    wait_router_connections(&gw, 1);
    let addr = match via_port {
        true => common::cluster::publish_port_of(&start),
        false => gw.addr,
    };
    let publishers: Vec<_> = (0..PUBLISHERS)
        .map(|p| {
            std::thread::spawn(move || {
                for k in 1..=EACH {
                    common::cluster::publish_at(addr, 71, &format!("p{p}-{k}"));
                }
            })
        })
        .collect();
    for p in publishers {
        p.join().unwrap();
    }
    let n = PUBLISHERS * EACH;
    let deadline = Instant::now() + Duration::from_secs(20);
    while common::cluster::sse_events(&buf).len() < n {
        assert!(
            Instant::now() < deadline,
            "{} of {n} delivered",
            common::cluster::sse_events(&buf).len()
        );
        let mut chunk = [0u8; 65536];
        if let Ok(k) = s.read(&mut chunk) {
            buf.extend_from_slice(&chunk[..k]);
        }
    }
    let events = common::cluster::sse_events(&buf);
    let seqs: Vec<u64> = events.iter().map(|e| e.0).collect();
    assert_eq!(
        seqs,
        (1..=n as u64).collect::<Vec<_>>(),
        "numbered in delivery order"
    );
    for p in 0..PUBLISHERS {
        let prefix = format!("p{p}-");
        let ks: Vec<usize> = events
            .iter()
            .filter_map(|e| e.1.strip_prefix(&prefix))
            .map(|k| k.parse().unwrap())
            .collect();
        assert_eq!(ks, (1..=EACH).collect::<Vec<_>>(), "publisher {p} in order");
    }
    let epoch = last_sse_id(&buf).split('-').next().unwrap().to_string();
    router.kill(); // SIGKILL
    let _router = Router::start_with(&nats, "memory", &flags[..4]).0;
    let answer = poll_once_the_router_answers(&gw, 71, &epoch);
    assert_eq!(answer["gap"], false, "{answer}");
    let stored: Vec<&str> = answer["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["data"].as_str().unwrap())
        .collect();
    let delivered: Vec<&str> = events.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(
        stored, delivered,
        "the restarted router has what was delivered"
    );
}

/// myriad and nats-server both killed with SIGKILL, both restarted (nats-server on
/// the same store dir): every publish answered 200 is still in JetStream, so what a
/// 200 survives with `--history-store jetstream` includes a kill of nats-server.
#[test]
fn jetstream_history_survives_a_kill_9_of_myriad_and_of_nats_server() {
    let (mut nats, dir) = jetstream();
    let port = nats.port();
    let flags = jetstream_flags(&nats);
    let mut first = Server::start(&strs(&flags));
    let (mut s, mut buf) = common::cluster::sse(&first, 72, None);
    first.wait_stats("logged in", |s| s["connections_logged_in"] == 1);
    for i in 1..=300 {
        first.publish(72, &format!("m{i}"));
    }
    read_until(&mut s, &mut buf, "data: m300\n");
    let epoch = last_sse_id(&buf).split('-').next().unwrap().to_string();
    // Right after the last 200: nats-server first, then myriad.
    nats.child.kill().unwrap();
    nats.child.wait().unwrap();
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let sd = dir.path().display().to_string();
    let _nats = Nats::start_with(port, &["-js", "-sd", &sd]);
    let second = Server::start(&strs(&flags));
    let answer = poll(&second, 72, &format!("{epoch}-0"));
    assert_eq!(answer["gap"], false, "{answer}");
    let got: Vec<&str> = answer["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["data"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (1..=300).map(|i| format!("m{i}")).collect();
    assert_eq!(got, want);
}

/// `GET /poll/USER?since=EPOCH-0` until the restarted router answers (≤ 30 s); the
/// answer's JSON.
fn poll_once_the_router_answers(gw: &Server, user: u64, epoch: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = gw.request("GET", &format!("/poll/{user}?since={epoch}-0"), b"");
        if status == 200 {
            return serde_json::from_str(body.trim()).unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "no router answer: {status} {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
