//! Several hosts on a real NATS cluster (issue 45): three nats-servers joined by
//! routes, with JetStream, each beside a myriad host. Host 1 is this machine's own
//! network namespace (where PostgreSQL, the shared store, listens): its nats-server,
//! the router and a gateway. Hosts 2 and 3 are network namespaces made here, each with
//! its nats-server and a gateway; a bridge joins the three. Every process is given
//! all three NATS addresses, its own host's first. History is durable in a JetStream
//! stream kept in three copies (`--history-replicas 3`).
//!
//! Under publishes through every host's gateway and `myriad flood --reconnect` SSE
//! clients on every host, the nats-server leading the history stream is killed with
//! `-9`, later the whole of myriad host 3 (its gateway and its clients). Then every
//! surviving client has every message of its user exactly once, none lost and no gap
//! (a publish whose answer did not come may have been delivered: a user's last number
//! lies between its 200s and its 200s plus its unanswered ones), and the two surviving
//! gateways keep serving. Last the router is killed with `-9` and started again: it
//! reads every user's history back from the stream that lost a node, same numbers.
//! Needs root for `ip netns`; without it the test says so and skips.

mod common;

use common::cluster::Router;
use common::netns::Netns;
use common::{parse_response, Server};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Users whose clients each host holds: host h has users `h*100 + 1 ..= h*100 + USERS`.
const USERS: u64 = 30;
/// SSE connections per host (two per user).
const CONNS: u64 = 2 * USERS;
const API_KEY: &str = "cluster-test-key";

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The bridge joining the hosts, deleted at the end.
struct Bridge(String);
impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {args:?} failed");
}

/// One host: where its processes run (`None`: this namespace) and its address.
struct Host {
    ns: Option<Netns>,
    addr: String,
}

impl Host {
    /// `program args` in this host's namespace (`ip netns exec` execs it: the child is
    /// the program itself, so a kill reaches it).
    fn command(&self, program: &str) -> Command {
        match &self.ns {
            None => Command::new(program),
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &ns.name, program]);
                c
            }
        }
    }
}

/// A nats-server of the cluster: client port 4222, route port 6222, monitoring 8222
/// on its host's address (the bridge's address is this test's own: no clash with a
/// nats-server of the machine on loopback).
fn start_nats(host: &Host, name: &str, all: &[String], dir: &std::path::Path) -> Killed {
    let routes: Vec<String> = all
        .iter()
        .filter(|a| **a != host.addr)
        .map(|a| format!("nats-route://{a}:6222"))
        .collect();
    let conf = format!(
        "server_name: {name}\nlisten: {a}:4222\nhttp: {a}:8222\n\
         jetstream {{ store_dir: \"{store}\" }}\n\
         cluster {{ name: myriad-test\n listen: {a}:6222\n routes: [{routes}] }}\n",
        a = host.addr,
        store = dir.join(name).display(),
        routes = routes.join(", "),
    );
    let file = dir.join(format!("{name}.conf"));
    std::fs::write(&file, conf).unwrap();
    let child = host
        .command("nats-server")
        .arg("-c")
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("needs nats-server ({e}): apt-get install nats-server"));
    Killed(child)
}

/// An HTTP/1.1 request with `Connection: close`; `None` when no answer came.
fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    // A publish waits for its JetStream write, which a stream electing a new leader
    // holds for seconds.
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {API_KEY}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).ok()?;
    s.write_all(body).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let (status, body) = parse_response(&out);
    (status != 0).then_some((status, body))
}

fn get_json(url: &str) -> Option<serde_json::Value> {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "-f", url])
        .output()
        .expect("curl (apt-get install curl)");
    serde_json::from_slice(&out.stdout).ok()
}

/// The server leading the history stream as a node sees it (from its monitoring port),
/// the copies current in that view (the node's own and its replicas' that are) and the
/// view itself.
fn stream_leader(monitor: &str) -> Option<(String, usize, serde_json::Value)> {
    let doc = get_json(&format!(
        "http://{monitor}:8222/jsz?accounts=true&streams=true"
    ))?;
    for account in doc["account_details"].as_array()? {
        for stream in account["stream_detail"].as_array().into_iter().flatten() {
            if stream["name"] == "MYRIAD_HISTORY" {
                let cluster = &stream["cluster"];
                let leader = cluster["leader"].as_str()?.to_string();
                let current = cluster["replicas"]
                    .as_array()
                    .map(|r| r.iter().filter(|p| p["current"] == true).count())
                    .unwrap_or(0);
                return Some((leader, current + 1, cluster.clone()));
            }
        }
    }
    None
}

/// The router on host 1, once it serves: history in JetStream, three copies.
fn start_router(nats: &str, store: &str) -> Router {
    let durable = ["--history-store", "jetstream", "--history-replicas", "3"];
    let flags = [&durable[..], &["--history", "1024"]].concat();
    Router::start_at(nats, store, &flags).0
}

/// A host's `myriad flood --reconnect` SSE clients, and the users they hold.
struct Flood {
    run: common::flood::Flood,
    users: (u64, u64),
}

/// A payload flood counts as a message: `ts=<unix micros>` (it takes a connection's
/// first unstamped message for a server's welcome).
fn stamp() -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    format!("ts={}", now.as_micros()).into_bytes()
}

/// Publishes to every host's users in turn through `gateway` until `stop`; counts
/// 200s and other outcomes per user.
fn publisher(
    gateway: SocketAddr,
    first: usize,
    stop: Arc<AtomicBool>,
    answered: Arc<Mutex<HashMap<u64, (u64, u64)>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut k = first as u64 * 7;
        while !stop.load(Ordering::Relaxed) {
            let user = (1 + k % 3) * 100 + 1 + (k / 3) % USERS;
            k += 1;
            let reply = request(gateway, "POST", &format!("/pub/{user}"), &stamp());
            let mut map = answered.lock().unwrap();
            let entry = map.entry(user).or_default();
            match reply {
                Some((200, _)) => entry.0 += 1,
                _ => entry.1 += 1,
            }
            drop(map);
            std::thread::sleep(Duration::from_millis(10));
        }
    })
}

/// A user's last number and epoch, from a gateway's long-poll answer.
fn last_of(gateway: SocketAddr, user: u64) -> (u64, u64) {
    let (status, body) =
        request(gateway, "GET", &format!("/poll/{user}?since=0"), b"").expect("a poll answer");
    assert_eq!(status, 200, "{body}");
    numbers(&body)
}

/// The last number and epoch of a long-poll answer.
fn numbers(body: &str) -> (u64, u64) {
    let doc: serde_json::Value = serde_json::from_str(body).unwrap();
    (
        doc["last"].as_u64().unwrap(),
        doc["epoch"].as_u64().unwrap_or(0),
    )
}

#[test]
fn a_nats_cluster_loses_a_node_then_a_host_and_nothing_is_lost_silently() {
    let tag = std::process::id() % 100_000;
    let Some(ns2) = Netns::create(format!("myriad-nc2-{tag}")) else {
        eprintln!("SKIPPED: `ip netns add` is not possible here (needs root and iproute2)");
        return;
    };
    let ns3 = Netns::create(format!("myriad-nc3-{tag}")).expect("a second namespace");
    common::postgres::need_postgres();
    let subnet = format!("10.79.{}", tag % 250 + 1);
    let bridge = Bridge(format!("mybr{tag}"));
    ip(&["link", "add", &bridge.0, "type", "bridge"]);
    ip(&["addr", "add", &format!("{subnet}.254/24"), "dev", &bridge.0]);
    ip(&["link", "set", &bridge.0, "up"]);
    let mut hosts = vec![Host {
        ns: None,
        addr: format!("{subnet}.254"),
    }];
    for (i, ns) in [(2, ns2), (3, ns3)] {
        let (outside, inside) = (format!("mync{i}h{tag}"), format!("mync{i}n{tag}"));
        ip(&[
            "link", "add", &outside, "type", "veth", "peer", "name", &inside,
        ]);
        ip(&["link", "set", &inside, "netns", &ns.name]);
        ip(&["link", "set", &outside, "master", &bridge.0]);
        ip(&["link", "set", &outside, "up"]);
        let addr = format!("{subnet}.{i}");
        let exec = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &ns.name, "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        exec(&["addr", "add", &format!("{addr}/24"), "dev", &inside]);
        exec(&["link", "set", &inside, "up"]);
        exec(&["link", "set", "lo", "up"]);
        hosts.push(Host { ns: Some(ns), addr });
    }

    // The NATS cluster, and JetStream ready on it (a meta leader elected).
    let dir = tempfile::tempdir().unwrap();
    let addrs: Vec<String> = hosts.iter().map(|h| h.addr.clone()).collect();
    let mut nats: Vec<Option<Killed>> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| Some(start_nats(h, &format!("n{}", i + 1), &addrs, dir.path())))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !addrs.iter().all(|a| {
        get_json(&format!("http://{a}:8222/jsz"))
            .is_some_and(|j| j["meta_cluster"]["leader"].is_string())
    }) {
        assert!(
            Instant::now() < deadline,
            "the NATS cluster has no JetStream leader after 60 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Each host's processes know every node, their own first.
    let nats_list = |first: usize| -> String {
        let mut order: Vec<usize> = (0..hosts.len()).collect();
        order.rotate_left(first);
        order
            .iter()
            .map(|&i| format!("nats://{}:4222", addrs[i]))
            .collect::<Vec<_>>()
            .join(",")
    };

    let store = format!(
        "postgres://postgres@127.0.0.1:5432/test?schema=myriad_nc_{}",
        std::process::id()
    );
    let mut router = Some(start_router(&nats_list(0), &store));
    let mut gateways: Vec<Option<Server>> = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        let list = nats_list(i);
        let args = [
            "serve",
            "--role",
            "gateway",
            "--nats",
            &list,
            "--api-key",
            API_KEY,
            "--listen",
            &format!("{}:0", h.addr),
        ];
        let server = match &h.ns {
            None => Server::start_args(&args),
            Some(ns) => Server::start_in_netns(&ns.name, &args),
        };
        gateways.push(Some(server));
    }
    let addrs_of: Vec<SocketAddr> = gateways.iter().flatten().map(|g| g.addr).collect();
    let gw = |i: usize| addrs_of[i];

    // Clients on every host, each flood to its own host's gateway.
    let mut floods: Vec<Option<Flood>> = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        let first = (i as u64 + 1) * 100 + 1;
        let csv = dir.path().join(format!("flood{i}.csv"));
        let child = h
            .command(env!("CARGO_BIN_EXE_myriad"))
            .args(["flood", "--reconnect", "--json", "--quiet", "--rate", "0"])
            .args(["--transport", "sse", "--procs", "1", "--hold", "600"])
            .args(["--users", &format!("{first}-{}", first + USERS - 1)])
            .args(["-n", &CONNS.to_string()])
            .arg("--url")
            .arg(format!("http://{}/sse/%d", gw(i)))
            .arg("--csv")
            .arg(&csv)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn myriad flood");
        floods.push(Some(Flood {
            run: common::flood::Flood { child, csv },
            users: (first, first + USERS - 1),
        }));
    }
    let all = 3 * CONNS;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = request(gw(0), "GET", "/stats", b"")
            .and_then(|(_, b)| serde_json::from_str::<serde_json::Value>(&b).ok());
        if stats
            .as_ref()
            .is_some_and(|s| s["gateways"] == 3 && s["connections_logged_in"].as_u64() == Some(all))
        {
            break;
        }
        assert!(Instant::now() < deadline, "not all connected: {stats:?}");
        std::thread::sleep(Duration::from_millis(200));
    }

    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(Mutex::new(HashMap::new()));
    let publishing: Vec<_> = (0..hosts.len())
        .map(|i| publisher(gw(i), i, stop.clone(), answered.clone()))
        .collect();
    std::thread::sleep(Duration::from_secs(3));

    // kill -9 the nats-server leading the history stream (three current copies first).
    let deadline = Instant::now() + Duration::from_secs(30);
    let leader = loop {
        // The leader's own view of its copies (a follower's view of the others lags).
        let view = stream_leader(&addrs[0]).and_then(|(l, _, _)| {
            let i = l.get(1..)?.parse::<usize>().ok()?.checked_sub(1)?;
            stream_leader(addrs.get(i)?)
        });
        match view {
            Some((leader, 3, _)) => break leader,
            other => assert!(
                Instant::now() < deadline,
                "the history stream is not kept in three copies: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let victim: usize = leader[1..].parse::<usize>().unwrap() - 1;
    eprintln!(
        "{:?} killing nats-server {leader} (host {}), the stream's leader",
        started.elapsed(),
        victim + 1
    );
    drop(nats[victim].take());
    let survivor = if victim == 0 { 1 } else { 0 };
    let deadline = Instant::now() + Duration::from_secs(30);
    let new_leader = loop {
        if let Some((l, _, _)) = stream_leader(&addrs[survivor]).filter(|(l, _, _)| *l != leader) {
            break l;
        }
        assert!(
            Instant::now() < deadline,
            "the history stream elected no new leader in 30 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("the stream's new leader: {new_leader}");
    std::thread::sleep(Duration::from_secs(4));

    // Then the whole of myriad host 3: its gateway and its clients.
    eprintln!("{:?} killing myriad host 3", started.elapsed());
    drop(floods[2].take());
    let host3 = gateways[2].take().unwrap();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(host3.pid() as i32, libc::SIGKILL) };
    drop(host3);
    std::thread::sleep(Duration::from_secs(4));
    stop.store(true, Ordering::Relaxed);
    for p in publishing {
        p.join().unwrap();
    }

    // The survivors serve: the router counts the two gateways and their clients.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stats = request(gw(0), "GET", "/stats", b"")
            .and_then(|(_, b)| serde_json::from_str::<serde_json::Value>(&b).ok());
        if stats.as_ref().is_some_and(|s| {
            s["gateways"] == 2 && s["connections_logged_in"].as_u64() == Some(2 * CONNS)
        }) {
            break;
        }
        if Instant::now() >= deadline {
            // What each side saw: the other surviving gateway's counters, and
            // the clients' (a client that never reconnected shows here).
            let other = request(gw(1), "GET", "/stats", b"");
            for f in floods.iter_mut().flatten() {
                eprintln!("users {:?}: {}", f.users, f.run.finish());
            }
            panic!("the router's view after host 3 died: {stats:?}; gateway 2: {other:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    // One more message to every user still held, so that nothing lost at the end of
    // a user's sequence can hide: a hole before it shows as lost.
    for host in 1..=2u64 {
        for user in host * 100 + 1..=host * 100 + USERS {
            let reply = request(gw(0), "POST", &format!("/pub/{user}"), &stamp());
            assert_eq!(reply.as_ref().map(|r| r.0), Some(200), "{reply:?}");
            answered.lock().unwrap().entry(user).or_default().0 += 1;
        }
    }

    // Every user's last number: at least its 200s, at most those plus the unanswered.
    let answered = answered.lock().unwrap().clone();
    let mut last = HashMap::new();
    for host in 1..=3u64 {
        for user in host * 100 + 1..=host * 100 + USERS {
            let (seq, epoch) = last_of(gw(1), user);
            let (ok, failed) = answered.get(&user).copied().unwrap_or_default();
            assert!(
                ok <= seq && seq <= ok + failed,
                "user {user}: last {seq}, answered 200 {ok}, not answered {failed}"
            );
            last.insert(user, (seq, epoch));
        }
    }
    let (ok, failed) = answered
        .values()
        .fold((0, 0), |a, v| (a.0 + v.0, a.1 + v.1));
    eprintln!("publishes: {ok} answered 200, {failed} not");
    assert!(ok > 300, "too few publishes went through: {ok}");

    // Each surviving client got every message of its user, once.
    for mut flood in floods.into_iter().flatten() {
        let want: u64 = 2
            * (flood.users.0..=flood.users.1)
                .map(|u| last[&u].0)
                .sum::<u64>();
        let deadline = Instant::now() + Duration::from_secs(30);
        while flood.run.messages() < want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_millis(1500));
        let users = flood.users;
        let s = flood.run.finish();
        eprintln!("clients of users {users:?}: {s}");
        let r = &s["resume"];
        assert_eq!(s["opened"], CONNS, "{s}");
        assert_eq!(r["gaps"], 0, "{s}");
        assert_eq!(r["lost"], 0, "{s}");
        assert_eq!(r["duplicates"], 0, "{s}");
        assert_eq!(s["messages"], want, "every message once: {s}");
    }

    // The router dies and comes back: history from the stream that lost a node.
    router.take().unwrap().kill();
    let _router = start_router(&nats_list(0), &store);
    for (&user, &(seq, epoch)) in &last {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // 503 until the gateway hears the new router.
            let now = request(gw(1), "GET", &format!("/poll/{user}?since=0"), b"")
                .filter(|(status, _)| *status == 200)
                .map(|(_, body)| numbers(&body));
            if now == Some((seq, epoch)) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "user {user}: after the router's restart {now:?}, before {:?}",
                (seq, epoch)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    drop(gateways);
    drop(nats);
}
