//! msggen against a small counting HTTP server and the drone control protocol
//! round trip (driving a real flood against the generic test server).

mod common;

use load::drone::{self, Drone, DroneArgs};
use load::flood::FloodArgs;
use load::msggen::{self, Dist, MsggenArgs};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A keep-alive publish endpoint: counts requests and connections, keeps bodies and paths.
struct PubServer {
    url: String,
    requests: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
    seen: Seen,
}

/// (path, body) of every publish received.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

fn pub_server() -> PubServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (requests, connections, seen) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::default(),
    );
    let (r, c, s): (Arc<AtomicU64>, Arc<AtomicU64>, Seen) =
        (requests.clone(), connections.clone(), Arc::clone(&seen));
    std::thread::spawn(move || {
        for sock in listener.incoming() {
            let Ok(sock) = sock else { continue };
            c.fetch_add(1, Ordering::Relaxed);
            let (r, s) = (r.clone(), s.clone());
            std::thread::spawn(move || {
                let mut out = sock.try_clone().unwrap();
                let mut reader = BufReader::new(sock);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                    let mut len = 0;
                    loop {
                        let mut h = String::new();
                        reader.read_line(&mut h).unwrap();
                        if h == "\r\n" {
                            break;
                        }
                        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0u8; len];
                    reader.read_exact(&mut body).unwrap();
                    s.lock()
                        .unwrap()
                        .push((path, String::from_utf8(body).unwrap()));
                    r.fetch_add(1, Ordering::Relaxed);
                    let reply = r#"{"connections":3,"users":2}"#;
                    write!(out, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{reply}", reply.len())
                        .unwrap();
                }
            });
        }
    });
    PubServer {
        url,
        requests,
        connections,
        seen,
    }
}

#[test]
fn msggen_publishes_over_keep_alive_connections() {
    let server = pub_server();
    let args = MsggenArgs {
        url: server.url.clone(),
        rate: 200.0,
        max: 50,
        publishers: 3,
        dist: Dist::Power,
        exponent: 1.1,
        duration: 1.0,
        size: 40,
        quiet: true,
        ..Default::default()
    };
    let s = msggen::run_with(args, &AtomicBool::new(false)).unwrap();
    assert!(s.sent > 0);
    assert_eq!(s.errors, 0, "{s:?}");
    assert_eq!(s.sent, server.requests.load(Ordering::Relaxed));
    assert_eq!(
        (s.deliveries, s.users),
        (3 * s.sent, 2 * s.sent),
        "sums of the replies"
    );
    // One probe connection plus one keep-alive connection per publisher.
    assert_eq!(server.connections.load(Ordering::Relaxed), 4);
    for (path, body) in server.seen.lock().unwrap().iter() {
        let subject: u64 = path.strip_prefix("/pub/").unwrap().parse().unwrap();
        assert!((1..=50).contains(&subject));
        assert!(body.starts_with("ts=") && body.len() == 40, "{body:?}");
    }
}

#[test]
fn msggen_stops_on_the_flag_and_reports_errors() {
    let stop = AtomicBool::new(true);
    let server = pub_server();
    let s = msggen::run_with(
        MsggenArgs {
            url: server.url.clone(),
            duration: 30.0,
            quiet: true,
            ..Default::default()
        },
        &stop,
    )
    .unwrap();
    assert!(s.elapsed_s < 30.0);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = msggen::run_with(
        MsggenArgs {
            url: format!("http://127.0.0.1:{port}"),
            quiet: true,
            ..Default::default()
        },
        &stop,
    )
    .expect_err("nothing listens");
    assert!(format!("{err:#}").contains("is the server running"));
}

#[test]
fn drone_control_round_trip() {
    let server = common::Server::start(common::Kind::Stream);
    let d = Drone::bind(DroneArgs {
        control: "127.0.0.1:0".into(),
        lifetime: 120.0,
        flood: FloodArgs {
            quiet: true,
            rate: 0.0,
            max_time: 60.0,
            ..Default::default()
        },
    })
    .unwrap();
    let addr = d.addr().to_string();
    let handle = std::thread::spawn(move || d.run());
    let st = drone::send(&addr, "status").unwrap();
    assert_eq!(
        (st["ok"].as_bool(), st["state"].as_str()),
        (Some(true), Some("idle"))
    );
    let bad = drone::send(&addr, "start").unwrap();
    assert_eq!(bad["ok"], false, "no target yet: {bad}");
    assert!(drone::send(&addr, "frobnicate").unwrap()["error"]
        .as_str()
        .unwrap()
        .contains("unknown command"));
    for cmd in [
        format!("set url {}", server.url("/sub/%d")),
        "set n 7".into(),
        "set transport sse".into(),
        "start".into(),
    ] {
        assert_eq!(drone::send(&addr, &cmd).unwrap()["ok"], true, "{cmd}");
    }
    let st = wait_open(&addr, 7);
    assert_eq!(
        (
            st["state"].as_str(),
            st["transport"].as_str(),
            st["n"].as_u64()
        ),
        (Some("running"), Some("sse"), Some(7))
    );
    assert_eq!(drone::send(&addr, "set n 3").unwrap()["ok"], true);
    assert_eq!(drone::send(&addr, "restart").unwrap()["ok"], true);
    let st = drone::send(&addr, "status").unwrap();
    assert_eq!(
        (st["runs"].as_u64(), st["summary"]["opened"].as_u64()),
        (Some(2), Some(7)),
        "{st}"
    );
    wait_open(&addr, 3);
    // fleet sends settings to every drone and prints one table.
    let fleet = load::fleet::FleetArgs {
        drones: vec![addr.clone()],
        set_url: vec![],
        set_n: Some(9),
        split: true,
        set_rate: Some(500.0),
        set_transport: Some("stream".into()),
        restart: false,
        stop: false,
        quit: false,
        once: true,
        duration: 0.0,
    };
    load::fleet::run(fleet).unwrap();
    let st = drone::send(&addr, "status").unwrap();
    assert_eq!(
        (
            st["n"].as_u64(),
            st["rate"].as_f64(),
            st["transport"].as_str()
        ),
        (Some(9), Some(500.0), Some("stream"))
    );
    assert_eq!(drone::send(&addr, "stop").unwrap()["ok"], true);
    let st = drone::send(&addr, "status").unwrap();
    assert_eq!(
        (st["state"].as_str(), st["summary"]["opened"].as_u64()),
        (Some("idle"), Some(3)),
        "{st}"
    );
    assert_eq!(drone::send(&addr, "quit").unwrap()["ok"], true);
    handle.join().unwrap().unwrap();
}

/// Poll a drone's status until its flood reports `n` open (bounded); the status.
fn wait_open(addr: &str, n: u64) -> serde_json::Value {
    // The flood reports through its one-second ticks.
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let st = drone::send(addr, "status").unwrap();
        if st["tick"]["open"] == n {
            return st;
        }
        assert!(Instant::now() < end, "drone never reported {n} open: {st}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
