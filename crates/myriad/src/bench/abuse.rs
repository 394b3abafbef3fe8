//! `bench abuse`: what hostile clients cost honest ones. N honest subscribers (one
//! user holding N connections) receive a broadcast at `--latency-rate` msg/s in
//! three phases of `--latency-secs` each: clean, under abuse, clean again; with
//! `--abuse-each` then one phase per hostile case alone (which case costs the honest
//! latency). Per phase: the honest subscribers' latency p50/p99/max over every
//! delivery, the deliveries received against expected, the server's CPU and peak
//! RSS, and the abusers' CPU.
//!
//! The abusers run in a child process of their own ([`super::abuse_cases`]), not in
//! this one, which receives the honest deliveries and measures their latency.
//! With `--tls` the honest subscribers, the publisher and every abuser speak TLS, and
//! the HTTP/2 cases (Huffman bomb, rapid reset, CONTINUATION and control-frame floods)
//! join the others.

use super::abuse_cases::{Abusers, Case, ABUSED, CASES, FAT, H2_CASES};
use super::held::{flood_args, post, sub_url, Held, Live, Probe};
use super::ladder;
use super::report::{bytes, count, met, ms, Report};
use super::{BenchArgs, Ctx};
use load::flood::stats::quantile;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The honest subscribers' user (it receives the broadcast).
const SUBJECT: u64 = 1;

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("abuse")?;
    let n = args.connections();
    // Over TLS the server also speaks HTTP/2: its hostile cases join the others.
    let cases: Vec<Case> = if super::context::tls_ca().is_some() {
        CASES.iter().chain(&H2_CASES).copied().collect()
    } else {
        CASES.to_vec()
    };
    let mut report = Report::new(
        "abuse",
        &format!(
            "{} honest subscribers at {} msg/s: clean, under {} hostile cases, clean again{}",
            count(n as f64),
            args.latency_rate,
            cases.len(),
            if args.abuse_each {
                ", then each case alone"
            } else {
                ""
            }
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
    let mut plan: Vec<(String, Vec<Case>)> = vec![
        ("clean".into(), Vec::new()),
        ("under abuse".into(), cases.clone()),
        ("clean again".into(), Vec::new()),
    ];
    if args.abuse_each {
        plan.extend(cases.iter().map(|&c| (format!("only {c:?}"), vec![c])));
    }
    let mut phases = Vec::new();
    for (name, cases) in plan {
        live.emit(format!("---- {name}: {} s ----", args.latency_secs));
        let abusers = if cases.is_empty() {
            None
        } else {
            Some(Abusers::start(
                server.addr,
                &cases,
                super::context::tls_ca(),
            )?)
        };
        let mut phase = measure(args, &held, &server, &live, open)?;
        if let Some(a) = abusers {
            let done = a.finish()?;
            phase.abuser_cpu_pct = done.cpu_secs / phase.secs * 100.0;
            phase.rounds = cases
                .iter()
                .zip(&done.rounds)
                .map(|(c, k)| format!("{c:?} {}", count(*k as f64)))
                .collect::<Vec<_>>()
                .join(", ");
        }
        if name == "under abuse" {
            report.fact("hostile rounds run (each case)", phase.rounds.clone());
        }
        phases.push((name, phase));
    }
    let open_after = held.open();
    held.finish()?;
    server.stop();
    report.csvs.push(flood_csv);
    let clean = &phases[0].1;
    for (name, p) in phases.iter().take(3) {
        report.row(
            &format!("honest latency p50 / p99 / max ({name})"),
            format!("{} / {} / {}", ms(p.p50), ms(p.p99), ms(p.max)),
            "under abuse: p99 ≤ 2 × clean",
            if name == "under abuse" {
                met(p.p99 <= 2 * clean.p99.max(1_000))
            } else {
                "—".into()
            },
        );
        report.fact(
            &format!("server RSS peak ({name})"),
            bytes(p.rss_peak as f64),
        );
    }
    let ratio = |a: &Phase, b: &Phase| a.p99 as f64 / b.p99.max(1) as f64;
    report.fact(
        "honest p99 under abuse ÷ clean (first / again)",
        format!(
            "{:.2} / {:.2}",
            ratio(&phases[1].1, clean),
            ratio(&phases[1].1, &phases[2].1)
        ),
    );
    for (name, p) in &phases {
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
    }
    report.row(
        "honest subscribers still connected at the end",
        format!("{} of {}", count(open_after as f64), count(open as f64)),
        "all",
        met(open_after == open),
    );
    let mut table = String::from(
        "| phase | honest p50 / p99 / max | server CPU | abusers' CPU | bench CPU | machine busy | server RSS peak | rounds |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (name, p) in &phases {
        table.push_str(&format!(
            "| {name} | {} / {} / {} | {:.0} % | {:.0} % | {:.0} % | {:.0} % | {} | {} |\n",
            ms(p.p50),
            ms(p.p99),
            ms(p.max),
            p.server_cpu_pct,
            p.abuser_cpu_pct,
            p.bench_cpu_pct,
            p.machine_pct,
            bytes(p.rss_peak as f64),
            if p.rounds.is_empty() {
                "—"
            } else {
                &p.rounds
            }
        ));
    }
    report
        .sections
        .push(("Phases (CPU in % of one core)".into(), table));
    report.note(
        "Every hostile case runs in its own thread of one child process for the whole \
         abuse phase, one short attack per round (see `crates/myriad/src/bench/abuse_cases.rs`). \
         The server runs in open mode (no JWT, API on loopback), so bad tokens cost a parse, \
         not a signature check.",
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
    /// The phase's length and the server's average CPU over it (% of one core).
    secs: f64,
    server_cpu_pct: f64,
    /// This process's CPU (the honest receivers, the publisher, the probe), % of one
    /// core, and the whole machine's busy CPU, % of all cores: whether the latency
    /// came from a busy server or from a busy box.
    bench_cpu_pct: f64,
    machine_pct: f64,
    /// Filled in by the caller when abusers ran.
    abuser_cpu_pct: f64,
    rounds: String,
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
    let (t0, cpu0, bench0) = (Instant::now(), probe.cpu(), super::held::client_cpu());
    let mut rss_peak = 0;
    let mut machine = Vec::new();
    while !publishing.is_finished() {
        std::thread::sleep(Duration::from_secs(1));
        let s = probe.sample();
        live.line(None, &s);
        rss_peak = rss_peak.max(s.rss);
        machine.push(s.machine_pct);
    }
    let sent = publishing
        .join()
        .map_err(|_| anyhow::anyhow!("publisher panicked"))??;
    let secs = t0.elapsed().as_secs_f64();
    let server_cpu_pct = (probe.cpu() - cpu0) / secs * 100.0;
    let bench_cpu_pct = (super::held::client_cpu() - bench0) / secs * 100.0;
    let machine_pct = machine.iter().sum::<f64>() / machine.len().max(1) as f64;
    held.wait_quiet(Duration::from_secs(10));
    let h = held.take_hist();
    let q = |x: f64| quantile(&h, x);
    Ok(Phase {
        p50: q(0.5),
        p99: q(0.99),
        max: h.max(),
        received: held.messages() - before,
        expected: sent.sent * open,
        rss_peak,
        secs,
        server_cpu_pct,
        bench_cpu_pct,
        machine_pct,
        abuser_cpu_pct: 0.0,
        rounds: String::new(),
    })
}
