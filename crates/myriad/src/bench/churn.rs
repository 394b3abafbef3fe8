//! `bench churn`: connections opening and closing continuously for `--duration` s.
//! `--flood-procs` workers ([`DEFAULT_WORKERS`]) run in parallel, each repeating a
//! cycle in a flood child process of its own (so the bench process, which samples
//! the server, never competes with them for a core): open N / workers connections,
//! hold [`HOLD_SECS`], close them all. With `--churn-rate` the cycles are paced: each
//! worker starts one every N / rate s on a fixed grid (staggered by a share of that
//! period, so opens and closes overlap evenly) and opens at [`OPEN_SPEEDUP`] × its
//! share of the rate, which leaves the rest of the period for the hold, the close
//! and the child's start-up: the connects average exactly the rate asked while every
//! cycle fits in its period (cycles that did not are counted; one more than half a
//! period late gives up its next slot). Connects/s and closes/s come from
//! the server's counters, errors from flood; memory is sampled each second, and again
//! `--settle` s after the end. `--servers N`: the server is one supervisor of a
//! router and N gateway processes (`serve --processes N`, over a NATS server of its
//! own), which hold more files than one process may.
//!
//! The soak (issue 10): `--churn-rate 5000 --duration 3600` with
//! `--churn-publish-rate` publishing to random churning users meanwhile; every
//! `--sample-every` s (60) the server's RSS and open file descriptors go into a table
//! and `soak.csv` ([`super::soak`]); each interval after `--soak-warmup` must stay
//! within ±5 % of their median, and errors
//! (connect and publish) must be 0. History grows until every ring is full (a churning
//! user is back long before `--history-ttl`), so a soak bounds it with
//! `--server-flag=--history=N` and a warm-up that covers the filling.

use super::churn_presence::{list_rows, Listers};
use super::churn_watch::{judge, Watchers, Worker};
use super::held::{sub_url, watch, Live, Probe};
use super::report::{bytes, count, met, Report};
use super::soak::{open_fds, Soak, FD_READINGS_PER_S};
use super::{BenchArgs, Ctx};
use load::flood::FloodArgs;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Workers (each one flood child process at a time) unless `--flood-procs` says.
const DEFAULT_WORKERS: u32 = 4;
/// Seconds each cycle holds its connections.
const HOLD_SECS: f64 = 0.5;
/// A paced cycle opens this many times faster than its share of `--churn-rate`, so
/// the open takes 1 / OPEN_SPEEDUP of the period and the hold, close and start-up fit
/// in the rest.
const OPEN_SPEEDUP: f64 = 2.5;
/// Source addresses per worker (each gets its own port range: client-side TIME_WAIT
/// sockets pile up at thousands of closes per second).
const SOURCES_PER_WORKER: u64 = 8;
/// Longest one cycle's flood child may run.
const CYCLE_MAX_SECS: f64 = 120.0;
/// RSS growth from the end of the first quarter to the end that still counts as stable
/// (the bench's own criterion; the SPEC has none for churn).
const STABLE_GROWTH: f64 = 0.10;

// With `--churn-rooms`: `--churn-held` members (10,000) of one more channel, held
// through the churn, whose `GET /presence/<channel>` is timed meanwhile (issue 42:
// ≤ 10 ms p99).
/// Their channel, and their first user id (apart from the churning users).
const HELD_CHANNEL: &str = "presence-bench";
const HELD_FIRST_USER: u64 = 10_000_000;

/// A supervised server's router's admin listener, from the supervisor's `/stats`.
fn router_admin(server: &crate::server_process::ServerProcess) -> Option<std::net::SocketAddr> {
    let stats = server.stats().ok()?;
    let router = stats["processes"]
        .as_array()?
        .iter()
        .find(|p| p["role"] == "router")?;
    router["admin"].as_str()?.parse().ok()
}

/// What the workers counted.
#[derive(Default)]
struct Tally {
    /// Per worker: cycles with its even and odd user sets, and failed connects
    /// (the join/leave check's truth).
    per_worker: Vec<[AtomicU64; 3]>,
    cycles: AtomicU64,
    /// Paced cycles that took longer than their period (the rate was not kept).
    late: AtomicU64,
    failed: AtomicU64,
    opened: AtomicU64,
}

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("churn")?;
    let n = args.connections();
    let workers_n = u64::from(args.flood_procs.unwrap_or(DEFAULT_WORKERS).max(1));
    let per = n.div_ceil(workers_n);
    let live = Live::new("churn");
    let mut report = Report::new(
        "churn",
        &format!(
            "{workers_n} flood processes × {} connections opening and closing for {} s",
            count(per as f64),
            args.duration
        ),
        &dir,
    );
    let server_csv = dir.join("server.csv");
    let held_transport = args.transport()?;
    let held_n = args.churn_held.max(1);
    let cap = held_n.to_string();
    // The admin listener answers the list too (off the loops); TLS and a
    // supervisor add it already.
    let admin: &[&str] = match (super::context::scheme(), args.servers) {
        ("http", None) => &["--admin", "127.0.0.1:0"],
        _ => &[],
    };
    let with_rooms = [&["--max-presence-members", cap.as_str()][..], admin].concat();
    let extra: &[&str] = match args.churn_rooms {
        0 => &[],
        _ => &with_rooms,
    };
    let server = Arc::new(match args.servers {
        Some(gateways) => ctx.supervised_server(&server_csv, extra, gateways)?,
        None => ctx.server(&server_csv, extra)?,
    });
    // `--churn-rooms`: a big channel held through the churn, its list timed.
    let held = (args.churn_rooms > 0).then(|| {
        let url = format!(
            "{}/sub/%d?channel={HELD_CHANNEL}",
            super::held::base_url(&server)
        );
        let mut a = super::held::flood_args(vec![url], held_n, held_transport, None);
        a.users = Some(format!(
            "{HELD_FIRST_USER}-{}",
            HELD_FIRST_USER + held_n - 1
        ));
        a.max_time = args.duration + 600.0;
        let held = super::held::Held::start(a, live.clone(), vec![server.clone()]);
        held.wait_open(held_n, Duration::from_secs(120));
        held
    });
    report.csvs.push(server_csv);
    let rss_idle = server.rss();
    let transport = args.transport()?;
    let deadline = Instant::now() + Duration::from_secs_f64(args.duration);
    // One cycle of every worker per period: the workers' connects average the rate.
    let period = (args.churn_rate > 0.0)
        .then(|| Duration::from_secs_f64((per * workers_n) as f64 / args.churn_rate));
    let tally = Arc::new(Tally {
        per_worker: (0..workers_n).map(|_| Default::default()).collect(),
        ..Default::default()
    });
    // `--churn-rooms`: the join/leave pushes watched from before the churn.
    let watchers = match args.churn_rooms {
        0 => None,
        rooms => Some(Watchers::start(server.addr, rooms)?),
    };
    let mut workers = Vec::new();
    // `--churn-rooms`: each connection in one room, watching its joins and leaves.
    let url = match args.churn_rooms {
        0 => sub_url(&server),
        _ => format!("{}?channel=%c&presence=1", sub_url(&server)),
    };
    for w in 0..workers_n {
        let first_src = 2 + w * SOURCES_PER_WORKER;
        let fa = FloodArgs {
            urls: vec![url.clone()],
            rooms: (args.churn_rooms > 0).then_some(args.churn_rooms),
            rooms_per_connection: 1,
            ca: super::context::tls_ca(),
            h2: super::context::h2_streams().is_some(),
            streams_per_connection: super::context::h2_streams().unwrap_or(1),
            connections: per,
            rate: args.churn_rate / workers_n as f64 * OPEN_SPEEDUP,
            transport,
            first_user: 1 + w * per,
            sources: vec![format!(
                "127.0.0.{first_src}-127.0.0.{}",
                first_src + SOURCES_PER_WORKER - 1
            )],
            hold: Some(HOLD_SECS),
            quiet: true,
            max_time: CYCLE_MAX_SECS,
            // Its own process: the bench process only samples.
            procs: "1".into(),
            ..Default::default()
        };
        let tally = tally.clone();
        let rooms_on = args.churn_rooms > 0;
        workers.push(std::thread::spawn(move || -> anyhow::Result<()> {
            // Cycle k of this worker starts at `first + k × period`: the workers stay
            // staggered however late a cycle was (restarting right after a late
            // cycle lets them drift into step, all opening and closing at once).
            let first = Instant::now()
                + period.map_or(Duration::ZERO, |p| p.mul_f64(w as f64 / workers_n as f64));
            let mut k = 0u32;
            while Instant::now() < deadline {
                if let Some(left) =
                    (first + period.unwrap_or_default() * k).checked_duration_since(Instant::now())
                {
                    std::thread::sleep(left);
                }
                // `--churn-rooms`: odd cycles use users n above the even ones', so a
                // user reconnects a whole cycle after its close (not before the
                // server saw it: then it would rightly be no join and no leave).
                let odd = u64::from(k % 2 == 1 && rooms_on);
                let mut fa = fa.clone();
                fa.first_user += odd * per * workers_n;
                let s = load::flood::run_until(fa, &AtomicBool::new(false), &mut |_| {})?;
                tally.cycles.fetch_add(1, Ordering::Relaxed);
                tally.failed.fetch_add(s.failed, Ordering::Relaxed);
                let mine = &tally.per_worker[w as usize];
                mine[odd as usize].fetch_add(1, Ordering::Relaxed);
                mine[2].fetch_add(s.failed, Ordering::Relaxed);
                tally.opened.fetch_add(s.opened, Ordering::Relaxed);
                k += 1;
                if let Some(p) = period {
                    // Late: start at once if less than half a period behind the
                    // next slot, else skip to the one after (no catching up in bursts).
                    let behind = Instant::now().saturating_duration_since(first + p * k);
                    if !behind.is_zero() {
                        tally.late.fetch_add(1, Ordering::Relaxed);
                        k += (behind.as_secs_f64() / p.as_secs_f64() + 0.5) as u32;
                    }
                }
            }
            Ok(())
        }));
    }
    let publisher = (args.churn_publish_rate > 0.0).then(|| {
        let m = load::msggen::MsggenArgs {
            url: super::held::base_url(&server),
            ca: super::context::tls_ca(),
            rate: args.churn_publish_rate,
            max: n,
            publishers: 4,
            duration: args.duration,
            size: args.size,
            quiet: true,
            ..Default::default()
        };
        std::thread::spawn(move || load::msggen::run_with(m, &AtomicBool::new(false)))
    });
    // The list of the held channel, asked every 20 ms while the churn runs.
    let router_admin = args.servers.and_then(|_| router_admin(&server));
    let listers = held.as_ref().map(|_| {
        Listers::start(
            server.addr,
            server.admin,
            router_admin,
            HELD_CHANNEL,
            deadline,
        )
    });
    // A supervised server's descriptors are its children's.
    let pids: Vec<u32> = std::iter::once(server.child.id())
        .chain(server.workers.iter().copied())
        .collect();
    let fds = || pids.iter().map(|&p| open_fds(p)).sum::<u64>();
    let mut probe = Probe::new(vec![server.clone()]);
    let start = probe.sample();
    let cpu_start = probe.cpu();
    let t0 = Instant::now();
    let mut rss_samples = Vec::new();
    let mut soak = Soak::default();
    while workers.iter().any(|w| !w.is_finished())
        && t0.elapsed() < Duration::from_secs_f64(args.duration + 60.0)
    {
        let slot = || (t0.elapsed().as_secs_f64() / args.sample_every.max(1.0)) as usize;
        let soaking = || t0.elapsed().as_secs_f64() <= args.duration;
        for _ in 0..FD_READINGS_PER_S {
            std::thread::sleep(Duration::from_secs(1) / FD_READINGS_PER_S);
            if soaking() {
                soak.push_fds(slot(), fds());
            }
        }
        let s = probe.sample();
        live.line(None, &s);
        rss_samples.push(s.rss);
        if soaking() {
            soak.push(slot(), s.rss, fds(), s.connections);
        }
    }
    for w in workers {
        w.join()
            .map_err(|_| anyhow::anyhow!("churn worker panicked"))??;
    }
    let published = match publisher {
        Some(p) => Some(
            p.join()
                .map_err(|_| anyhow::anyhow!("churn publisher panicked"))??,
        ),
        None => None,
    };
    let end = probe.sample();
    let cpu_end = probe.cpu();
    let lists = listers.map(Listers::finish).transpose()?;
    if let Some(held) = held {
        held.finish()?;
    }
    let secs = t0.elapsed().as_secs_f64();
    watch(&live, &mut probe, 30.0, &mut |s| s.connections == 0);
    live.emit(format!("everyone left; settling {:.0} s", args.settle));
    watch(&live, &mut probe, args.settle, &mut |_| false);
    let rss_after = server.rss();
    if let Some(watchers) = watchers {
        let seen = watchers.finish()?;
        let workers: Vec<Worker> = (0..workers_n)
            .map(|w| Worker {
                first_user: 1 + w * per,
                users: per,
                odd_offset: per * workers_n,
                cycles: [0, 1].map(|p| tally.per_worker[w as usize][p].load(Ordering::Relaxed)),
                failed: tally.per_worker[w as usize][2].load(Ordering::Relaxed),
            })
            .collect();
        judge(&mut report, &seen, &workers);
    }
    let connects = end.connects - start.connects;
    let closes = end.closes - start.closes;
    let failed = tally.failed.load(Ordering::Relaxed);
    let cycles = tally.cycles.load(Ordering::Relaxed);
    // Not the accept rate: each cycle also holds and closes (see `idle` for that).
    report.fact(
        "connects / s (server)",
        format!(
            "{}/s ({} in {secs:.1} s)",
            count(connects as f64 / secs),
            count(connects as f64)
        ),
    );
    report.fact(
        "server CPU per connect (and its close, the pushes it caused)",
        format!(
            "{:.1} µs ({:.2} CPU s over {} connects)",
            (cpu_end - cpu_start) * 1e6 / connects.max(1) as f64,
            cpu_end - cpu_start,
            count(connects as f64)
        ),
    );
    if let Some(lists) = lists {
        list_rows(&mut report, lists, held_n);
    }
    if args.churn_rooms > 0 {
        report.fact(
            "rooms",
            format!(
                "{} rooms, each connection in one with presence=1; messages out {}",
                args.churn_rooms,
                count(end.messages_out.saturating_sub(start.messages_out) as f64)
            ),
        );
    }
    report.fact(
        "closes / s (server)",
        format!(
            "{}/s ({})",
            count(closes as f64 / secs),
            count(closes as f64)
        ),
    );
    if let Some(p) = &published {
        report.row(
            "publishes during churn: answered / errors",
            format!(
                "{} at {:.0}/s / {} errors",
                count(p.sent as f64),
                p.achieved_rate,
                count(p.errors as f64)
            ),
            "0 errors",
            met(p.errors == 0 && p.sent > 0),
        );
        if !p.error_kinds.is_empty() {
            let kinds: Vec<String> = p
                .error_kinds
                .iter()
                .map(|(kind, n)| format!("{n} × {kind}"))
                .collect();
            report.fact("publish errors by kind", kinds.join("; "));
        }
        report.fact(
            "publish round trip p50 / p99 / max",
            format!(
                "{:.2} / {:.2} / {:.1} ms",
                p.rtt_p50_us as f64 / 1e3,
                p.rtt_p99_us as f64 / 1e3,
                p.rtt_max_us as f64 / 1e3
            ),
        );
    }
    if let Some(p) = period {
        report.fact(
            "paced cycles that overran their period",
            format!(
                "{} of {cycles} (period {:.2} s; a late cycle lowers the rate)",
                tally.late.load(Ordering::Relaxed),
                p.as_secs_f64()
            ),
        );
    }
    let warmup = args.soak_warmup.unwrap_or(args.sample_every);
    soak.report(&mut report, &dir, args.sample_every, warmup)?;
    report.row(
        "client errors",
        format!(
            "{} of {} attempts over {} cycles",
            count(failed as f64),
            count((tally.opened.load(Ordering::Relaxed) + failed) as f64),
            cycles
        ),
        "0",
        met(failed == 0),
    );
    let quarter = rss_samples.get(rss_samples.len() / 4).copied().unwrap_or(0);
    let last = rss_samples.last().copied().unwrap_or(0);
    let peak = rss_samples.iter().copied().max().unwrap_or(0);
    let growth = last as f64 / quarter.max(1) as f64 - 1.0;
    report.row(
        "server memory during churn (at ¼ → end, peak)",
        format!(
            "{} → {} ({:+.1} %), peak {}",
            bytes(quarter as f64),
            bytes(last as f64),
            growth * 100.0,
            bytes(peak as f64)
        ),
        "stable (≤ +10 %, bench's own criterion)",
        met(growth <= STABLE_GROWTH),
    );
    let ratio = rss_after as f64 / rss_idle.max(1) as f64;
    report.row(
        &format!("memory {:.0} s after everyone left", args.settle),
        format!(
            "{} vs {} idle ({:+.1} %)",
            bytes(rss_after as f64),
            bytes(rss_idle as f64),
            (ratio - 1.0) * 100.0
        ),
        "back to idle ± 10 %",
        met((ratio - 1.0).abs() <= 0.10),
    );
    report.note(format!(
        "{workers_n} workers, each from its own {SOURCES_PER_WORKER} source addresses, \
         repeat in a flood child process: open {per} connections ({}), hold {HOLD_SECS} s, \
         close all at once. The connect rate here includes each cycle's process start-up.",
        match period {
            Some(p) => format!(
                "one cycle per worker every {:.2} s, opening at {OPEN_SPEEDUP} × its share \
                 of the rate",
                p.as_secs_f64()
            ),
            None => "as fast as possible, cycles back to back".into(),
        }
    ));
    if args.servers.is_some() {
        // Its NATS server's store goes with it.
        server.stop_gracefully(Duration::from_secs(10));
    }
    report.live = live.lines();
    Ok(report)
}
