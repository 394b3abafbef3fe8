//! `bench churn`: connections opening and closing continuously for `--duration` s.
//! [`WORKERS`] flood runs in parallel, each repeating: open N / WORKERS connections as
//! fast as it can, hold [`HOLD_SECS`], close them all; their cycles drift apart, so
//! opens and closes overlap. Connects/s and closes/s come from the server's counters,
//! errors from flood; memory is sampled each second, and again `--settle` s after the
//! end.
//!
//! The soak (issue 10): `--churn-rate 5000 --duration 3600` caps the connects at
//! 5,000/s over all workers, `--churn-publish-rate` publishes to random churning
//! users meanwhile, and every `--sample-every` s (60) the server's RSS and open file
//! descriptors (medians of that interval's one-per-second readings) go into a table
//! and `soak.csv`; each interval after the first must stay within ±5 % of their
//! median, and errors (connect and publish) must be 0.

use super::held::{sub_url, watch, Live, Probe};
use super::report::{bytes, count, met, Report};
use super::{BenchArgs, Ctx};
use load::flood::FloodArgs;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Parallel flood loops.
const WORKERS: u64 = 4;
/// Seconds each cycle holds its connections.
const HOLD_SECS: f64 = 0.5;
/// Source addresses per worker (each gets its own port range: client-side TIME_WAIT
/// sockets pile up at thousands of closes per second).
const SOURCES_PER_WORKER: u64 = 8;
/// RSS growth from the end of the first quarter to the end that still counts as stable
/// (the bench's own criterion; the SPEC has none for churn).
const STABLE_GROWTH: f64 = 0.10;
/// How far an interval's RSS or fd median may stray from the median of all intervals
/// (the soak criterion: flat within ±5 %).
const SOAK_FLAT: f64 = 0.05;

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("churn")?;
    let n = args.connections();
    let per = n.div_ceil(WORKERS);
    let live = Live::new("churn");
    let mut report = Report::new(
        "churn",
        &format!(
            "{WORKERS} × {} connections opening and closing for {} s",
            count(per as f64),
            args.duration
        ),
        &dir,
    );
    let server_csv = dir.join("server.csv");
    let server = Arc::new(ctx.server(&server_csv, &[])?);
    report.csvs.push(server_csv);
    let rss_idle = server.rss();
    let transport = args.transport()?;
    let deadline = Instant::now() + Duration::from_secs_f64(args.duration);
    let (cycles, failed, opened) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let first_src = 2 + w * SOURCES_PER_WORKER;
        let fa = FloodArgs {
            urls: vec![sub_url(&server)],
            ca: super::context::tls_ca(),
            h2: super::context::h2_streams().is_some(),
            streams_per_connection: super::context::h2_streams().unwrap_or(1),
            connections: per,
            rate: args.churn_rate / WORKERS as f64,
            transport,
            first_user: 1 + w * per,
            sources: vec![format!(
                "127.0.0.{first_src}-127.0.0.{}",
                first_src + SOURCES_PER_WORKER - 1
            )],
            hold: Some(HOLD_SECS),
            quiet: true,
            max_time: args.duration + 30.0,
            ..Default::default()
        };
        let (cycles, failed, opened) = (cycles.clone(), failed.clone(), opened.clone());
        workers.push(std::thread::spawn(move || -> anyhow::Result<()> {
            while Instant::now() < deadline {
                let s = load::flood::run_until(fa.clone(), &AtomicBool::new(false), &mut |_| {})?;
                cycles.fetch_add(1, Ordering::Relaxed);
                failed.fetch_add(s.failed, Ordering::Relaxed);
                opened.fetch_add(s.opened, Ordering::Relaxed);
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
    let pid = server.child.id();
    let mut probe = Probe::new(vec![server.clone()]);
    let start = probe.sample();
    let t0 = Instant::now();
    let mut rss_samples = Vec::new();
    let mut soak = Soak::default();
    while workers.iter().any(|w| !w.is_finished())
        && t0.elapsed() < Duration::from_secs_f64(args.duration + 60.0)
    {
        std::thread::sleep(Duration::from_secs(1));
        let s = probe.sample();
        live.line(None, &s);
        rss_samples.push(s.rss);
        if t0.elapsed().as_secs_f64() <= args.duration {
            let slot = (t0.elapsed().as_secs_f64() / args.sample_every.max(1.0)) as usize;
            soak.push(slot, s.rss, open_fds(pid), s.connections);
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
    let secs = t0.elapsed().as_secs_f64();
    watch(&live, &mut probe, 30.0, &mut |s| s.connections == 0);
    live.emit(format!("everyone left; settling {:.0} s", args.settle));
    watch(&live, &mut probe, args.settle, &mut |_| false);
    let rss_after = server.rss();
    let connects = end.connects - start.connects;
    let closes = end.closes - start.closes;
    let failed = failed.load(Ordering::Relaxed);
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
    }
    soak.report(&mut report, &dir, args.sample_every)?;
    report.row(
        "client errors",
        format!(
            "{} of {} attempts over {} cycles",
            count(failed as f64),
            count((opened.load(Ordering::Relaxed) + failed) as f64),
            cycles.load(Ordering::Relaxed)
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
        "{WORKERS} flood loops in this process, each from its own {SOURCES_PER_WORKER} source \
         addresses, repeat: open {per} connections as fast as possible, hold {HOLD_SECS} s, \
         close all at once. The connect rate here includes flood's own start-up per cycle."
    ));
    report.live = live.lines();
    Ok(report)
}

/// Open file descriptors of process `pid` (0 if it is gone).
fn open_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

/// The soak's per-interval readings: `(rss, fds, connections)` per second, by interval.
#[derive(Default)]
struct Soak {
    slots: Vec<Vec<(u64, u64, u64)>>,
}

impl Soak {
    fn push(&mut self, slot: usize, rss: u64, fds: u64, connections: u64) {
        if self.slots.len() <= slot {
            self.slots.resize_with(slot + 1, Vec::new);
        }
        self.slots[slot].push((rss, fds, connections));
    }

    /// Median of one column of each interval.
    fn medians(&self, col: fn(&(u64, u64, u64)) -> u64) -> Vec<u64> {
        self.slots
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| {
                let mut v: Vec<u64> = s.iter().map(col).collect();
                v.sort_unstable();
                v[v.len() / 2]
            })
            .collect()
    }

    /// The table, `soak.csv`, and the two flatness rows.
    fn report(&self, report: &mut Report, dir: &std::path::Path, every: f64) -> anyhow::Result<()> {
        let rss = self.medians(|r| r.0);
        let fds = self.medians(|r| r.1);
        let conns = self.medians(|r| r.2);
        if rss.is_empty() {
            return Ok(());
        }
        let mut csv = String::from("interval_end_s,rss_bytes,open_fds,connections\n");
        let mut table = String::from("| until | RSS (median) | open fds (median) | connections (median) |\n|---|---|---|---|\n");
        for i in 0..rss.len() {
            let end = (i + 1) as f64 * every.max(1.0);
            csv.push_str(&format!("{end:.0},{},{},{}\n", rss[i], fds[i], conns[i]));
            table.push_str(&format!(
                "| {end:.0} s | {} | {} | {} |\n",
                bytes(rss[i] as f64),
                count(fds[i] as f64),
                count(conns[i] as f64)
            ));
        }
        std::fs::write(dir.join("soak.csv"), csv)?;
        report
            .sections
            .push((format!("Soak: every {every:.0} s"), table));
        // The first interval is the warm-up (maps and pools growing to their size).
        let judged = if rss.len() > 2 { 1 } else { 0 };
        for (what, v) in [("RSS", &rss), ("open fds", &fds)] {
            let v = &v[judged..];
            let mut sorted = v.to_vec();
            sorted.sort_unstable();
            let mid = sorted[sorted.len() / 2].max(1) as f64;
            let worst = v
                .iter()
                .map(|&x| x as f64 / mid - 1.0)
                .fold(0.0f64, |a, d| if d.abs() > a.abs() { d } else { a });
            report.row(
                &format!("soak: {what} per {every:.0} s interval vs their median"),
                format!(
                    "worst {:+.1} % over {} intervals (median {})",
                    worst * 100.0,
                    v.len(),
                    if what == "RSS" {
                        bytes(mid)
                    } else {
                        count(mid)
                    }
                ),
                "flat within ±5 %",
                met(worst.abs() <= SOAK_FLAT),
            );
        }
        Ok(())
    }
}
