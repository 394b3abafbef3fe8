//! `bench sprites` (issue 46): the load shape of the Node.js sprites server that
//! held a million long-polls, where every client also sends. N clients
//! (`load::sprites`) each hold a keep-alive long-poll and, on a keep-alive
//! connection of their own with their own JWT, throw a sprite every `--send-every`
//! seconds to a random other client (a client publish over HTTP), so the server
//! carries N / send-every publishes a second and their deliveries on top of
//! holding. One step of `--duration` seconds (at least 10 for a valid figure).
//!
//! Reports the holding cost (user-space bytes per held client, both its
//! connections: the server's RSS growth over the open), publishes per second
//! sustained against the offered rate, throw → receipt latency p50/p99/max, and
//! errors. One server process holds 2 N sockets, so N ≤ 9,000 under the 20,000-file
//! limit; larger runs need the supervised server (not built here).

use super::held::{base_url, Live, Probe};
use super::report::{bytes, count, met, ms, Report};
use super::{BenchArgs, Ctx};
use load::sprites::{Counters, SpritesArgs};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most clients one server process takes: two sockets each under the 20,000-file
/// limit, with room for the listener, the admin side and the probes.
pub const MAX_CLIENTS: u64 = 9_000;
/// Default clients of `sprites`.
pub const DEFAULT_CLIENTS: u64 = 9_000;
/// Connects per second while opening (both connections of a client count).
const CONNECT_RATE: f64 = 4_000.0;

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("sprites")?;
    let n = args.connections.unwrap_or(DEFAULT_CLIENTS).max(2);
    anyhow::ensure!(
        n <= MAX_CLIENTS,
        "sprites holds two sockets per client in one server process: at most \
         {MAX_CLIENTS} clients under the 20,000-file limit"
    );
    anyhow::ensure!(
        super::context::tls_ca().is_none(),
        "sprites speaks plain HTTP/1.1"
    );
    let every = args.send_every.max(0.01);
    let live = Live::new("sprites");
    let mut report = Report::new(
        "sprites",
        &format!(
            "{} long-poll clients, each throwing a sprite every {every} s to a random other \
             client with its own token",
            count(n as f64)
        ),
        &dir,
    );
    let secret = format!("sprites-bench-secret-{}", host::sys::unix_micros());
    let csv = dir.join("server.csv");
    // A sender is idle from its connect until the step starts, then `every` seconds
    // between throws: the keep-alive timeout must outlast both (a closed sender
    // connection is an error here, not a reconnect).
    let keepalive = format!("{}", (every * 3.0).ceil().max(180.0) as u64);
    let server = Arc::new(ctx.server(
        &csv,
        &["--jwt-secret", &secret, "--keepalive-timeout", &keepalive],
    )?);
    report.csvs.push(csv);
    let mut probe = Probe::new(vec![server.clone()]);
    let rss_idle = probe.rss();
    let addr = base_url(&server)
        .trim_start_matches("http://")
        .parse()
        .map_err(|e| anyhow::anyhow!("server address: {e}"))?;
    let sprites = SpritesArgs {
        addr,
        clients: n,
        send_every: every,
        secret,
        size: args.size,
        connect_rate: CONNECT_RATE,
    };
    let counters = Arc::new(Counters::default());
    let clients = {
        let c = counters.clone();
        std::thread::Builder::new()
            .name("sprites".into())
            .spawn(move || load::sprites::run(&sprites, c))?
    };
    // Open: every poll logged in and every sender connected.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let (p, s) = (
            counters.polling.load(Ordering::Relaxed),
            counters.senders.load(Ordering::Relaxed),
        );
        let sample = probe.sample();
        live.emit(format!(
            "opening: {} polling, {} senders, server {} connections, rss {}",
            count(p as f64),
            count(s as f64),
            count(sample.connections as f64),
            bytes(sample.rss as f64)
        ));
        if (p >= n && s >= n) || Instant::now() > deadline || clients.is_finished() {
            break;
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    let held = counters.polling.load(Ordering::Relaxed) + counters.senders.load(Ordering::Relaxed);
    let rss_held = probe.rss();
    // Throw for `--duration` seconds, a line a second.
    counters.take_latency();
    let (published0, received0) = (
        counters.published.load(Ordering::Relaxed),
        counters.received.load(Ordering::Relaxed),
    );
    let cpu0 = probe.cpu();
    let started = Instant::now();
    counters.throwing.store(true, Ordering::Relaxed);
    let mut total = load::sprites::new_histogram();
    while started.elapsed().as_secs_f64() < args.duration {
        std::thread::sleep(Duration::from_secs(1));
        let h = counters.take_latency();
        let sample = probe.sample();
        live.emit(format!(
            "{:>3.0} s: published {}, received {}, errors {} send / {} poll; \
             latency p50 {} p99 {} max {}; server cpu {:.0} %",
            started.elapsed().as_secs_f64(),
            count(counters.published.load(Ordering::Relaxed) as f64),
            count(counters.received.load(Ordering::Relaxed) as f64),
            counters.send_errors.load(Ordering::Relaxed),
            counters.poll_errors.load(Ordering::Relaxed),
            ms(h.value_at_quantile(0.5)),
            ms(h.value_at_quantile(0.99)),
            ms(h.max()),
            sample.cpu_pct,
        ));
        let _ = total.add(&h);
    }
    counters.throwing.store(false, Ordering::Relaxed);
    let window = started.elapsed().as_secs_f64();
    let cpu = (probe.cpu() - cpu0) / window * 100.0;
    // Let the last throws be answered and arrive before the books close.
    std::thread::sleep(Duration::from_secs(2));
    let published = counters.published.load(Ordering::Relaxed) - published0;
    let _ = total.add(counters.take_latency());
    let received = counters.received.load(Ordering::Relaxed) - received0;
    counters.stop.store(true, Ordering::Relaxed);
    let send_errors = counters.send_errors.load(Ordering::Relaxed);
    let poll_errors = counters.poll_errors.load(Ordering::Relaxed);
    match clients.join() {
        Ok(r) => r?,
        Err(_) => anyhow::bail!("the sprites clients' thread panicked"),
    }
    server.stop();

    let offered = n as f64 / every;
    let rate = published as f64 / window;
    let per_client = rss_held.saturating_sub(rss_idle) as f64 / (n as f64).max(1.0);
    report.row(
        "clients held (a long-poll and a sender each)",
        format!(
            "{} of {} connections",
            count(held as f64),
            count(2.0 * n as f64)
        ),
        "all",
        met(held == 2 * n),
    );
    report.fact(
        "holding cost, user space per client (two connections, tokens checked)",
        format!("{per_client:.0} B"),
    );
    report.row(
        "publishes/s sustained (client publishes over HTTP)",
        format!("{} of {} offered", count(rate), count(offered)),
        "≥ 95 % of offered",
        met(rate >= 0.95 * offered),
    );
    report.row(
        "sprites received / published",
        format!("{} / {}", count(received as f64), count(published as f64)),
        "all",
        met(received >= published && published > 0),
    );
    report.row(
        "throw → receipt latency p99",
        ms(total.value_at_quantile(0.99)),
        "≤ 50 ms",
        met(!total.is_empty() && total.value_at_quantile(0.99) <= 50_000),
    );
    report.fact(
        "latency p50 / max",
        format!("{} / {}", ms(total.value_at_quantile(0.5)), ms(total.max())),
    );
    report.row(
        "errors (sends refused or failed / polls failed)",
        format!("{send_errors} / {poll_errors}"),
        "0",
        met(send_errors == 0 && poll_errors == 0),
    );
    report.fact("server CPU while throwing", format!("{cpu:.1} % of a core"));
    report.row(
        "step length",
        format!("{window:.0} s"),
        "≥ 10 s",
        met(window >= 10.0),
    );
    report.note(format!(
        "Each client is user k of 1..{n}: GET /poll/k?token=… (keep-alive, from the last \
         answer's since) and, on its own keep-alive connection, POST /pub/<random other> \
         with Authorization: Bearer <its token, pub claim 1-{n}>, {}-byte payloads stamped \
         ts=<µs>. Latency is stamp to the poll answer's parse, clients and server on one box.",
        args.size
    ));
    report.live = live.lines();
    Ok(report)
}
