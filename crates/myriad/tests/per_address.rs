//! `--max-per-ip` for a whole supervised server (`--processes 2`): one client
//! address gets exactly K connections in total, whichever gateway each lands on,
//! and the next is refused (503); IPv6 counts per /64; a gateway killed with counts
//! held gives them back once the supervisor restarts it.
//!
//! Clients need addresses that are not loopback: the test makes a network
//! namespace (root and iproute2), puts test addresses on its own `lo` (IPv4, and
//! IPv6 in two /64s), runs the server there (`ip netns exec`) and connects from
//! threads that joined the namespace (`setns`). Deleting the namespace cleans up.

mod common;

use common::netns::Netns;
use common::Server;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const K: usize = 3;

fn need_namespace(tag: &str) -> Netns {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "this test needs root: it makes a network namespace (`ip netns add`) for client addresses that are not loopback"
    );
    let name = format!("myriad-pa-{tag}-{}", std::process::id());
    let ns = Netns::create(name).unwrap_or_else(|| {
        panic!("`ip netns add` failed: this test needs iproute2 (apt-get install iproute2)")
    });
    ns.ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
    for v4 in ["10.55.0.1/32", "10.55.0.2/32"] {
        ns.ip(&["-n", &ns.name, "addr", "add", v4, "dev", "lo"]);
    }
    for v6 in [
        "fd00:55:0:1::1/128",
        "fd00:55:0:1::2/128",
        "fd00:55:0:2::1/128",
    ] {
        ns.ip(&[
            "-n", &ns.name, "-6", "addr", "add", v6, "dev", "lo", "nodad",
        ]);
    }
    ns
}

/// Runs `f` on a thread that joined namespace `ns` (its sockets stay usable from
/// any thread afterwards).
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        let file = std::fs::File::open(format!("/run/netns/{ns}")).expect("the namespace file");
        // SAFETY: setns on this thread only, with a namespace descriptor we opened.
        assert_eq!(
            unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) },
            0,
            "setns: {}",
            std::io::Error::last_os_error()
        );
        f()
    })
    .join()
    .unwrap()
}

/// The supervisor's process table, read inside the namespace.
fn process_table(ns: &Netns, server: &Server) -> serde_json::Value {
    let admin = server.admin.expect("--admin");
    in_ns(&ns.name, move || {
        let mut s = TcpStream::connect(admin).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /stats HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        let (_, body) = common::parse_response(&out);
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["extra"].clone()
    })
}

/// Connects from `from` to `to` inside namespace `ns` and reads the response head
/// of a stream subscription: `(status, the open socket)`.
fn subscribe_from(ns: &str, from: &str, to: SocketAddr, user: u64) -> (u16, TcpStream) {
    let from = from.parse::<IpAddr>().unwrap();
    in_ns(ns, move || {
        let domain = socket2::Domain::for_address(to);
        let socket = socket2::Socket::new(domain, socket2::Type::STREAM, None).unwrap();
        socket.bind(&SocketAddr::new(from, 0).into()).unwrap();
        socket.connect(&to.into()).unwrap();
        let mut s: TcpStream = socket.into();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // A refused client is answered (503) and closed at accept: the write may
        // find the socket reset, the answer is still there to read.
        let _ = write!(s, "GET /sub/{user} HTTP/1.1\r\nHost: t\r\n\r\n");
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match s.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&head);
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no response head from {from}: {text:?}"));
        (status, s)
    })
}

fn supervisor(ns: &Netns) -> Server {
    let k = K.to_string();
    let args = [
        "serve",
        "--processes",
        "2",
        "--loops",
        "1",
        "--listen",
        "[::]:0",
        "--store",
        "memory",
        "--admin",
        "127.0.0.1:0",
        "--max-per-ip",
        &k,
    ];
    Server::start_in_netns_marked(&ns.name, &args, "supervisor serving")
}

/// Opens `n` subscriptions from `from`; returns the statuses and the open sockets.
fn open(ns: &Netns, from: &str, to: SocketAddr, n: usize) -> (Vec<u16>, Vec<TcpStream>) {
    (0..n)
        .map(|i| subscribe_from(&ns.name, from, to, 100 + i as u64))
        .unzip()
}

#[test]
fn one_address_gets_exactly_k_connections_across_gateways() {
    let ns = need_namespace("v4");
    let server = supervisor(&ns);
    let to: SocketAddr = format!("10.55.0.1:{}", server.addr.port()).parse().unwrap();
    // More than 2 K tries: had each gateway its own count, the hash would spread them
    // and more than K would get in.
    let (statuses, _held) = open(&ns, "10.55.0.2", to, 2 * K + 3);
    let ok = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(ok, K, "{statuses:?}");
    assert!(statuses[K..].iter().all(|s| *s == 503), "{statuses:?}");
    // Another address has its own K.
    let (others, _held_too) = open(&ns, "10.55.0.1", to, K);
    assert_eq!(others, vec![200; K]);
}

#[test]
fn ipv6_counts_per_64() {
    let ns = need_namespace("v6");
    let server = supervisor(&ns);
    let to: SocketAddr = format!("[fd00:55:0:1::1]:{}", server.addr.port())
        .parse()
        .unwrap();
    let (first, _a) = open(&ns, "fd00:55:0:1::1", to, K - 1);
    assert_eq!(first, vec![200; K - 1]);
    let (second, _b) = open(&ns, "fd00:55:0:1::2", to, 2 + K);
    assert_eq!(second[0], 200, "{second:?}");
    assert!(
        second[1..].iter().all(|s| *s == 503),
        "the /64's K are used: {second:?}"
    );
    let (other, _c) = open(&ns, "fd00:55:0:2::1", to, K);
    assert_eq!(other, vec![200; K], "another /64");
}

#[test]
fn a_killed_gateway_gives_its_counts_back() {
    let ns = need_namespace("kill");
    let server = supervisor(&ns);
    let to: SocketAddr = format!("10.55.0.1:{}", server.addr.port()).parse().unwrap();
    let (statuses, _held) = open(&ns, "10.55.0.2", to, K);
    assert_eq!(statuses, vec![200; K]);
    // The gateway holding the most of them dies (SIGKILL: no goodbye, counts held).
    let deadline = Instant::now() + Duration::from_secs(20);
    let gateways = loop {
        let table = process_table(&ns, &server);
        let gateways: Vec<(u64, u64)> = table["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["role"].as_str().unwrap().starts_with("gateway"))
            .map(|p| {
                (
                    p["pid"].as_u64().unwrap(),
                    p["connections"].as_u64().unwrap(),
                )
            })
            .collect();
        if gateways.iter().map(|g| g.1).sum::<u64>() == K as u64 {
            break gateways;
        }
        assert!(
            Instant::now() < deadline,
            "the gateways never showed {K} connections: {table}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let (pid, n) = *gateways.iter().max_by_key(|g| g.1).unwrap();
    // SAFETY: kill(2) on a child of the supervisor we started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    // Once the supervisor reclaimed the dead place, the address has its K again:
    // the survivors plus as many new ones as the dead gateway held.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut fresh = Vec::new();
    while fresh.len() < n as usize {
        let (status, s) = subscribe_from(&ns.name, "10.55.0.2", to, 900);
        if status == 200 {
            fresh.push(s);
        } else {
            assert!(
                Instant::now() < deadline,
                "counts of the dead gateway were never given back"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let (status, _) = subscribe_from(&ns.name, "10.55.0.2", to, 901);
    assert_eq!(status, 503, "K in all again");
}
