//! Helpers of the several-process tests (`cluster.rs`, `cluster_payload.rs`): a
//! nats-server of the test's own, the router role, gateways, SSE reading.

use super::{read_until, Server};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A nats-server of this test's own, on a free port.
pub struct Nats {
    pub child: Child,
    pub url: String,
}

impl Nats {
    pub fn start() -> Nats {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Nats::start_on(port)
    }

    pub fn start_on(port: u16) -> Nats {
        Nats::start_with(port, &[])
    }

    /// With further nats-server flags (e.g. `-c FILE`).
    pub fn start_with(port: u16, extra: &[&str]) -> Nats {
        let child = Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("this test needs nats-server on the PATH ({e}); install it: apt-get install nats-server")
            });
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Nats {
            child,
            url: format!("nats://127.0.0.1:{port}"),
        }
    }
}

impl Nats {
    /// On a free port, with `conf` as its configuration file (written in `dir`).
    pub fn start_configured(dir: &std::path::Path, conf: &str) -> Nats {
        let file = dir.join("nats.conf");
        std::fs::write(&file, conf).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Nats::start_with(port, &["-c", file.to_str().unwrap()])
    }

    pub fn port(&self) -> u16 {
        self.url.rsplit(':').next().unwrap().parse().unwrap()
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `myriad serve --role router`, started and waited for.
pub struct Router {
    pub child: Child,
}

impl Router {
    pub fn start(nats: &Nats, store: &str) -> Router {
        Router::start_with(nats, store, &[]).0
    }

    /// `n` router shards with the memory store, one process each (`--router-shards
    /// n --router-shard i`).
    pub fn shards(nats: &Nats, n: usize) -> Vec<Router> {
        Router::shards_with(nats, n, &[])
    }

    /// [`Router::shards`], each with `extra` flags too.
    pub fn shards_with(nats: &Nats, n: usize, extra: &[&str]) -> Vec<Router> {
        let count = n.to_string();
        (0..n)
            .map(|i| {
                let shard = i.to_string();
                let mut flags = vec!["--router-shards", &count, "--router-shard", &shard];
                flags.extend(extra);
                Router::start_with(nats, "memory", &flags).0
            })
            .collect()
    }

    /// The router with `extra` flags, and its start line.
    pub fn start_with(nats: &Nats, store: &str, extra: &[&str]) -> (Router, String) {
        Router::start_at(&nats.url, store, extra)
    }

    /// The router of the NATS servers `url` names (comma-separated for a cluster),
    /// with `extra` flags, and its start line. Its warnings and errors go to the
    /// test's output.
    pub fn start_at(url: &str, store: &str, extra: &[&str]) -> (Router, String) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_myriad"));
        cmd.args(["serve", "--role", "router", "--nats", url])
            .args(["--store", store])
            .args(extra);
        let mut child = super::spawn_logging(&mut cmd);
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let start = loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("myriad router serving") => break line,
                Some(Ok(_)) => {}
                _ => panic!("the router exited before serving: {:?}", child.wait()),
            }
        };
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if line.contains("WARN") || line.contains("ERROR") || line.contains("panicked") {
                    eprintln!("router: {line}");
                }
            }
        });
        (Router { child }, start)
    }

    pub fn kill(mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `admin=ADDR` in a router's start line (`--admin`).
#[allow(dead_code)] // not every test binary reads the router's admin
pub fn admin_of(line: &str) -> String {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("admin="))
        .unwrap_or_else(|| panic!("no admin= in {line:?}"))
        .to_string()
}

/// `GET path` on `addr`; returns the body.
#[allow(dead_code)] // not every test binary reads an admin listener
pub fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut s, &mut out).unwrap();
    let (status, body) = super::parse_response(&out);
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

/// `publish_port=ADDR` in a router's start line (`--publish-listen`).
#[allow(dead_code)] // not every test binary publishes to the port
pub fn publish_port_of(line: &str) -> std::net::SocketAddr {
    let at = line
        .find("publish_port=")
        .unwrap_or_else(|| panic!("no publish_port in {line:?}"));
    let addr = line[at + "publish_port=".len()..]
        .split(|c: char| c.is_whitespace() || c == '"' || c == ',')
        .next()
        .unwrap();
    addr.parse()
        .unwrap_or_else(|_| panic!("bad address in {line:?}"))
}

/// `POST /pub/<subject>` to the server at `addr` (from any thread); the reply.
pub fn publish_at(
    addr: std::net::SocketAddr,
    subject: impl std::fmt::Display,
    payload: &str,
) -> serde_json::Value {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "POST /pub/{subject} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut s, &mut out).unwrap();
    let (status, body) = super::parse_response(&out);
    assert_eq!(status, 200, "publish failed: {body}");
    serde_json::from_str(&body).expect("publish reply is JSON")
}

/// A back-end's publish request to `myriad.pub.<subject>` (SPEC C4), spoken in
/// NATS's own text protocol: every reply that arrived on the request's inbox by the
/// time a PING after the first reply was answered (a request must get exactly one).
#[allow(dead_code)] // not every test binary publishes through NATS
pub fn backend_request(nats: &Nats, subject: impl std::fmt::Display, payload: &str) -> Vec<String> {
    let mut conn = TcpStream::connect(nats.url.trim_start_matches("nats://")).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        conn,
        "CONNECT {{\"verbose\":false}}\r\nSUB _INBOX.test 1\r\nPUB myriad.pub.{subject} _INBOX.test {}\r\n{payload}\r\n",
        payload.len()
    )
    .unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let (mut replies, mut pinged) = (Vec::new(), false);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "no reply: {replies:?}");
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.starts_with("MSG _INBOX.test") {
            let mut body = String::new();
            reader.read_line(&mut body).unwrap();
            replies.push(body.trim_end().to_string());
            if !pinged {
                // Anything a second replier sent before this PONG shows up too.
                std::thread::sleep(Duration::from_millis(300));
                conn.write_all(b"PING\r\n").unwrap();
                pinged = true;
            }
        } else if line.starts_with("PONG") && pinged {
            return replies;
        } else if line.starts_with("PING") {
            conn.write_all(b"PONG\r\n").unwrap();
        }
    }
}

pub fn gateway(nats: &Nats) -> Server {
    gateway_with(nats, &["--head-timeout", "2"])
}

/// A gateway of two loops linked through `nats`, with `extra` flags.
pub fn gateway_with(nats: &Nats, extra: &[&str]) -> Server {
    let mut args = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--role",
        "gateway",
        "--nats",
        &nats.url,
        "--loops",
        "2",
    ];
    args.extend_from_slice(extra);
    Server::start_args(&args)
}

/// Waits until the router (as a gateway's `/stats` shows it, refreshed every
/// heartbeat) holds `n` connections.
pub fn wait_router_connections(gw: &Server, n: u64) {
    gw.wait_stats(&format!("{n} connections at the router"), |s| {
        s["connections_logged_in"] == n
    });
}

/// Publishes until the router answers (it may be restarting); returns the reply.
pub fn publish_when_up(gw: &Server, subject: u64, payload: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = gw.request("POST", &format!("/pub/{subject}"), payload.as_bytes());
        if status == 200 {
            return serde_json::from_str(&body).unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "no router answer: {status} {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn sse(server: &Server, user: u64, last_event_id: Option<&str>) -> (TcpStream, Vec<u8>) {
    let mut s = server.connect();
    let resume = last_event_id.map_or(String::new(), |id| format!("Last-Event-ID: {id}\r\n"));
    write!(s, "GET /sse/{user} HTTP/1.1\r\nHost: t\r\n{resume}\r\n").unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "retry:");
    (s, buf)
}

/// The last SSE `id:` in `buf` as sent (`<epoch>-<seq>`), for `Last-Event-ID`.
pub fn last_sse_id(buf: &[u8]) -> String {
    let text = String::from_utf8_lossy(buf);
    let id = text
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .next_back();
    id.expect("an SSE id").trim().to_string()
}

/// `(seq, data)` of every SSE message in `buf` (ids are `<epoch>-<seq>`).
pub fn sse_events(buf: &[u8]) -> Vec<(u64, String)> {
    let text = String::from_utf8_lossy(buf);
    let mut out = Vec::new();
    let mut id = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("id: ") {
            id = v.trim().rsplit('-').next().and_then(|seq| seq.parse().ok());
        } else if let (Some(d), Some(i)) = (line.strip_prefix("data: "), id.take()) {
            out.push((i, d.to_string()));
        }
    }
    out
}
