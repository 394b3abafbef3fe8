//! The hostile cases of `bench abuse` ([`Case`], the hostile suite's cases:
//! `tests/hostile/`, `tests/bounded.rs`) and the process that runs them: the
//! scenario starts `myriad bench abuse --abusers-at ADDR` as a child ([`Abusers`]),
//! so the abusers' CPU is not spent in the process that receives the honest
//! deliveries and measures their latency. The child runs one thread per case, each
//! bounded in rounds and time, until its stdin closes; then it prints its rounds per
//! case and its own CPU time as one JSON line.
//!
//! Over TLS (`bench abuse --tls`) every abuser finishes a TLS handshake first (a
//! blocking rustls client, [`load::dial`]) and its raw bytes travel inside records:
//! the same HTTP-level attacks, now also paying for sealing and opening on the server.

use load::dial::{Conn, Dialer};
use std::io::{BufRead, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

/// Users the abusers subscribe as or publish to (never the honest one).
pub const ABUSED: u64 = 900_000;
/// Rounds per abuser at most (each round is one short attack).
const MAX_ROUNDS: u64 = 1_000_000;
/// Socket timeouts of the abusers: no attack waits on the server longer.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// Bytes of a "fat" message sent to slow readers and kept in history for polls.
pub const FAT: usize = 60_000;

/// The hostile cases, each run by one thread in a loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Case {
    /// SSE subscribers that never read, sent fat messages until the slow policy acts.
    SlowReaders,
    /// 200 pipelined `GET /poll/<id>?since=0` over fat history, never read.
    PipelinedPolls,
    /// WebSocket pings written as fast as the server reads them, pongs never read.
    PingFlood,
    /// `POST /pub` bodies over `--max-message`, and batch items over it.
    OversizedBodies,
    /// Garbage request lines, bare LF, duplicate Host, over-long heads.
    MalformedHeads,
    /// Tokens that are not JWTs on subscriptions and API calls.
    BadTokens,
    /// WebSocket handshakes cut in the middle of the head, held open.
    HalfHandshakes,
    /// Subscriptions dropped right after the request, before any answer is read.
    AbruptDisconnects,
    /// HTTP/2 (TLS only): 16 KB header blocks of empty Huffman strings, 200 a connection.
    H2HuffmanBomb,
    /// HTTP/2 (TLS only): subscriptions opened and reset at once, 1,000 a connection.
    H2RapidReset,
    /// HTTP/2 (TLS only): a header block continued in 1 KB CONTINUATION frames forever.
    H2ContinuationFlood,
    /// HTTP/2 (TLS only): SETTINGS and PING frames, 2,000 each a connection.
    H2ControlFlood,
}

/// The HTTP/2 cases, run when the scenario speaks TLS (`bench abuse --tls`).
pub const H2_CASES: [Case; 4] = [
    Case::H2HuffmanBomb,
    Case::H2RapidReset,
    Case::H2ContinuationFlood,
    Case::H2ControlFlood,
];

pub const CASES: [Case; 8] = [
    Case::SlowReaders,
    Case::PipelinedPolls,
    Case::PingFlood,
    Case::OversizedBodies,
    Case::MalformedHeads,
    Case::BadTokens,
    Case::HalfHandshakes,
    Case::AbruptDisconnects,
];

/// The abusers' child process, seen from the scenario.
pub struct Abusers {
    child: Child,
    stdin: Option<ChildStdin>,
}

/// What the child reports when it stops.
#[derive(Default)]
pub struct Done {
    /// Rounds run, one count per case asked for, in that order.
    pub rounds: Vec<u64>,
    /// The child's CPU time (user + system), seconds.
    pub cpu_secs: f64,
}

impl Abusers {
    /// Starts `myriad bench abuse --abusers-at ADDR --abuse-case …` (this executable);
    /// `ca`: the server speaks TLS with this certificate (`--abusers-ca`).
    pub fn start(addr: SocketAddr, cases: &[Case], ca: Option<PathBuf>) -> anyhow::Result<Abusers> {
        let mut cmd = Command::new(std::env::current_exe().context("cannot find this executable")?);
        cmd.args(["bench", "abuse", "--abusers-at", &addr.to_string()]);
        if let Some(ca) = ca {
            cmd.arg("--abusers-ca").arg(ca);
        }
        for c in cases {
            cmd.arg("--abuse-case").arg(
                clap::ValueEnum::to_possible_value(c)
                    .expect("no skipped case")
                    .get_name(),
            );
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start the abusers' process")?;
        let stdin = child.stdin.take();
        Ok(Abusers { child, stdin })
    }

    /// Stops the child (its stdin closes) and reads what it did.
    pub fn finish(mut self) -> anyhow::Result<Done> {
        drop(self.stdin.take());
        let mut line = String::new();
        if let Some(out) = self.child.stdout.take() {
            std::io::BufReader::new(out).read_line(&mut line)?;
        }
        let status = self.child.wait()?;
        anyhow::ensure!(status.success(), "the abusers' process failed: {status}");
        let v: serde_json::Value =
            serde_json::from_str(&line).with_context(|| format!("abusers' report: {line:?}"))?;
        Ok(Done {
            rounds: v["rounds"]
                .as_array()
                .map(|a| a.iter().filter_map(|k| k.as_u64()).collect())
                .unwrap_or_default(),
            cpu_secs: v["cpu_secs"].as_f64().unwrap_or(0.0),
        })
    }
}

impl Drop for Abusers {
    fn drop(&mut self) {
        // Still running only when the scenario failed half-way.
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The child: runs `cases` against `addr` (over TLS trusting `ca` if given) until
/// stdin closes, then prints [`Done`].
pub fn run_child(addr: SocketAddr, cases: &[Case], ca: Option<PathBuf>) -> anyhow::Result<()> {
    let (dialer, h2) = match ca {
        Some(ca) => {
            let roots = tls::Roots::CaFile(ca);
            let url = format!("https://{addr}");
            (
                Dialer::new(&url, &roots)?,
                Some(Dialer::with_alpn(&url, &roots, &[tls::Alpn::H2])?),
            )
        }
        None => (
            Dialer::new(&format!("http://{addr}"), &tls::Roots::System)?,
            None,
        ),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let counters: Vec<Arc<AtomicU64>> = cases.iter().map(|_| Arc::default()).collect();
    let threads: Vec<std::thread::JoinHandle<()>> = cases
        .iter()
        .zip(&counters)
        .map(|(&case, done)| {
            let (stop, done) = (stop.clone(), done.clone());
            let dialer = match (h2::is_h2(case), &h2) {
                (true, Some(h2)) => h2.clone(),
                (true, None) => return Err(anyhow::anyhow!("{case:?} needs TLS (--tls)")),
                (false, _) => dialer.clone(),
            };
            Ok(std::thread::spawn(move || {
                abuser(case, &dialer, &stop, &done)
            }))
        })
        .collect::<anyhow::Result<_>>()?;
    // EOF (the scenario closed the pipe or died) ends the phase.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let (user, system) = host::sys::cpu_times();
    let rounds: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let done = serde_json::json!({ "rounds": rounds, "cpu_secs": (user + system).as_secs_f64() });
    println!("{done}");
    Ok(())
}

/// Runs `case` until `stop` (or [`MAX_ROUNDS`]), counting rounds in `done`.
fn abuser(case: Case, addr: &Dialer, stop: &AtomicBool, done: &AtomicU64) {
    for round in 0..MAX_ROUNDS {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        // Errors are the point (the server refuses, resets, times out): ignored.
        let _ = attack(case, addr, round, stop);
        done.fetch_add(1, Ordering::Relaxed);
    }
}

/// A connection with [`IO_TIMEOUT`] on connect, reads and writes (TLS: handshake done).
fn connect(addr: &Dialer) -> std::io::Result<Conn> {
    addr.connect(IO_TIMEOUT).map_err(std::io::Error::other)
}

/// Reads what the server says until it closes or goes quiet (bounded by the timeout).
fn drain(s: &mut Conn) {
    let mut buf = [0u8; 16 * 1024];
    while matches!(s.read(&mut buf), Ok(k) if k > 0) {}
}

/// Sleeps up to `d`, waking early on `stop`.
fn hold(d: Duration, stop: &AtomicBool) {
    let until = Instant::now() + d;
    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn request(s: &mut Conn, head: &str, body: &[u8]) -> std::io::Result<()> {
    s.write_all(head.as_bytes())?;
    s.write_all(body)
}

fn attack(case: Case, addr: &Dialer, round: u64, stop: &AtomicBool) -> std::io::Result<()> {
    let user = ABUSED + (round % 16);
    match case {
        Case::SlowReaders => {
            let mut readers = Vec::new();
            for i in 0..8 {
                let mut s = connect(addr)?;
                request(
                    &mut s,
                    &format!("GET /sse/{} HTTP/1.1\r\nHost: a\r\n\r\n", ABUSED + 100 + i),
                    b"",
                )?;
                readers.push(s);
            }
            let fat = vec![b'f'; FAT];
            for k in 0..40 {
                let mut p = connect(addr)?;
                let target = ABUSED + 100 + k % 8;
                request(
                    &mut p,
                    &format!("POST /pub/{target} HTTP/1.1\r\nHost: a\r\nContent-Length: {FAT}\r\nConnection: close\r\n\r\n"),
                    &fat,
                )?;
                drain(&mut p);
            }
            hold(Duration::from_millis(500), stop);
        }
        Case::PipelinedPolls => {
            let mut s = connect(addr)?;
            let one = format!(
                "GET /poll/{}?since=0 HTTP/1.1\r\nHost: a\r\n\r\n",
                ABUSED + 7
            );
            s.write_all(one.repeat(200).as_bytes())?;
            hold(Duration::from_secs(1), stop);
        }
        Case::PingFlood => {
            let mut s = connect(addr)?;
            request(
                &mut s,
                &format!(
                    "GET /ws/{user} HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                     Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
                ),
                b"",
            )?;
            // Masked pings (mask 0), written until the server stops reading.
            let pings = [0x89u8, 0x80, 0, 0, 0, 0].repeat(4096);
            let until = Instant::now() + Duration::from_secs(2);
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                s.write_all(&pings)?;
            }
        }
        Case::OversizedBodies => {
            let mut s = connect(addr)?;
            request(
                &mut s,
                &format!(
                    "POST /pub/{user} HTTP/1.1\r\nHost: a\r\nContent-Length: 10000000\r\n\r\n"
                ),
                &vec![b'x'; 100_000],
            )?;
            drain(&mut s);
            let item = format!(
                "{{\"subject\":{user},\"data\":\"{}\"}}\n",
                "y".repeat(70_000)
            );
            let mut s = connect(addr)?;
            request(
                &mut s,
                &format!("POST /pub HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", item.len()),
                item.as_bytes(),
            )?;
            drain(&mut s);
        }
        Case::MalformedHeads => {
            let long = format!(
                "GET /sub/{user} HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
                "z".repeat(20_000)
            );
            for bad in [
                "GARBAGE\r\n\r\n".to_string(),
                format!("GET /sub/{user} HTTP/1.1\nHost: a\n\n"),
                format!("GET /sub/{user} HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
                "GET /sub/x HTTP/9.9\r\n\r\n".to_string(),
                long,
            ] {
                let mut s = connect(addr)?;
                let _ = s.write_all(bad.as_bytes());
                drain(&mut s);
            }
        }
        Case::BadTokens => {
            let mut s = connect(addr)?;
            request(&mut s, &format!("GET /sub/{user}?token=not.a.jwt HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"), b"")?;
            let mut head = [0u8; 512];
            let _ = s.read(&mut head);
            let mut s = connect(addr)?;
            request(
                &mut s,
                "GET /stats HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer eyJhbGciOiJub25lIn0.e30.\r\nConnection: close\r\n\r\n",
                b"",
            )?;
            drain(&mut s);
        }
        Case::HalfHandshakes => {
            let mut held = Vec::new();
            for _ in 0..20 {
                let mut s = connect(addr)?;
                s.write_all(
                    format!("GET /ws/{user} HTTP/1.1\r\nHost: a\r\nUpgrade: webso").as_bytes(),
                )?;
                held.push(s);
            }
            hold(Duration::from_secs(2), stop);
        }
        Case::AbruptDisconnects => {
            for _ in 0..20 {
                let mut s = connect(addr)?;
                s.write_all(format!("GET /sse/{user} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes())?;
                drop(s);
            }
        }
        h2_case => {
            let mut s = connect(addr)?;
            s.write_all(&h2::attack(h2_case, user))?;
            drain(&mut s);
        }
    }
    Ok(())
}

/// The HTTP/2 cases' bytes: raw frames, each attack written whole after the preface.
mod h2 {
    use super::Case;

    pub fn is_h2(case: Case) -> bool {
        super::H2_CASES.contains(&case)
    }

    fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        out.extend_from_slice(&[kind, flags]);
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
    }

    /// `GET path` as a header block: a table size update to 0 (what our SETTINGS asks),
    /// `:method GET`, `:scheme https` (static), `:authority` and `:path` literals.
    fn get(path: &str) -> Vec<u8> {
        let mut b = vec![0x20, 0x82, 0x87, 0x01, 1, b'a', 0x04, path.len() as u8];
        b.extend_from_slice(path.as_bytes());
        b
    }

    pub fn attack(case: Case, user: u64) -> Vec<u8> {
        let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        frame(&mut out, 4, 0, 0, &[]);
        frame(&mut out, 4, 1, 0, &[]);
        match case {
            Case::H2HuffmanBomb => {
                let mut bomb = vec![0x20];
                bomb.extend_from_slice(&b"\x00\x80\x80".repeat(5460));
                for i in 0..200 {
                    frame(&mut out, 1, 0x5, 1 + 2 * i, &bomb);
                }
            }
            Case::H2RapidReset => {
                for i in 0..1000u32 {
                    let block = get(&format!("/sse/{}", user + u64::from(i % 16)));
                    frame(&mut out, 1, 0x5, 1 + 2 * i, &block);
                    frame(&mut out, 3, 0, 1 + 2 * i, &8u32.to_be_bytes());
                }
            }
            Case::H2ContinuationFlood => {
                frame(&mut out, 1, 0, 1, &get(&format!("/sse/{user}")));
                let piece = b"\x40\x01a\x01b".repeat(200);
                for _ in 0..100 {
                    frame(&mut out, 9, 0, 1, &piece);
                }
            }
            Case::H2ControlFlood => {
                for _ in 0..2000 {
                    frame(&mut out, 4, 0, 0, &[]);
                    frame(&mut out, 6, 0, 0, b"abusive!");
                }
            }
            _ => unreachable!("only the HTTP/2 cases"),
        }
        out
    }
}
