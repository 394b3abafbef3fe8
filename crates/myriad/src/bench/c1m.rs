//! `bench c1m`: ONE myriad — a supervisor, its router and as many gateway processes as
//! the 20,000-file limit needs (`serve --processes auto`), linked through a nats-server
//! the supervisor starts on a port of its own — holding N connections (default
//! 1,000,000) of mixed transports (stream, SSE, WebSocket: a third each, one flood per
//! transport over child processes and source addresses) with heartbeats every 20 s,
//! over a Barabási–Albert friends graph of N users (m = 15) in the embedded store. Then
//! two publishing phases, one after the other so each has its own latency: graph
//! publishes (power-law subjects, 1,000 msg/s by default, `--graph-rate`: each reaches
//! the user and its friends), then unicast (uniform users, 10,000 msg/s by default,
//! `--unicast-rate`). Lower rates show the path's latency on a box that the asked
//! rates saturate.
//!
//! Phases: doctor's checks (raising what it can, saying so) → graph gen + bulk load →
//! supervised server → flood → hold → graph publishes → unicast → the unicast ladder
//! (`--unicast-ladder`: where the 5-ms p99 still holds) → close → stop the supervisor
//! with SIGTERM and check that no process it started is left → with `--peer floor`,
//! the same connections and unicast rates on the C floor (`c1m_floor`).
//!
//! Not here: the users (`c1m_graph`), doctor's checks and what is started with which
//! flags (`c1m_setup`), sampling and the floods (`c1m_watch`), the report's rows
//! (`c1m_report`).

use super::c1m_graph::{GRAPH_EXPONENT, INBOX_PATH};
use super::c1m_report::{unicast_met, Held, Phase, Run, Stopped};
use super::c1m_setup::{doctor, flood_plan, free_port, serve_flags, PUBLISHERS};
use super::c1m_watch::{alive, children_of, stop_supervisor, Floods, Watch};
use super::cpu_wait;
use super::held::Live;
use super::ladder::climb;
use super::report::{count, Report};
use super::PublishVia;
use super::{BenchArgs, Ctx};
use crate::server_process::{kernel_socket_bytes, serve_command, ServerProcess};
use load::msggen::{Dist, MsggenArgs};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Opening gives up once no connection opened or failed for this long...
const OPEN_STALL: Duration = Duration::from_secs(30);
/// ...or after this long in all. A million opened in 26–38 s on a quick 2-core box
/// and in ~310 s on a slow one, its beats competing with the connects (2026-11-24):
/// 300 s cut that one off at 996,088.
const OPEN_MAX: Duration = Duration::from_secs(600);

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("c1m")?;
    let n = args.connections();
    let live = Live::new("c1m");
    let mut report = Report::new(
        "c1m",
        &format!(
            "{} connections held by one supervised myriad",
            count(n as f64)
        ),
        &dir,
    );
    if let Some(note) = super::c1m_netns::note() {
        live.emit(note.clone());
        report.note(note);
    }
    doctor(n, !args.no_tune, &live, &mut report)?;

    // 1. The friends graph and the inboxes, generated and bulk-loaded into the store.
    let graph = super::c1m_graph::build(n, &dir, &live)?;

    // 2. The supervised server, with a nats-server of its own on a free port.
    let nats = format!("nats://127.0.0.1:{}", free_port()?);
    let (serve, publish_port) = serve_flags(args, ctx, n, &graph.db, &nats, &dir)?;
    let scheme = super::context::scheme();
    let t = Instant::now();
    let server = Arc::new(ServerProcess::start_command_at(
        serve_command(&serve),
        "myriad supervisor serving",
        Some(&dir.join("server.log")),
    )?);
    let start_s = t.elapsed().as_secs_f64();
    let supervisor = server.child.id();
    live.emit(format!(
        "server: supervisor pid {supervisor} serving on {} after {start_s:.1} s (router index built from the store), NATS {nats}",
        server.addr
    ));
    let floods_slot = Arc::new(Mutex::new(None));
    let mut watch = Watch::start(server.clone(), floods_slot.clone(), live.clone(), &dir)?;
    watch.next();
    watch.next();
    let rss_idle = watch.rss();
    let kernel_idle = kernel_socket_bytes();
    // Routers are "router", "router 1", … (`--router-shards`).
    let routers = lock(&watch.seen)
        .peaks
        .values()
        .filter(|p| p.role.starts_with("router"))
        .count()
        .max(1);
    let gateways = lock(&watch.seen).latest.len().saturating_sub(1 + routers);

    // 3. N connections, a third per transport, users 1..=N.
    let plan = flood_plan(n, &format!("{scheme}://{}/sub/%d", server.addr), &dir, args)?;
    let flood_names: Vec<String> = plan.iter().map(|(n, _)| n.clone()).collect();
    let floods = Arc::new(Floods::start(plan));
    *lock(&floods_slot) = Some(floods.clone());
    let t = Instant::now();
    let open = floods.wait_open(n, OPEN_STALL, OPEN_MAX);
    let connect_s = t.elapsed().as_secs_f64();
    live.emit(format!("{open} of {n} open after {connect_s:.1} s"));
    std::thread::sleep(Duration::from_secs(3));
    watch.next();
    let hold_cpu0 = watch.cpu_seconds();
    let root = server.child.id();
    let hold_window = cpu_wait::Window::start(root);
    let rss_held = watch.rss();
    let kernel_held = kernel_socket_bytes();
    let server_conns = lock(&watch.seen)
        .latest
        .iter()
        .map(|s| s.connections)
        .sum::<u64>();
    live.emit(format!(
        "holding {} (server counts {}) for {} s with heartbeats",
        open, server_conns, args.hold
    ));
    watch.take_lag();
    std::thread::sleep(Duration::from_secs_f64(args.hold));
    let held_lag = watch.take_lag();
    watch.next();
    // What holding costs, the base that the phases' CPU per publish is taken above.
    let held_cpu = cpu_percent(hold_cpu0, watch.cpu_seconds());
    let held_stretch = hold_window.finish();
    let open_before_publish = floods.open();

    // 4. Graph publishes, then unicast, each with its own latency histogram.
    let phase = |label: &str, rate: f64, dist: Dist, path: &str| -> anyhow::Result<Phase> {
        floods.take_hist();
        watch.take_lag();
        let received0 = floods.messages();
        let cpu0 = watch.cpu_seconds();
        let window = cpu_wait::Window::start(root);
        live.emit(format!("{label}: {rate} msg/s for {} s", args.duration));
        let sent = load::msggen::run_with(
            MsggenArgs {
                url: match &publish_port {
                    Some(addr) => format!("http://{addr}"),
                    None => format!("{scheme}://{}", server.addr),
                },
                ca: super::context::tls_ca(),
                path: path.to_string(),
                rate,
                max: n,
                publishers: PUBLISHERS,
                dist,
                exponent: GRAPH_EXPONENT,
                duration: args.duration,
                size: args.size,
                seed: Some(9),
                quiet: true,
                nats: (args.publish_via == PublishVia::Nats).then(|| nats.clone()),
                ..Default::default()
            },
            &AtomicBool::new(false),
        )?;
        floods.wait_quiet(Duration::from_secs(15));
        watch.next();
        let cpu1 = watch.cpu_seconds();
        let stretch = window.finish();
        // Over the samples' own times: the phase's quiet tail is in the CPU read,
        // so it must be in the time divided by too (not only the sending seconds).
        let (cpu, window_s) = (cpu_percent(cpu0, cpu1), cpu1.0 - cpu0.0);
        Ok(Phase {
            received: floods.messages() - received0,
            hist: floods.take_hist(),
            lag_max: watch.take_lag(),
            cpu,
            window_s,
            stretch,
            sent,
        })
    };
    let graph_phase = phase(
        "graph publishes (power law)",
        args.graph_rate,
        Dist::Power,
        "/pub/%d",
    )?;
    let unicast_phase = phase(
        "unicast (inbox subjects)",
        args.unicast_rate,
        Dist::Uniform,
        INBOX_PATH,
    )?;
    // `--unicast-ladder`: unicast at rising rates, one step past the first miss.
    let ladder = climb(
        &args.unicast_ladder,
        |rate| phase("unicast ladder", rate, Dist::Uniform, INBOX_PATH),
        unicast_met,
    )?;
    let open_end = floods.open();

    // 5. Close, stop the server by SIGTERM, check that nothing it started is left.
    *lock(&floods_slot) = None;
    watch.stop(); // its thread held the other handle of the floods
    let floods =
        Arc::try_unwrap(floods).map_err(|_| anyhow::anyhow!("the floods are still shared"))?;
    let summaries = floods.finish()?;
    let seen = std::mem::take(&mut *lock(&watch.seen));
    let mut pids = seen.pids.clone();
    pids.extend(children_of(supervisor));
    pids.sort_unstable();
    pids.dedup();
    let stop_s = stop_supervisor(&server)?;
    drop(server);
    let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    eprintln!(
        "bench c1m: processes started: {} ({} left)",
        pids.iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(","),
        left.len()
    );

    let run = Run {
        n,
        nats,
        graph,
        start_s,
        held: Held {
            open,
            server_conns,
            open_before_publish,
            open_end,
            connect_s,
            rss_idle,
            rss_held,
            kernel_idle,
            kernel_held,
            lag: held_lag,
            cpu: held_cpu,
            stretch: held_stretch,
            gateways,
            routers,
        },
        phases: [graph_phase, unicast_phase],
        ladder,
        stopped: Stopped {
            floods: summaries,
            seen,
            pids,
            left,
            stop_s,
        },
        flood_names,
    };
    super::c1m_report::write(&mut report, &run, args, &dir)?;
    // 6. `--peer floor`: the same connections and rates on the C floor, side by side.
    if args.peer == Some(super::Peer::Floor) {
        live.emit("---- the C floor: the same connections, beats and unicast rates ----".into());
        let floor = super::c1m_floor::run(args, &dir, &live, n, gateways.max(1) as u32)?;
        super::c1m_floor::rows(&mut report, &run, &floor, n);
    }
    report.live = live.lines();
    Ok(report)
}

/// Percent of a core between two (sample time, CPU seconds) readings.
fn cpu_percent((t0, cpu0): (f64, f64), (t1, cpu1): (f64, f64)) -> f64 {
    (cpu1 - cpu0) / (t1 - t0).max(1e-3) * 100.0
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
