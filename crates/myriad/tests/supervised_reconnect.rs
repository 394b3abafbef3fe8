//! The gateway-kill fault of issue 9 with real clients: `serve --processes 3`, four
//! `myriad flood --reconnect` runs (SSE, long-poll, WebSocket, chunked stream; two
//! connections per user each) spread over the three gateways, a publisher sending to
//! every user throughout, and `kill -9` of one gateway holding clients. The gateway is
//! restarted; its clients reconnect (to the others or the new one) and resume; the
//! router forgets the dead gateway's presence once its replacement is heard. Then, per transport, every connection
//! got every message of its user exactly once, in order: flood counts no gap, no lost
//! and no repeated sequence number, and the messages received equal the sum over
//! connections of their user's last sequence number (each connection started at 0).

mod common;

use common::{free_port, parse_response, supervisor_args, Server};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Users 1..=USERS; each flood opens two connections per user.
const USERS: u64 = 20;
const PER_FLOOD: u64 = 2 * USERS;
/// Users SOLO.0..=SOLO.1 have one SSE connection each and get no message before the
/// kill: those on the killed gateway are offline until they reconnect, with no
/// history yet — what is published to them meanwhile must wait for them.
const SOLO: (u64, u64) = (21, 60);
const TRANSPORTS: [(&str, &str); 4] = [
    ("sse", "/sse/%d"),
    ("poll", "/poll/%d"),
    ("ws", "/ws/%d"),
    ("stream", "/sub/%d"),
];

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// (pid, connections) of each gateway, from the supervisor's process table.
fn gateways(server: &Server) -> Vec<(u32, u64)> {
    server.admin_stats()["extra"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"].as_str().unwrap().starts_with("gateway"))
        .map(|p| {
            let pid = p["pid"].as_u64().unwrap() as u32;
            (pid, p["connections"].as_u64().unwrap())
        })
        .collect()
}

/// The supervisor, its addresses from its start line, and every later log line with
/// the moment it was read (the router's "forgotten" line is timed from them).
fn start_supervisor(args: &[&str]) -> (Server, Receiver<(Instant, String)>) {
    let mut child = common::spawn_logging(Command::new(env!("CARGO_BIN_EXE_myriad")).args(args));
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let field = |line: &str, name: &str| -> Option<SocketAddr> {
        let at = line.find(name)? + name.len();
        line[at..].split_whitespace().next()?.parse().ok()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let (addr, admin) = loop {
        assert!(Instant::now() < deadline, "the supervisor did not start");
        let line = lines.next().expect("supervisor output").unwrap();
        if line.contains("supervisor serving") {
            break (field(&line, "listen=").unwrap(), field(&line, "admin="));
        }
    };
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = tx.send((Instant::now(), line));
        }
    });
    (Server { child, addr, admin }, rx)
}

/// One request on a fresh connection; `None` when the gateway it reached died.
fn try_request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    s.write_all(&req).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let (status, body) = parse_response(&out);
    (status != 0).then_some((status, body))
}

fn unix_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros()
}

/// A `myriad flood --reconnect` child ([`common::flood::Flood`]) of one transport.
struct Flood {
    run: common::flood::Flood,
    transport: &'static str,
    /// Connections, and users `(first, last)` they cycle through.
    n: u64,
    users: (u64, u64),
}

impl Flood {
    fn start(
        addr: SocketAddr,
        (transport, path): (&'static str, &str),
        (n, users): (u64, (u64, u64)),
        dir: &std::path::Path,
    ) -> Flood {
        let csv = dir.join(format!("{transport}-{}.csv", users.0));
        let child = Command::new(env!("CARGO_BIN_EXE_myriad"))
            .args(["flood", "--reconnect", "--json", "--quiet", "--rate", "0"])
            .args(["--transport", transport])
            .arg("--users")
            .arg(format!("{}-{}", users.0, users.1))
            .args(["-n", &n.to_string(), "--hold", "300", "--procs", "auto"])
            .arg("--url")
            .arg(format!("http://{addr}{path}"))
            .arg("--csv")
            .arg(&csv)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn myriad flood");
        Flood {
            run: common::flood::Flood { child, csv },
            transport,
            n,
            users,
        }
    }
}

/// Publishes to users in turn until `stop`; counts 200s and other outcomes per user.
/// `phase` 0: users 1..=USERS; 1 (from the kill): the SOLO users; 2: all of them.
fn publisher(
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    phase: Arc<AtomicU8>,
    answered: Arc<Mutex<HashMap<u64, (u64, u64)>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut k = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let user = match phase.load(Ordering::Relaxed) {
                0 => 1 + k % USERS,
                1 => SOLO.0 + k % (SOLO.1 - SOLO.0 + 1),
                _ => 1 + k % SOLO.1,
            };
            k += 1;
            let payload = format!("ts={} user {user} n {k}", unix_micros());
            let reply = try_request(addr, "POST", &format!("/pub/{user}"), payload.as_bytes());
            let mut map = answered.lock().unwrap();
            let entry = map.entry(user).or_default();
            match reply {
                Some((200, _)) => entry.0 += 1,
                _ => entry.1 += 1,
            }
            drop(map);
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

/// The user's last sequence number, from any gateway's long-poll answer.
fn last_seq(addr: SocketAddr, user: u64) -> u64 {
    let (status, body) =
        try_request(addr, "GET", &format!("/poll/{user}?since=0"), b"").expect("a poll answer");
    assert_eq!(status, 200, "{body}");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    doc["last"].as_u64().unwrap()
}

#[test]
fn a_killed_gateways_flood_clients_reconnect_and_resume_without_loss() {
    kill_a_gateway_under_floods("1");
}

/// The same with the router in two shards (`--router-shards 2`).
#[test]
fn the_same_with_two_router_shards() {
    kill_a_gateway_under_floods("2");
}

fn kill_a_gateway_under_floods(router_shards: &str) {
    let nats = format!("nats://127.0.0.1:{}", free_port());
    let args = supervisor_args(
        &nats,
        3,
        &[
            "--router-shards",
            router_shards,
            "--max-connections",
            "3000",
            "--history",
            "256",
        ],
    );
    let (server, log) = start_supervisor(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let addr = server.addr;
    let routers = server.admin_stats()["extra"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"].as_str().unwrap().starts_with("router"))
        .count();
    assert_eq!(routers.to_string(), router_shards, "router processes");
    let dir = tempfile::tempdir().unwrap();
    let mut floods: Vec<Flood> = TRANSPORTS
        .iter()
        .map(|&t| Flood::start(addr, t, (PER_FLOOD, (1, USERS)), dir.path()))
        .collect();
    let solo = SOLO.1 - SOLO.0 + 1;
    floods.push(Flood::start(
        addr,
        ("sse", "/sse/%d"),
        (solo, SOLO),
        dir.path(),
    ));
    let total: u64 = floods.iter().map(|f| f.n).sum();
    let deadline = Instant::now() + Duration::from_secs(60);
    let spread = loop {
        let g = gateways(&server);
        if g.iter().map(|g| g.1).sum::<u64>() >= total {
            break g;
        }
        assert!(Instant::now() < deadline, "not all connected: {g:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("connections per gateway: {spread:?}");

    let stop = Arc::new(AtomicBool::new(false));
    let phase = Arc::new(AtomicU8::new(0));
    let answered = Arc::new(Mutex::new(HashMap::new()));
    let publishing = publisher(addr, stop.clone(), phase.clone(), answered.clone());
    std::thread::sleep(Duration::from_secs(2));

    // kill -9 the gateway holding the most clients.
    let (victim, held) = *spread.iter().max_by_key(|g| g.1).unwrap();
    assert!(held > 0, "{spread:?}");
    let killed = Instant::now();
    // SAFETY: kill(2) on a gateway the supervisor has not reaped (it holds clients).
    assert_eq!(unsafe { libc::kill(victim as i32, libc::SIGKILL) }, 0);
    // While the victim's clients come back, publish to the users without history.
    phase.store(1, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(400));
    phase.store(2, Ordering::Relaxed);
    let deadline = killed + Duration::from_secs(20);
    loop {
        let g = gateways(&server);
        if g.len() == 3 && g.iter().all(|g| g.0 != victim && alive(g.0)) {
            break;
        }
        assert!(Instant::now() < deadline, "no replacement: {g:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let restarted = killed.elapsed();
    // The router forgets the dead gateway as soon as its replacement (same place)
    // is heard, not after 3 s of silence.
    let forgotten = loop {
        let (at, line) = log
            .recv_timeout(Duration::from_secs(30))
            .expect("the router never logged the dead gateway forgotten");
        if line.contains("forgotten") {
            assert!(line.contains("restarted in its place"), "{line}");
            break at.saturating_duration_since(killed);
        }
    };
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    publishing.join().unwrap();
    // Then it counts the live connections only, on three gateways (each gateway's
    // /stats carries the router's counters as of its last heartbeat).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stats = try_request(addr, "GET", "/stats", b"")
            .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(&body).ok());
        if let Some(s) = stats {
            if s["gateways"] == 3 && s["connections_logged_in"] == total {
                break;
            }
            assert!(Instant::now() < deadline, "the router's view: {s}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "gateway {victim} (holding {held}) killed: replaced after {restarted:?}, forgotten by the router after {forgotten:?}"
    );

    // Every user's last number: at least its publishes answered 200, at most those
    // plus the ones whose answer was lost with the gateway.
    let answered = answered.lock().unwrap().clone();
    let mut last = HashMap::new();
    for user in 1..=SOLO.1 {
        let seq = last_seq(addr, user);
        let (ok, failed) = answered.get(&user).copied().unwrap_or_default();
        assert!(
            ok <= seq && seq <= ok + failed,
            "user {user}: last seq {seq}, answered {ok}, unanswered {failed}"
        );
        last.insert(user, seq);
    }
    // Each connection started at 0 and gets every message of its user.
    let mut reconnects = 0;
    for mut flood in floods {
        let per_user = flood.n / (flood.users.1 - flood.users.0 + 1);
        let want: u64 = per_user
            * (flood.users.0..=flood.users.1)
                .map(|u| last[&u])
                .sum::<u64>();
        let deadline = Instant::now() + Duration::from_secs(30);
        while flood.run.messages() < want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_millis(500));
        let (transport, flood_n) = (flood.transport, flood.n);
        let s = flood.run.finish();
        drop(flood);
        eprintln!("{transport}: {s}");
        let r = &s["resume"];
        assert_eq!(s["opened"], flood_n, "{transport}: {s}");
        assert_eq!(s["failed"], 0, "{transport}: {s}");
        assert!(
            r["reconnects"].as_u64().unwrap() >= 1,
            "{transport}: no connection was on the killed gateway? {s}"
        );
        assert_eq!(r["gaps"], 0, "{transport}: {s}");
        assert_eq!(r["lost"], 0, "{transport}: {s}");
        assert_eq!(r["duplicates"], 0, "{transport}: {s}");
        assert_eq!(s["messages"], want, "{transport}: every message once: {s}");
        reconnects += r["reconnects"].as_u64().unwrap();
    }
    assert!(
        reconnects >= held,
        "the killed gateway's {held} clients reconnected ({reconnects})"
    );
}
