//! `bench abuse`: what hostile clients cost honest ones. N honest subscribers (one
//! user holding N connections) receive a broadcast at `--latency-rate` msg/s in
//! three phases of `--latency-secs` each: clean, under abuse, clean again. Per
//! phase: the honest subscribers' latency p50/p99/max over every delivery, the
//! deliveries received against expected, and the server's peak RSS.
//!
//! The abuse (one thread per case, all at once, each bounded in rounds and time and
//! stopped with the phase) is the hostile suite's cases (`tests/hostile.rs`,
//! `tests/bounded.rs`): [`Case`]. Plain HTTP only (`--tls` is refused).

use super::held::{flood_args, post, sub_url, Held, Live, Probe};
use super::ladder;
use super::report::{bytes, count, met, ms, Report};
use super::{BenchArgs, Ctx};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The honest subscribers' user (it receives the broadcast).
const SUBJECT: u64 = 1;
/// Users the abusers subscribe as or publish to (never the honest one).
const ABUSED: u64 = 900_000;
/// Rounds per abuser at most (each round is one short attack).
const MAX_ROUNDS: u64 = 1_000_000;
/// Socket timeouts of the abusers: no attack waits on the server longer.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// Bytes of a "fat" message sent to slow readers and kept in history for polls.
const FAT: usize = 60_000;

/// The hostile cases, each run by one thread in a loop.
#[derive(Clone, Copy, Debug)]
enum Case {
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
}

const CASES: [Case; 8] = [
    Case::SlowReaders,
    Case::PipelinedPolls,
    Case::PingFlood,
    Case::OversizedBodies,
    Case::MalformedHeads,
    Case::BadTokens,
    Case::HalfHandshakes,
    Case::AbruptDisconnects,
];

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    anyhow::ensure!(!args.tls, "bench abuse: the abusers speak plain HTTP only");
    let dir = ctx.dir("abuse")?;
    let n = args.connections();
    let mut report = Report::new(
        "abuse",
        &format!(
            "{} honest subscribers at {} msg/s: clean, under {} hostile cases, clean again",
            count(n as f64),
            args.latency_rate,
            CASES.len()
        ),
        &dir,
    );
    let live = Live::new("abuse");
    let csv = dir.join("server.csv");
    let server = Arc::new(ctx.server(&csv, &[])?);
    report.csvs.push(csv);
    let flood_csv = dir.join("flood.csv");
    let mut fa = flood_args(
        vec![sub_url(&server)],
        n,
        load::flood::Transport::Stream,
        Some(flood_csv.clone()),
    );
    fa.users = Some(format!("{SUBJECT}-{SUBJECT}"));
    let held = Held::start(fa, live.clone(), vec![server.clone()]);
    let open = held.wait_open(n, Duration::from_secs(120));
    report.row(
        "honest subscribers connected",
        format!("{} of {}", count(open as f64), count(n as f64)),
        "all",
        met(open == n),
    );
    // Fat history for the pipelined polls to ask for.
    for _ in 0..4 {
        post(&server, &format!("/pub/{}", ABUSED + 7), &vec![b'h'; FAT])?;
    }
    let mut phases = Vec::new();
    for (name, abuse) in [
        ("clean", false),
        ("under abuse", true),
        ("clean again", false),
    ] {
        live.emit(format!("---- {name}: {} s ----", args.latency_secs));
        let stop = Arc::new(AtomicBool::new(false));
        let counters: Vec<Arc<AtomicU64>> = CASES.iter().map(|_| Arc::default()).collect();
        let abusers: Vec<_> = if abuse {
            CASES
                .iter()
                .zip(&counters)
                .map(|(&case, done)| {
                    let (stop, done, addr) = (stop.clone(), done.clone(), server.addr);
                    std::thread::spawn(move || abuser(case, addr, &stop, &done))
                })
                .collect()
        } else {
            Vec::new()
        };
        let phase = measure(args, &held, &server, &live, open)?;
        stop.store(true, Ordering::Relaxed);
        for a in abusers {
            let _ = a.join();
        }
        if abuse {
            let done: Vec<String> = CASES
                .iter()
                .zip(&counters)
                .map(|(c, k)| format!("{c:?} {}", count(k.load(Ordering::Relaxed) as f64)))
                .collect();
            report.fact("hostile rounds run (each case)", done.join(", "));
        }
        phases.push((name, phase));
    }
    let open_after = held.open();
    held.finish()?;
    server.stop();
    report.csvs.push(flood_csv);
    let clean = &phases[0].1;
    for (name, p) in &phases {
        report.row(
            &format!("honest latency p50 / p99 / max ({name})"),
            format!("{} / {} / {}", ms(p.p50), ms(p.p99), ms(p.max)),
            "under abuse: p99 ≤ 2 × clean",
            if *name == "under abuse" {
                met(p.p99 <= 2 * clean.p99.max(1_000))
            } else {
                "—".into()
            },
        );
        report.row(
            &format!("honest deliveries received / expected ({name})"),
            format!(
                "{} / {}",
                count(p.received as f64),
                count(p.expected as f64)
            ),
            "all",
            met(p.expected > 0 && p.received >= p.expected),
        );
        report.fact(
            &format!("server RSS peak ({name})"),
            bytes(p.rss_peak as f64),
        );
    }
    report.row(
        "honest subscribers still connected at the end",
        format!("{} of {}", count(open_after as f64), count(open as f64)),
        "all",
        met(open_after == open),
    );
    report.note(
        "Every hostile case runs in its own thread for the whole abuse phase, one short \
         attack per round (see `crates/myriad/src/bench/abuse.rs`). The server runs in open \
         mode (no JWT, API on loopback), so bad tokens cost a parse, not a signature check.",
    );
    report.live = live.lines();
    Ok(report)
}

/// One phase's figures.
struct Phase {
    p50: u64,
    p99: u64,
    max: u64,
    received: u64,
    expected: u64,
    rss_peak: u64,
}

/// Publishes the broadcast for `--latency-secs` while sampling RSS each second.
fn measure(
    args: &BenchArgs,
    held: &Held,
    server: &Arc<crate::server_process::ServerProcess>,
    live: &Live,
    open: u64,
) -> anyhow::Result<Phase> {
    held.take_hist();
    let before = held.messages();
    let publishing = {
        let (addr, rate, secs, size) =
            (server.addr, args.latency_rate, args.latency_secs, args.size);
        std::thread::spawn(move || ladder::publish(addr, SUBJECT, rate, secs, size))
    };
    let mut probe = Probe::new(vec![server.clone()]);
    let mut rss_peak = 0;
    while !publishing.is_finished() {
        std::thread::sleep(Duration::from_secs(1));
        let s = probe.sample();
        live.line(None, &s);
        rss_peak = rss_peak.max(s.rss);
    }
    let sent = publishing
        .join()
        .map_err(|_| anyhow::anyhow!("publisher panicked"))??;
    held.wait_quiet(Duration::from_secs(10));
    let h = held.take_hist();
    let q = |x: f64| {
        if h.is_empty() {
            0
        } else {
            h.value_at_quantile(x)
        }
    };
    Ok(Phase {
        p50: q(0.5),
        p99: q(0.99),
        max: h.max(),
        received: held.messages() - before,
        expected: sent.sent * open,
        rss_peak,
    })
}

/// Runs `case` until `stop` (or [`MAX_ROUNDS`]), counting rounds in `done`.
fn abuser(case: Case, addr: SocketAddr, stop: &AtomicBool, done: &AtomicU64) {
    for round in 0..MAX_ROUNDS {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        // Errors are the point (the server refuses, resets, times out): ignored.
        let _ = attack(case, addr, round, stop);
        done.fetch_add(1, Ordering::Relaxed);
    }
}

fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(s)
}

/// Reads what the server says until it closes or goes quiet (bounded by the timeout).
fn drain(s: &mut TcpStream) {
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

fn request(s: &mut TcpStream, head: &str, body: &[u8]) -> std::io::Result<()> {
    s.write_all(head.as_bytes())?;
    s.write_all(body)
}

fn attack(case: Case, addr: SocketAddr, round: u64, stop: &AtomicBool) -> std::io::Result<()> {
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
    }
    Ok(())
}
