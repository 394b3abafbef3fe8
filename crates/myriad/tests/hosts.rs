//! Several hosts (SPEC E3), made with a network namespace: this test creates a
//! namespace and a veth pair (unique names per run, removed by name at the end), runs
//! a nats-server, the router and one gateway on the "host"
//! side, another gateway inside the namespace, and shows a publish made at the
//! namespace's gateway reaching a client of the host's gateway, counted exactly.
//! Needs root for `ip netns`; without it the test says so and skips.

mod common;

use common::cluster::Router;
use common::netns::Netns;
use common::{read_until, subscribe_stream, Server};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port(ip: &str) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_publish_crosses_network_namespaces_through_nats() {
    let tag = std::process::id() % 100_000;
    // Deleting the namespace removes the veth pair too.
    let host_if = format!("me3h{tag}");
    let Some(ns) = Netns::create(format!("myriad-e3-{tag}")) else {
        eprintln!("SKIPPED: `ip netns add` is not possible here (needs root and iproute2)");
        return;
    };
    // 10.77.<n>.1 on the host side, .2 inside the namespace.
    let subnet = format!("10.77.{}", tag % 250 + 1);
    let (host_ip, ns_ip) = (format!("{subnet}.1"), format!("{subnet}.2"));
    let peer = format!("me3n{tag}");
    ns.ip(&[
        "link", "add", &host_if, "type", "veth", "peer", "name", &peer,
    ]);
    ns.ip(&["link", "set", &peer, "netns", &ns.name]);
    ns.ip(&["addr", "add", &format!("{host_ip}/24"), "dev", &host_if]);
    ns.ip(&["link", "set", &host_if, "up"]);
    ns.ip(&[
        "netns",
        "exec",
        &ns.name,
        "ip",
        "addr",
        "add",
        &format!("{ns_ip}/24"),
        "dev",
        &peer,
    ]);
    ns.ip(&["netns", "exec", &ns.name, "ip", "link", "set", &peer, "up"]);
    ns.ip(&["netns", "exec", &ns.name, "ip", "link", "set", "lo", "up"]);

    let nats_port = free_port(&host_ip);
    let nats = Killed(
        Command::new("nats-server")
            .args(["-a", &host_ip, "-p", &nats_port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("needs nats-server ({e}): apt-get install nats-server")),
    );
    let url = format!("nats://{host_ip}:{nats_port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect((host_ip.as_str(), nats_port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nats-server did not listen on {url}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // PostgreSQL is the shared store E3 asks for (a schema of this run's own).
    common::postgres::need_postgres();
    let store = format!(
        "postgres://postgres@127.0.0.1:5432/test?schema=myriad_e3_{}",
        std::process::id()
    );
    let _router = Router::start_at(&url, &store, &[]);

    let host_gw = Server::start_args(&[
        "serve",
        "--role",
        "gateway",
        "--nats",
        &url,
        "--listen",
        &format!("{host_ip}:0"),
    ]);
    // The API answers loopback clients only (no --api-key): the namespace's gateway
    // listens on every address of its namespace, and the API calls come from inside.
    let ns_gw = Server::start_in_netns(
        &ns.name,
        &[
            "serve",
            "--role",
            "gateway",
            "--nats",
            &url,
            "--listen",
            "0.0.0.0:0",
        ],
    );
    let ns_api = format!("http://127.0.0.1:{}", ns_gw.addr.port());
    let curl_in_ns = |args: &[&str]| -> String {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.name,
                "curl",
                "-sS",
                "--max-time",
                "10",
                "-f",
            ])
            .args(args)
            .output()
            .expect("curl (apt-get install curl)");
        assert!(
            out.status.success(),
            "curl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    // User 5 follows subject 9 (stored in PostgreSQL by the router) and holds a stream
    // on the host's gateway; the publish is made at the namespace's gateway.
    curl_in_ns(&["-X", "PUT", &format!("{ns_api}/subscriptions/5/9")]);
    let (mut stream, mut buf) = subscribe_stream(&host_gw, 5);
    let deadline = Instant::now() + Duration::from_secs(20);
    let reply = loop {
        let body = curl_in_ns(&["-d", "across hosts", &format!("{ns_api}/pub/9")]);
        let reply: serde_json::Value = serde_json::from_str(&body).expect("publish reply is JSON");
        if reply["connections"] == 1 || Instant::now() > deadline {
            break reply;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(reply, serde_json::json!({"connections": 1, "users": 1}));
    read_until(&mut stream, &mut buf, "across hosts");
    drop((host_gw, ns_gw, nats));
}
