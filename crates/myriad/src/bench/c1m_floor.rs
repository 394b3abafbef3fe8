//! `bench c1m --peer floor`: after myriad's run, the C floor (`peer_floor.c`, the
//! least a push server can do on this box) holds the same N connections from the
//! same floods (clients, source addresses, a third per transport), beating as
//! myriad's gateways beat (period, wall-clock grid, per-address phase, tick groups)
//! over as many processes as myriad had gateways; then the same unicast ladder, each
//! publish to one held user (the floor has no graph, so no graph phase). The report
//! puts the two side by side as what the box pays: whole-box CPU while holding, per
//! beat, per delivery above holding, and the ladder's p99 per step, myriad's as
//! ratios to the floor's (issue 45's goal: ≤ 1.2× per beat and per delivery, p99
//! ≤ 1.5× at every step the floor passes).
//!
//! Not here: myriad's own run (`c1m`), starting the floor (`peer`).

use super::c1m_cost::{per_publish_us, SATURATED};
use super::c1m_report::{Phase, Run, UNICAST_P99_US};
use super::c1m_setup::{beat_shape, flood_plan, PUBLISHERS};
use super::c1m_watch::{alive, children_of, Floods};
use super::cpu_wait::{self, Stretch};
use super::held::Live;
use super::ladder::{climb, MIN_ACHIEVED};
use super::peer::{start_floor_with, Floor};
use super::report::{bytes, count, met, ms, Report};
use super::BenchArgs;
use crate::server_process::kernel_socket_bytes;
use load::flood::stats::quantile;
use load::msggen::{Dist, MsggenArgs};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// The goals of issue 45, myriad against the floor in the same run.
const COST_RATIO_GOAL: f64 = 1.2;
const P99_RATIO_GOAL: f64 = 1.5;

/// What the floor measured.
pub(super) struct FloorRun {
    pub processes: u32,
    pub heartbeat_s: u32,
    pub open: u64,
    pub server_conns: u64,
    pub connect_s: f64,
    pub rss_idle: u64,
    pub rss_held: u64,
    pub kernel_idle: u64,
    pub kernel_held: u64,
    /// The floor's processes' CPU while holding, percent of a core, and the stretch.
    pub cpu: f64,
    pub stretch: Stretch,
    /// Beats the floor counted per second over the hold.
    pub beats_per_s: f64,
    /// Publishes or hand-overs it dropped (its queues full for a second).
    pub lost: u64,
    pub ladder: Vec<(f64, Phase)>,
    /// Its processes still alive a few seconds after it was stopped, of how many.
    pub left: (usize, usize),
}

/// Holds `n` connections on the floor with `processes` processes, then climbs
/// `rates` (`--unicast-ladder`, else `--unicast-rate` alone).
pub(super) fn run(
    args: &BenchArgs,
    dir: &Path,
    live: &Live,
    n: u64,
    processes: u32,
) -> anyhow::Result<FloorRun> {
    let dir = dir.join("floor");
    std::fs::create_dir_all(&dir)?;
    let (heartbeat_s, grid_ms, tick_groups) = beat_shape(&args.server_flags);
    let floor = Floor {
        threads: 1,
        processes,
        heartbeat_s,
        grid_ms,
        tick_groups,
    };
    let server = start_floor_with(&dir, &floor)?;
    let root = server.child.id();
    std::thread::sleep(Duration::from_secs(2));
    live.emit(format!(
        "floor: {processes} processes on {}, beats every {heartbeat_s} s on a {grid_ms}-ms grid",
        server.addr
    ));
    let pids = || {
        let mut p = vec![root];
        p.extend(children_of(root));
        p
    };
    let (rss_idle, kernel_idle) = (rss(&pids()), kernel_socket_bytes());

    let plan = flood_plan(n, &format!("http://{}/sub/%d", server.addr), &dir, args)?;
    let floods = Floods::start(plan);
    let t = Instant::now();
    let open = wait_open(&floods, n, server.addr, live);
    let connect_s = t.elapsed().as_secs_f64();
    live.emit(format!("floor: {open} of {n} open after {connect_s:.1} s"));
    anyhow::ensure!(
        pids().iter().all(|&p| alive(p)),
        "a floor process died while its clients connected (see dmesg)"
    );
    std::thread::sleep(Duration::from_secs(3));
    let (rss_held, kernel_held) = (rss(&pids()), kernel_socket_bytes());
    let stats0 = stats(server.addr).unwrap_or_default();
    let (cpu0, window) = (cpu_seconds(&pids()), cpu_wait::Window::start(root));
    live.emit(format!("floor: holding {open} for {} s", args.hold));
    std::thread::sleep(Duration::from_secs_f64(args.hold));
    let stretch = window.finish();
    let cpu = (cpu_seconds(&pids()) - cpu0) / stretch.secs.max(1e-3) * 100.0;
    let stats1 = stats(server.addr).unwrap_or_default();
    let beats_per_s = stats1.beats.saturating_sub(stats0.beats) as f64 / stretch.secs.max(1e-3);

    let rates = if args.unicast_ladder.is_empty() {
        vec![args.unicast_rate]
    } else {
        args.unicast_ladder.clone()
    };
    let ladder = climb(
        &rates,
        |rate| {
            floods.take_hist();
            let received0 = floods.messages();
            let cpu0 = cpu_seconds(&pids());
            let window = cpu_wait::Window::start(root);
            live.emit(format!(
                "floor unicast: {rate} msg/s for {} s",
                args.duration
            ));
            let sent = load::msggen::run_with(
                MsggenArgs {
                    url: format!("http://{}", server.addr),
                    path: "/pub/%d".into(),
                    rate,
                    max: n,
                    publishers: PUBLISHERS,
                    dist: Dist::Uniform,
                    duration: args.duration,
                    size: args.size,
                    seed: Some(9),
                    quiet: true,
                    ..Default::default()
                },
                &AtomicBool::new(false),
            )?;
            floods.wait_quiet(Duration::from_secs(15));
            let stretch = window.finish();
            Ok(Phase {
                received: floods.messages() - received0,
                hist: floods.take_hist(),
                lag_max: 0,
                cpu: (cpu_seconds(&pids()) - cpu0) / stretch.secs.max(1e-3) * 100.0,
                window_s: stretch.secs,
                stretch,
                sent,
            })
        },
        |p, rate| floor_met(p, rate, open, n),
    )?;
    let lost = stats(server.addr).map_or(0, |s| s.lost);
    let server_conns = stats1.connections;
    floods.finish()?;
    let all = pids();
    drop(server); // kills the first process; the others die with it (PR_SET_PDEATHSIG)
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until && all.iter().any(|&p| alive(p)) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left = (all.iter().filter(|&&p| alive(p)).count(), all.len());
    Ok(FloorRun {
        processes,
        heartbeat_s,
        open,
        server_conns,
        connect_s,
        rss_idle,
        rss_held,
        kernel_idle,
        kernel_held,
        cpu,
        stretch,
        beats_per_s,
        lost,
        ladder,
        left,
    })
}

/// A floor step met the unicast target: 90 % of the rate published without error,
/// every publish to a held user delivered (the floor answers no counts: with
/// `open` of `n` users held, that share of the publishes, less 1 % for the
/// uniform draw), p99 ≤ 5 ms.
fn floor_met(p: &Phase, rate: f64, open: u64, n: u64) -> bool {
    let expected = if open >= n {
        p.sent.sent
    } else {
        (p.sent.sent as f64 * open as f64 / n.max(1) as f64 * 0.99) as u64
    };
    p.sent.sent > 0
        && p.sent.errors == 0
        && p.received >= expected
        && p.sent.achieved_rate >= MIN_ACHIEVED * rate
        && !p.hist.is_empty()
        && quantile(&p.hist, 0.99) <= UNICAST_P99_US
}

/// Waits as `Floods::wait_open` does, reporting progress every 5 s.
fn wait_open(floods: &Floods, n: u64, addr: SocketAddr, live: &Live) -> u64 {
    let until = Instant::now() + Duration::from_secs(600);
    let mut last = (0, Instant::now());
    let mut said = Instant::now();
    while Instant::now() < until && !floods.any_ended() {
        let done = floods.open() + floods.failed();
        if done >= n {
            break;
        }
        if done != last.0 {
            last = (done, Instant::now());
        } else if last.1.elapsed() >= Duration::from_secs(30) {
            break;
        }
        if said.elapsed() >= Duration::from_secs(5) {
            said = Instant::now();
            let held = stats(addr).map_or(0, |s| s.connections);
            live.emit(format!(
                "floor: open {} failed {} (the floor holds {held})",
                floods.open(),
                floods.failed()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    floods.open()
}

/// The floor's shared counters.
#[derive(Default)]
struct Stats {
    connections: u64,
    beats: u64,
    lost: u64,
}

fn stats(addr: SocketAddr) -> Option<Stats> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"GET /stats HTTP/1.1\r\nHost: bench\r\n\r\n")
        .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let doc: serde_json::Value = serde_json::from_str(raw.split_once("\r\n\r\n")?.1).ok()?;
    let get = |k: &str| doc[k].as_u64().unwrap_or(0);
    Some(Stats {
        connections: get("connections"),
        beats: get("beats"),
        lost: get("lost"),
    })
}

/// Summed RSS of `pids`, bytes.
fn rss(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|&p| observe::procfs::read_proc_stat(p).ok())
        .map(|s| s.rss_pages * 4096)
        .sum()
}

/// Summed user + system CPU seconds of `pids`.
fn cpu_seconds(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|&p| observe::procfs::read_proc_stat(p).ok())
        .map(|s| (s.utime_ticks + s.stime_ticks) as f64 / 100.0)
        .sum()
}

/// The report's side by side: the floor's run, then myriad's costs as ratios.
pub(super) fn rows(report: &mut Report, run: &Run, floor: &FloorRun, n: u64) {
    let held = &run.held;
    report.fact(
        "floor: connections held",
        format!(
            "{} of {} (the floor counts {}) in {} processes, connected in {:.1} s",
            count(floor.open as f64),
            count(n as f64),
            count(floor.server_conns as f64),
            floor.processes,
            floor.connect_s
        ),
    );
    let per = |a: u64, b: u64, open: u64, ends: u64| {
        a.saturating_sub(b) as f64 / (ends * open.max(1)) as f64
    };
    report.fact(
        "user space per connection: myriad / floor",
        format!(
            "{} / {}",
            bytes(per(held.rss_held, held.rss_idle, held.open, 1)),
            bytes(per(floor.rss_held, floor.rss_idle, floor.open, 1))
        ),
    );
    report.fact(
        "kernel memory per socket: myriad / floor",
        format!(
            "{} / {}",
            bytes(per(held.kernel_held, held.kernel_idle, held.open, 2)),
            bytes(per(floor.kernel_held, floor.kernel_idle, floor.open, 2))
        ),
    );
    report.fact(
        "server CPU while holding: myriad (with router and nats-server) / floor",
        format!("{:.0} % / {:.0} % of a core", held.cpu, floor.cpu),
    );
    let (Some(mb), Some(fb)) = (held.stretch.machine, floor.stretch.machine) else {
        report.note("/proc/stat was not readable: no whole-box figures for the floor comparison");
        return;
    };
    report.fact(
        "the whole box's CPU while holding: myriad / floor",
        format!("{:.0} % / {:.0} % of {:.0} %", mb.busy, fb.busy, mb.of),
    );
    let (ms_, fs) = (held.stretch.shares, floor.stretch.shares);
    report.fact(
        "while holding, server / clients / rest of the box: beside myriad / beside the floor",
        format!(
            "{:.0} / {:.0} / {:.0} % / {:.0} / {:.0} / {:.0} % of a core",
            ms_.server, ms_.load, ms_.other, fs.server, fs.load, fs.other
        ),
    );
    let beats = |open: u64, period: u32| open as f64 / f64::from(period.max(1));
    let beat_us = |busy: f64, open: u64, period| busy / 100.0 * 1e6 / beats(open, period).max(1.0);
    let (m_beat, f_beat) = (
        beat_us(mb.busy, held.open, floor.heartbeat_s),
        beat_us(fb.busy, floor.open, floor.heartbeat_s),
    );
    let ratio = m_beat / f_beat.max(1e-9);
    // A hold shorter than a period sees connections not yet beating, and a saturated
    // box cannot show what a beat costs: then the ratio is no figure.
    let beating = floor.beats_per_s >= 0.8 * beats(floor.open, floor.heartbeat_s);
    let readable = fb.busy < SATURATED * fb.of && mb.busy < SATURATED * mb.of;
    report.row(
        "box cost per beat while holding (whole box ÷ connections / period): myriad / floor",
        format!(
            "{m_beat:.1} µs / {f_beat:.1} µs = {ratio:.2}× (the floor counted {} beats/s against {} expected){}",
            count(floor.beats_per_s),
            count(beats(floor.open, floor.heartbeat_s)),
            match (beating, readable) {
                (false, _) => ": not yet beating, no figure (hold at least twice the period)",
                (true, false) => ": the box was saturated, no figure",
                _ => "",
            }
        ),
        &format!("≤ {COST_RATIO_GOAL}× the floor's"),
        if beating && readable { met(ratio <= COST_RATIO_GOAL) } else { "—".into() },
    );
    // Without `--unicast-ladder` both ran the one unicast phase at `--unicast-rate`.
    let myriad_step = |rate: f64| -> Option<&Phase> {
        if run.ladder.is_empty() {
            return Some(&run.phases[1]);
        }
        run.ladder.iter().find(|(r, _)| *r == rate).map(|(_, p)| p)
    };
    let mut table = String::from(
        "| asked /s | floor received / published | myriad p99 | floor p99 | p99 ratio | myriad max | floor max | box µs per delivery: myriad / floor | ratio | floor met? |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut p99_ok = true;
    let mut cost_ok = true;
    let mut passed = 0;
    let mut p99_ratios = Vec::new();
    for (rate, f) in &floor.ladder {
        let floor_met = floor_met(f, *rate, floor.open, n);
        passed += usize::from(floor_met);
        let Some(m) = myriad_step(*rate) else {
            // myriad stopped one step after its first miss; the floor went on.
            p99_ok &= !floor_met;
            cost_ok &= !floor_met;
            table.push_str(&format!(
                "| {} | {} / {} | not run (myriad's ladder had stopped) | {} | — | — | {} | — | — | {} |\n",
                count(*rate),
                count(f.received as f64),
                count(f.sent.sent as f64),
                ms(quantile(&f.hist, 0.99)),
                ms(f.hist.max()),
                met(floor_met)
            ));
            continue;
        };
        let (mp, fp) = (quantile(&m.hist, 0.99), quantile(&f.hist, 0.99));
        // What the step added to holding's whole-box CPU, per delivery; none where
        // holding had already saturated the box, or where the step read no more than
        // holding (other work on the box moved more than the deliveries did).
        let delivery = |p: &Phase, held: cpu_wait::Machine| {
            p.stretch
                .machine
                .filter(|m| held.busy < SATURATED * held.of && m.busy > held.busy)
                .and_then(|m| per_publish_us(m.busy, held.busy, p.window_s, p.received.max(1)))
        };
        let (md, fd) = (delivery(m, mb), delivery(f, fb));
        let p99_ratio = mp as f64 / (fp as f64).max(1.0);
        p99_ratios.push(p99_ratio);
        let cost_ratio = md.zip(fd).map(|(a, b)| a / b.max(1e-9));
        if floor_met {
            p99_ok &= p99_ratio <= P99_RATIO_GOAL;
            cost_ok &= cost_ratio.is_some_and(|r| r <= COST_RATIO_GOAL);
        }
        let us = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.0}"));
        table.push_str(&format!(
            "| {} | {} / {} | {} | {} | {p99_ratio:.2}× | {} | {} | {} / {} | {} | {} |\n",
            count(*rate),
            count(f.received as f64),
            count(f.sent.sent as f64),
            ms(mp),
            ms(fp),
            ms(m.hist.max()),
            ms(f.hist.max()),
            us(md),
            us(fd),
            cost_ratio.map_or("—".into(), |r| format!("{r:.2}×")),
            met(floor_met),
        ));
    }
    // A goal over the steps the floor passes says nothing when it passed none.
    let (lo, hi) = p99_ratios
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    let measured = if passed == 0 {
        format!(
            "the floor passed no step (each step's p99 ratio: {lo:.2}–{hi:.2}×; the table \"Beside the floor\")"
        )
    } else {
        format!("{passed} step(s) the floor passed: the table \"Beside the floor\"")
    };
    let verdict = |ok: bool| {
        if passed == 0 {
            "—".to_string()
        } else {
            met(ok)
        }
    };
    report.row(
        "unicast p99 at every step the floor passes: myriad / floor",
        measured.clone(),
        &format!("≤ {P99_RATIO_GOAL}× the floor's"),
        verdict(p99_ok),
    );
    report.row(
        "box cost per delivery above holding at every step the floor passes: myriad / floor",
        measured,
        &format!("≤ {COST_RATIO_GOAL}× the floor's"),
        verdict(cost_ok),
    );
    report.row(
        "floor processes left after its stop",
        format!("{} of {}", floor.left.0, floor.left.1),
        "0",
        met(floor.left.0 == 0),
    );
    if floor.lost > 0 {
        report.note(format!(
            "the floor dropped {} publishes or hand-overs (a process's queue full for a second)",
            floor.lost
        ));
    }
    report.sections.push((
        "Beside the floor".into(),
        format!(
            "The same {} connections from the same floods, held by the C floor (`peer_floor.c`: \
             one send per delivery or beat, {} processes, beating as myriad's gateways beat), \
             then the same unicast rates, each publish to one held user. Box cost per \
             delivery: the whole box's CPU in the step above holding's, per delivery \
             received. Both ends of every connection run on this box's cores, so these \
             are the box's costs, clients included, for both servers alike.\n\n{table}",
            count(n as f64),
            floor.processes
        ),
    ));
}
