//! `bench connect`: connect storms measured on the server's side. Each of `--rounds`
//! storms opens `--connections` at once from `--flood-procs` flood processes (one flood
//! process tops out near one core, so a single one would be the limit), then closes
//! them all. A thread polls the server's `/stats` `connects` counter every
//! [`POLL`]; the storm's accept rate is the connections accepted between the first
//! and the last poll that saw the counter move, over that time. `--peer` runs the
//! storms against a peer server (its /stats counts connects too).
//!
//! Not here: memory per connection (see `idle`).

use super::held::{flood_args, sub_url, Held, Live};
use super::report::{count, met, Report};
use super::{BenchArgs, Ctx};
use crate::server_process::ServerProcess;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the server's accept counter is read during a storm.
const POLL: Duration = Duration::from_millis(20);
/// Longest a storm may take to open every connection.
const OPEN_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for the server to see every connection of a storm closed.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);
/// Flood processes of a storm unless `--flood-procs` says otherwise.
const DEFAULT_PROCS: u32 = 4;
/// The SPEC's connect-storm target, accepts per second.
const TARGET: f64 = 30_000.0;

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("connect")?;
    let n = args.connections();
    let procs = args.flood_procs.unwrap_or(DEFAULT_PROCS).max(1);
    let live = Live::new("connect");
    let server_name = super::peer::server_name(args.peer);
    let mut report = Report::new(
        "connect",
        &format!(
            "{} rounds of {} connects from {procs} flood processes, {server_name}",
            args.rounds,
            count(n as f64)
        ),
        &dir,
    );
    let (server, server_csv) = ctx.server_or_peer(args.peer, &dir, &dir.join("server.csv"))?;
    let server = Arc::new(server);
    report.csvs.extend(server_csv);
    let mut rates = Vec::new();
    let mut client_pct = Vec::new();
    let mut failed = 0;
    for round in 1..=args.rounds.max(1) {
        let mut fa = flood_args(vec![sub_url(&server)], n, args.transport()?, None);
        fa.procs = procs.to_string();
        let base = connects(&server);
        let stop = Arc::new(AtomicBool::new(false));
        let poller = {
            let (server, stop) = (server.clone(), stop.clone());
            std::thread::spawn(move || poll_accepts(&server, base, n, &stop))
        };
        let started = Instant::now();
        let held = Held::start(fa, live.clone(), vec![server.clone()]);
        let open = held.wait_open(n, OPEN_TIMEOUT);
        stop.store(true, Ordering::Relaxed);
        let rate = poller
            .join()
            .map_err(|_| anyhow::anyhow!("poller panicked"))?;
        let storm_secs = started.elapsed().as_secs_f64();
        // The flood processes are children: their CPU comes with flood's ticks.
        client_pct.push(held.peak_client_cpu() as f64);
        let summary = held.finish()?;
        failed += summary.failed;
        live.emit(format!(
            "round {round}: {open} open in {storm_secs:.1} s, server accepted {:.0}/s, flood saw {:.0}/s, failed: {}",
            rate,
            summary.connect_rate,
            summary.failures.describe()
        ));
        rates.push(rate);
        wait_closed(&server);
    }
    let mut sorted = rates.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let best = sorted[sorted.len() - 1];
    report.row(
        "server accepts per second (median of the storms)",
        format!("{}/s (best {}/s)", count(median), count(best)),
        "≥ 30,000/s",
        met(median >= TARGET),
    );
    report.fact(
        "every storm, accepts/s",
        rates
            .iter()
            .map(|r| count(*r))
            .collect::<Vec<_>>()
            .join(", "),
    );
    report.row(
        "failed connection attempts",
        count(failed as f64),
        "0",
        met(failed == 0),
    );
    report.fact(
        "client CPU per storm (flood processes' busiest second, % of a core)",
        client_pct
            .iter()
            .map(|c| format!("{c:.0}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    report.note(format!(
        "Each storm: {procs} flood processes open {} connections as fast as they can, \
         from 8 loopback source addresses; the server's /stats `connects` counter is \
         read every {} ms and the rate is taken from its first to its last movement.",
        count(n as f64),
        POLL.as_millis()
    ));
    report.live = live.lines();
    Ok(report)
}

/// The server's accepted-connections counter.
fn connects(server: &ServerProcess) -> u64 {
    server
        .stats()
        .ok()
        .and_then(|s| s["connects"].as_u64())
        .unwrap_or(0)
}

/// Polls the counter until `n` more than `base` were accepted (or `stop`); returns the
/// accepts per second between the first and the last poll that saw it move. Each poll
/// is itself one accepted connection, subtracted.
fn poll_accepts(server: &ServerProcess, base: u64, n: u64, stop: &AtomicBool) -> f64 {
    let mut first: Option<(Instant, u64)> = None;
    let mut last = (Instant::now(), base);
    let mut polls = 0u64;
    let deadline = Instant::now() + OPEN_TIMEOUT;
    loop {
        let c = connects(server).saturating_sub(polls);
        polls += 1;
        let now = Instant::now();
        if c > last.1 {
            if first.is_none() {
                // The storm began within the previous poll interval: count from its start.
                first = Some((last.0, last.1));
            }
            last = (now, c);
        }
        if c >= base + n || stop.load(Ordering::Relaxed) || now > deadline {
            break;
        }
        std::thread::sleep(POLL);
    }
    match first {
        Some((t0, c0)) => (last.1 - c0) as f64 / last.0.duration_since(t0).as_secs_f64().max(1e-3),
        None => 0.0,
    }
}

/// Waits until the server holds no connection but the asking one (the storm's are gone),
/// so the next storm starts from an empty server.
fn wait_closed(server: &ServerProcess) {
    let until = Instant::now() + CLOSE_TIMEOUT;
    while Instant::now() < until {
        let conns = server
            .stats()
            .ok()
            .and_then(|s| s["connections"].as_u64())
            .unwrap_or(0);
        // The /stats request itself is the one connection left.
        if conns <= 1 {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
