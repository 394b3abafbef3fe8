//! Test harness: starts the real `myriad` binary on a free port and talks to it over
//! real sockets. Shared by the integration tests of this crate.
#![allow(dead_code)] // each test file uses a different part of the harness

pub mod bench;
pub mod channels;
pub mod cluster;
pub mod flood;
pub mod netns;
pub mod postgres;
pub mod pusher;
pub mod resume;
pub mod secured;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free port on loopback (bound and released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    /// The admin listener, when started with `--admin`.
    pub admin: Option<SocketAddr>,
}

impl Server {
    /// Starts `myriad serve --listen 127.0.0.1:0 --store memory` plus `extra` flags and
    /// waits for the line that names the bound address.
    pub fn start(extra: &[&str]) -> Server {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
        if !extra.contains(&"--store") {
            args.extend(["--store", "memory"]);
        }
        args.extend(extra);
        Server::start_args(&args)
    }

    pub fn start_args(args: &[&str]) -> Server {
        Server::start_marked(args, "listen=")
    }

    /// [`Server::start_args`] taking the addresses from the first log line that
    /// contains `marker` (a supervisor forwards its children's lines before its own).
    pub fn start_marked(args: &[&str], marker: &str) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_myriad"));
        cmd.args(args);
        Server::start_command(cmd, marker)
    }

    /// [`Server::start`] with `env` set for the server (its `MYRIAD_*` variables).
    pub fn start_env(extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_myriad"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--store", "memory"])
            .args(extra)
            .envs(env.iter().copied());
        Server::start_command(cmd, "listen=")
    }

    /// [`Server::start`] in a process that may open at most `nofile` descriptors
    /// (soft and hard: `serve` cannot raise it).
    pub fn start_nofile(nofile: u32, extra: &[&str]) -> Server {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &format!("ulimit -n {nofile} && exec \"$0\" \"$@\"")])
            .arg(env!("CARGO_BIN_EXE_myriad"))
            .args(["serve", "--listen", "127.0.0.1:0", "--store", "memory"])
            .args(extra);
        Server::start_command(cmd, "listen=")
    }

    /// `myriad` with `args` inside network namespace `ns` (`ip netns exec` execs it:
    /// the child is the server itself).
    pub fn start_in_netns(ns: &str, args: &[&str]) -> Server {
        Server::start_in_netns_marked(ns, args, "listen=")
    }

    /// [`Server::start_in_netns`] waiting for the line with `marker` (a supervisor's).
    pub fn start_in_netns_marked(ns: &str, args: &[&str], marker: &str) -> Server {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_myriad")])
            .args(args);
        Server::start_command(cmd, marker)
    }

    fn start_command(mut cmd: Command, marker: &str) -> Server {
        let mut child = spawn_logging(&mut cmd);
        let stderr = child.stderr.take().expect("piped stderr");
        let mut lines = BufReader::new(stderr).lines();
        let deadline = Instant::now() + Duration::from_secs(30);
        let (addr, admin) = loop {
            assert!(Instant::now() < deadline, "myriad did not start in 30 s");
            let line = match lines.next() {
                Some(Ok(line)) => line,
                _ => panic!("myriad exited before listening: {:?}", child.wait()),
            };
            let field = |name: &str| {
                let pos = line.find(name)?;
                let value = line[pos + name.len()..].split_whitespace().next()?;
                value.parse::<SocketAddr>().ok()
            };
            if line.contains(marker) && line.contains("listen=") {
                let addr = field("listen=").unwrap_or_else(|| panic!("bad address in {line:?}"));
                break (addr, field("admin="));
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe; a panic
        // or an error is shown with the test's output.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if line.contains("panicked") || line.contains("ERROR") {
                    eprintln!("server: {line}");
                }
            }
        });
        Server { child, addr, admin }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// One request on a fresh connection; returns (status, body).
    pub fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        parse_response(self.request_text(method, path, body).as_bytes())
    }

    /// The whole response to one request, head and body, as text.
    pub fn request_text(&self, method: &str, path: &str, body: &[u8]) -> String {
        let mut s = self.connect();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        // One write: a second small write would wait on Nagle and the delayed ACK.
        let mut request = head.into_bytes();
        request.extend_from_slice(body);
        s.write_all(&request).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    pub fn publish(&self, subject: u64, payload: &str) -> serde_json::Value {
        let (status, body) = self.request("POST", &format!("/pub/{subject}"), payload.as_bytes());
        assert_eq!(status, 200, "publish failed: {body}");
        serde_json::from_str(&body).expect("publish reply is JSON")
    }

    pub fn stats(&self) -> serde_json::Value {
        let (status, body) = self.request("GET", "/stats", b"");
        assert_eq!(status, 200);
        serde_json::from_str(&body).expect("stats are JSON")
    }

    /// `/stats` of this process's admin listener (`--admin` required): unlike the
    /// client listener's, it cannot land on another process sharing the port.
    pub fn admin_stats(&self) -> serde_json::Value {
        let admin = self.admin.expect("started with --admin");
        let mut s = TcpStream::connect(admin).expect("connect to admin");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /stats HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        let (status, body) = parse_response(&out);
        assert_eq!(status, 200, "admin /stats: {body}");
        serde_json::from_str(&body).expect("admin stats are JSON")
    }

    /// Waits until `/stats` satisfies `pred` (the server counts asynchronously).
    pub fn wait_stats(
        &self,
        what: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let stats = self.stats();
            if pred(&stats) {
                return stats;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; stats: {stats}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Resident set size of the server process, in bytes.
    pub fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Splits a whole response into (status, body), de-chunking if needed.
pub fn parse_response(raw: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(raw).into_owned();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|x| x.1.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Reads from `s` until `needle` has been seen (or panics after the read timeout).
pub fn read_until(s: &mut TcpStream, buf: &mut Vec<u8>, needle: &str) {
    if !read_until_or_closed(s, buf, needle) {
        panic!(
            "closed before {needle:?}; got {:?}",
            String::from_utf8_lossy(buf)
        );
    }
}

/// Reads from `s` until `needle` has been seen (true) or the server closed the
/// connection (false); panics after the read timeout.
pub fn read_until_or_closed(s: &mut TcpStream, buf: &mut Vec<u8>, needle: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !String::from_utf8_lossy(buf).contains(needle) {
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in {:?}",
            String::from_utf8_lossy(buf)
        );
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("read error {e}"),
        }
    }
    true
}

/// Opens a raw streaming subscription and waits for its welcome chunk.
pub fn subscribe_stream(server: &Server, user: u64) -> (TcpStream, Vec<u8>) {
    let mut s = server.connect();
    write!(s, "GET /sub/{user} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, &format!("welcome {user}"));
    (s, buf)
}

/// Reads everything until EOF (or the read timeout) and returns it.
pub fn read_all(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(_) => return out,
        }
    }
}

/// A running `curl -N` whose stdout lines are collected on a thread.
/// How long a curl client's next line may take (a token that ends ~10 s after it was
/// made, on a loaded machine, must fit).
const CURL_LINE: Duration = Duration::from_secs(20);

pub struct Curl {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Curl {
    pub fn start(args: &[&str]) -> Curl {
        let mut child = Command::new("curl")
            .args(["-sS", "-N", "--max-time", "60"])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("curl must be installed (apt-get install -y curl)");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Curl { child, lines }
    }

    /// Lines until one contains `needle` (inclusive), each within [`CURL_LINE`].
    pub fn until(&self, needle: &str) -> Vec<String> {
        let mut got = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(CURL_LINE)
                .unwrap_or_else(|_| panic!("curl: no line with {needle:?}; got {got:?}"));
            let done = line.contains(needle);
            got.push(line);
            if done {
                return got;
            }
        }
    }
}

impl Curl {
    /// The lines left until curl exits (the server ended the response).
    pub fn until_end(&self) -> Vec<String> {
        let deadline = Instant::now() + CURL_LINE;
        let mut got = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => got.push(line),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return got,
                Err(_) => panic!("curl: the response did not end; got {got:?}"),
            }
        }
    }
}

impl Drop for Curl {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A browser script of `tests/browser` (`clients.mjs`, `h2_clients.mjs`): node drives
/// headless Chromium (`$CHROMIUM`, default /usr/bin/chromium) through playwright-core
/// against `base` with `args`, with `HOME` set to `home` when given (a test CA's NSS
/// store). Fails with `install` when Chromium or playwright-core is missing.
pub struct BrowserScript {
    pub node: Child,
    /// The script's JSON lines, as it prints them.
    pub lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl BrowserScript {
    pub fn run(
        install: &str,
        script: &str,
        base: &str,
        args: &[&str],
        home: Option<&std::path::Path>,
    ) -> BrowserScript {
        let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        assert!(
            std::path::Path::new(&chromium).exists(),
            "{chromium} not found; {install}"
        );
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let playwright = dir.join("../../crates/observe/tests/browser");
        assert!(
            playwright.join("node_modules/playwright-core").is_dir(),
            "playwright-core not installed; {install}"
        );
        let mut cmd = Command::new("node");
        cmd.arg(dir.join("tests/browser").join(script))
            .arg(base)
            .args(args)
            .env("CHROMIUM", &chromium)
            .env("PLAYWRIGHT_PACKAGE_JSON", playwright.join("package.json"))
            .stdout(Stdio::piped());
        if let Some(home) = home {
            cmd.env("HOME", home);
        }
        let mut node = cmd.spawn().expect("node must be installed");
        let lines = BufReader::new(node.stdout.take().unwrap()).lines();
        BrowserScript { node, lines }
    }

    /// The script's next line; fails the test when it printed none.
    pub fn next_line(&mut self) -> String {
        self.lines
            .next()
            .expect("the browser script printed nothing more")
            .unwrap()
    }

    /// The script's last line (its result), once it exited successfully.
    pub fn result(mut self) -> serde_json::Value {
        let last = self.next_line();
        assert!(self.node.wait().unwrap().success(), "{last}");
        serde_json::from_str(&last).unwrap()
    }
}

/// `cmd` (a myriad process) spawned with plain-text info logs on a piped stderr, which
/// the harness reads addresses and events from, and stdout discarded.
pub fn spawn_logging(cmd: &mut Command) -> Child {
    cmd.env("MYRIAD_LOG", "info")
        .env("MYRIAD_LOG_FORMAT", "text")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn myriad")
}

/// A masked client WebSocket text frame (mask key 0: the payload as it is),
/// payload < 126 bytes.
pub fn client_text(text: &str) -> Vec<u8> {
    let mut f = vec![0x81, 0x80 | text.len() as u8, 0, 0, 0, 0];
    f.extend_from_slice(text.as_bytes());
    f
}

/// The next server WebSocket text frame on `s` (frames < 126 bytes; other frames
/// skipped), `buf` holding what was read past it.
pub fn server_text(s: &mut TcpStream, buf: &mut Vec<u8>) -> String {
    loop {
        if buf.len() >= 2 && buf.len() >= 2 + (buf[1] & 0x7f) as usize {
            let len = (buf[1] & 0x7f) as usize;
            let op = buf[0] & 0x0f;
            let payload: Vec<u8> = buf.drain(..2 + len).skip(2).collect();
            if op == 1 {
                return String::from_utf8(payload).unwrap();
            }
            continue;
        }
        let mut chunk = [0u8; 4096];
        let n = std::io::Read::read(s, &mut chunk).unwrap();
        assert!(n > 0, "closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `serve --processes N` (one loop per gateway, memory store, an admin listener)
/// with `extra` flags.
pub fn supervisor_args(nats: &str, processes: u32, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "serve",
        "--processes",
        &processes.to_string(),
        "--loops",
        "1",
        "--listen",
        "127.0.0.1:0",
        "--store",
        "memory",
        "--admin",
        "127.0.0.1:0",
        "--nats",
        nats,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// [`supervisor_args`] started, once the supervisor serves.
pub fn start_supervisor(nats: &str, processes: u32, extra: &[&str]) -> Server {
    let args = supervisor_args(nats, processes, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Server::start_marked(&args, "supervisor serving")
}
