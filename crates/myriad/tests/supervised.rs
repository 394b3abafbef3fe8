//! `myriad serve --processes 3`: a supervisor, a router and three gateway processes on
//! one port, linked through a nats-server the supervisor starts itself (nothing
//! answers at the test's own NATS port). A publish reaches connections on every
//! gateway with exact counts; a gateway killed with SIGKILL is restarted and its
//! clients get service again after reconnecting; SIGTERM stops every child and the
//! supervisor exits 0; the router serves `--publish-listen`.

mod common;

use common::{free_port, read_until, start_supervisor, subscribe_stream, supervisor_args, Server};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Stream clients, users 1..=CLIENTS, all following SUBJECT.
const CLIENTS: u64 = 30;
const SUBJECT: u64 = 1000;

/// The supervisor's process table (`/stats` `extra` of its admin listener).
fn table(server: &Server) -> serde_json::Value {
    server.admin_stats()["extra"].clone()
}

fn gateways(table: &serde_json::Value) -> Vec<(u32, u64)> {
    table["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"].as_str().unwrap().starts_with("gateway"))
        .map(|p| {
            (
                p["pid"].as_u64().unwrap() as u32,
                p["connections"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Waits until the gateways' (pid, connections) satisfy `pred`.
fn wait_gateways(server: &Server, pred: impl Fn(&[(u32, u64)]) -> bool) -> Vec<(u32, u64)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = gateways(&table(server));
        if pred(&now) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "gateways (pid, connections): {now:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Publishes until the reply counts `want` connections (the router learns logins
/// and a dead gateway's logouts asynchronously).
fn publish_until(server: &Server, payload: &str, want: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = server.request("POST", &format!("/pub/{SUBJECT}"), payload.as_bytes());
        if status == 200 {
            let reply: serde_json::Value = serde_json::from_str(&body).unwrap();
            if reply["connections"] == want {
                return reply;
            }
        }
        assert!(
            Instant::now() < deadline,
            "publish reply {status} {body}, want {want} connections"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn supervised_gateways_share_the_port_restart_and_stop() {
    let nats = format!("nats://127.0.0.1:{}", free_port());
    let server = start_supervisor(&nats, 3, &["--max-connections", "300"]);
    let start = table(&server);
    assert_eq!(start["gateways"], 3, "{start}");
    let processes = start["processes"].as_array().unwrap().len();
    assert_eq!(processes, 4, "a router and three gateways: {start}");
    // Machine-wide socket slab figures are the supervisor's: its gateways do not read
    // /proc/slabinfo every second (each read ~0.4 ms of kernel time under a global
    // mutex); the supervisor does, where it is readable.
    let samples = server.admin_stats()["processes"].clone();
    let slab_of = |pid: u64| {
        samples
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["pid"] == pid)
            .map(|s| s["machine"]["sock_slab_bytes"].clone())
    };
    let readable = std::fs::read_to_string("/proc/slabinfo").is_ok();
    let own = slab_of(samples[0]["pid"].as_u64().unwrap()).unwrap();
    assert_eq!(own.is_u64(), readable, "the supervisor's slab: {samples}");
    for (pid, _) in gateways(&start) {
        let slab = slab_of(u64::from(pid)).expect("every gateway has a sample");
        assert!(slab.is_null(), "gateway {pid} read the slab: {samples}");
    }

    for user in 1..=CLIENTS {
        let (status, _) = server.request("PUT", &format!("/subscriptions/{user}/{SUBJECT}"), b"");
        assert_eq!(status, 200);
    }
    let mut clients: Vec<(u64, TcpStream, Vec<u8>)> = (1..=CLIENTS)
        .map(|u| {
            let (s, buf) = subscribe_stream(&server, u);
            (u, s, buf)
        })
        .collect();
    let per_gateway = wait_gateways(&server, |g| g.iter().map(|g| g.1).sum::<u64>() == CLIENTS);
    assert_eq!(
        per_gateway.iter().map(|g| g.1).sum::<u64>(),
        CLIENTS,
        "{per_gateway:?}"
    );
    // SO_REUSEPORT spreads 30 clients over 3 listeners; all on two is (2/3)^30.
    assert!(
        per_gateway.iter().all(|g| g.1 > 0),
        "every gateway holds clients: {per_gateway:?}"
    );

    let reply = publish_until(&server, "hello all", CLIENTS);
    assert_eq!(reply["users"], CLIENTS);
    for (_, s, buf) in clients.iter_mut() {
        read_until(s, buf, "hello all");
    }

    // SIGKILL one gateway: the supervisor starts another in its place.
    let (victim, held) = per_gateway[0];
    let killed_at = Instant::now();
    // SAFETY: kill(2) on a pid the supervisor has not reaped (checked alive above).
    assert_eq!(unsafe { libc::kill(victim as i32, libc::SIGKILL) }, 0);
    let replacement = wait_gateways(&server, |g| {
        g.len() == 3 && g.iter().all(|g| g.0 != victim && alive(g.0))
    });
    eprintln!(
        "gateway {victim} (holding {held}) replaced within {:?}: {replacement:?}",
        killed_at.elapsed()
    );

    // Its clients lost their streams; they reconnect (to whichever gateway the hash
    // picks) and every client is served again.
    let mut reconnected = 0;
    for (user, s, buf) in clients.iter_mut() {
        let mut probe = [0u8; 256];
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let closed = match std::io::Read::read(s, &mut probe) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        };
        if closed {
            let (fresh, fresh_buf) = subscribe_stream(&server, *user);
            *s = fresh;
            *buf = fresh_buf;
            reconnected += 1;
        }
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    assert!(
        reconnected >= held,
        "the {held} clients of the killed gateway reconnected ({reconnected})"
    );
    let reply = publish_until(&server, "after restart", CLIENTS);
    assert_eq!(reply["users"], CLIENTS);
    for (_, s, buf) in clients.iter_mut() {
        read_until(s, buf, "after restart");
    }

    // SIGTERM: every child stops, then the supervisor exits 0.
    stop_and_check_children(server);
}

/// `--tls self-signed` under a supervisor: ONE certificate, made by the supervisor and
/// given to every gateway, so a client trusting it reaches whichever gateway
/// SO_REUSEPORT picks (before, each gateway made its own).
#[test]
fn a_supervised_self_signed_server_has_one_certificate_for_every_gateway() {
    let nats = format!("nats://127.0.0.1:{}", free_port());
    let server = start_supervisor(&nats, 2, &["--tls", "self-signed"]);
    let cert = std::env::temp_dir()
        .join(format!("myriad-tls-{}", server.pid()))
        .join("cert.pem");
    assert!(cert.is_file(), "no {}", cert.display());
    let url = format!("https://127.0.0.1:{}/pub/5", server.addr.port());
    // 16 fresh connections: SO_REUSEPORT sends some to each gateway ((1/2)^15 not).
    for i in 0..16 {
        let out = std::process::Command::new("curl")
            .args([
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "10",
            ])
            .arg("--cacert")
            .arg(&cert)
            .args(["-X", "POST", "-d", "x", &url])
            .output()
            .expect("curl must be installed (apt-get install -y curl)");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "200",
            "request {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let served: Vec<u64> = table(&server)["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"].as_str().unwrap().starts_with("gateway"))
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(served.len(), 2, "two gateways");
}

/// `serve --processes 2 --publish-listen ADDR`: the supervisor hands the port to its
/// router (the gateways, given every flag, leave it alone), and a back-end's
/// `POST /pub/<subject>` there reaches a client held by a gateway, with its count.
#[test]
fn a_supervised_router_serves_the_publish_port() {
    let nats = format!("nats://127.0.0.1:{}", free_port());
    let port = format!("127.0.0.1:{}", free_port());
    let server = start_supervisor(&nats, 2, &["--publish-listen", &port]);
    let (mut stream, mut buf) = subscribe_stream(&server, 7);
    let deadline = Instant::now() + Duration::from_secs(20);
    let reply = loop {
        let out = std::process::Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "10",
                "-X",
                "POST",
                "--data-binary",
                "via-port",
            ])
            .arg(format!("http://{port}/pub/7"))
            .output()
            .expect("curl must be installed (apt-get install -y curl)");
        let body = String::from_utf8_lossy(&out.stdout).into_owned();
        // The router learns the login a moment after the client's welcome.
        if body.contains(r#""connections":1"#) {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "the publish port answered {out:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(reply, "{\"connections\":1,\"users\":1}\n");
    read_until(&mut stream, &mut buf, "via-port");

    // SIGTERM: the gateways drain, then the router (which now drains too) exits
    // when it has nothing in flight, and the supervisor exits 0 with no child left.
    stop_and_check_children(server);
}

/// `--tick-groups 3` under a supervisor: each gateway ticks (and beats) 10/3 ms after
/// the one before it in place order, so the machine's heartbeats leave in three
/// smaller bursts instead of one.
#[test]
fn supervised_gateways_tick_in_their_groups() {
    use std::io::BufRead;
    let nats = format!("nats://127.0.0.1:{}", free_port());
    let mut child = common::spawn_logging(
        std::process::Command::new(env!("CARGO_BIN_EXE_myriad")).args(supervisor_args(
            &nats,
            3,
            &["--tick-groups", "3"],
        )),
    );
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut offsets = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while offsets.len() < 3 {
        assert!(
            Instant::now() < deadline,
            "the gateways did not start: {offsets:?}"
        );
        let line = lines.next().expect("supervisor output").unwrap();
        if line.contains("myriad serving") {
            assert!(line.contains("role=gateway"), "{line}");
            let at = line
                .find("tick_offset_us=")
                .expect("tick_offset_us in the start line");
            let us: u64 = line[at + 15..]
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap();
            offsets.push(us);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    offsets.sort();
    assert_eq!(
        offsets,
        [0, 3333, 6666],
        "every gateway's tick offset in µs"
    );
}

/// SIGTERM to a supervisor: it exits 0 and none of its children outlives it.
fn stop_and_check_children(mut server: Server) {
    let children: Vec<u32> = table(&server)["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap() as u32)
        .collect();
    // SAFETY: kill(2) on our own child.
    assert_eq!(
        unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) },
        0
    );
    let status = server.child.wait().unwrap();
    assert!(status.success(), "supervisor exit: {status}");
    for pid in children {
        assert!(!alive(pid), "child {pid} outlived the supervisor");
    }
}
