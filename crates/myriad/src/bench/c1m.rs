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
//! supervised server → flood → hold → graph publishes → unicast → close → stop the
//! supervisor with SIGTERM and check that no process it started is left.
//!
//! Not here: sampling and the floods (`c1m_watch`), a phase's rows and the per-process
//! table (`c1m_report`), the report's format (`report`).

use super::c1m_report::{phase_rows, process_table, Phase};
use super::c1m_watch::{alive, children_of, stop_supervisor, Floods, Watch};
use super::cpu_wait;
use super::held::{flood_args, Live};
use super::report::{bytes, count, memory_verdict, met, ms, Report};
use super::PublishVia;
use super::{BenchArgs, Ctx};
use crate::server_process::{kernel_socket_bytes, serve_command, ServerProcess};
use load::flood::{FloodArgs, Transport};
use load::msggen::{Dist, MsggenArgs};
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Friendships per new user of the graph (the Barabási–Albert m of issue 9).
const GRAPH_M: u32 = 15;
/// Power-law exponent of the graph publishes' subjects. The graph's oldest users (low
/// ids) are its hubs (~m·√N friends: ~15,000 at 1M), and msggen's power law favours
/// low ids: at exponent 1.0 a twentieth of all publishes hit user 1 and the mean
/// publish reaches ~2,800 users (2.8 M deliveries/s at 1,000 msg/s); at 0.5 the mean
/// is ~7.5·ln N ≈ 100 (median tens), the "median follower count ~30" of the issue.
const GRAPH_EXPONENT: f64 = 0.5;
/// Every user also follows an inbox subject of its own, `user × INBOX_FACTOR` (above
/// every user id), which nobody else follows: a publish to it reaches exactly that
/// user's connection, as unicast should (a publish to the user itself also reaches its
/// ~30 friends). msggen writes it through its path template (`/pub/%d0000000`).
const INBOX_FACTOR: u64 = 10_000_000;
const INBOX_PATH: &str = "/pub/%d0000000";
/// Opening gives up once no connection opened or failed for this long...
const OPEN_STALL: Duration = Duration::from_secs(30);
/// ...or after this long in all. A million opened in 26–38 s on a quick 2-core box
/// and in ~310 s on a slow one, its beats competing with the connects (2026-11-24):
/// 300 s cut that one off at 996,088.
const OPEN_MAX: Duration = Duration::from_secs(600);
/// Connections per flood child process (under the 20,000-file limit).
const PER_FLOOD_PROCESS: u64 = 18_000;
/// Publishing connections, each waiting for its reply: enough that the asked rates
/// are reached with replies of several milliseconds at 1 M (16 reached 560–670 graph
/// and 5,800–7,600 unicast publishes/s there: the phases were paced by the replies).
const PUBLISHERS: usize = 64;
/// Hard bound on every flood (they stop by themselves), seconds.
const FLOOD_MAX_TIME: f64 = 1_500.0;
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

    // 1. The friends graph, generated and bulk-loaded into the embedded store.
    let graph = dir.join("friends.txt");
    let db = dir.join("friends.db");
    for stale in [
        &db,
        &dir.join("friends.db-wal"),
        &dir.join("friends.db-shm"),
    ] {
        let _ = std::fs::remove_file(stale);
    }
    let t = Instant::now();
    load::friends::gen(load::friends::GenArgs {
        users: n.max(u64::from(GRAPH_M) + 1),
        m: GRAPH_M,
        seed: 1,
        out: graph.clone(),
    })?;
    let gen_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let loaded = load::friends::load_with_summary(load::friends::LoadArgs {
        file: graph.clone(),
        store: format!("sqlite:{}", db.display()),
        directed: false,
        on_bad_line: load::friends::BadLinePolicy::Reject,
    })?;
    let load_s = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&graph);
    anyhow::ensure!(
        n < INBOX_FACTOR,
        "c1m: at most {} connections",
        INBOX_FACTOR - 1
    );
    let inbox = dir.join("inbox.txt");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&inbox)?);
        for user in 1..=n {
            writeln!(w, "{user} {}", user * INBOX_FACTOR)?;
        }
        w.flush()?;
    }
    let inboxes = load::friends::load_with_summary(load::friends::LoadArgs {
        file: inbox.clone(),
        store: format!("sqlite:{}", db.display()),
        directed: true,
        on_bad_line: load::friends::BadLinePolicy::Reject,
    })?;
    let _ = std::fs::remove_file(&inbox);
    live.emit(format!(
        "graph: {} friendships generated in {gen_s:.1} s, {} subscriptions loaded in {load_s:.1} s",
        count(loaded.pairs as f64),
        count(loaded.edges_new as f64)
    ));

    // 2. The supervised server, with a nats-server of its own on a free port.
    let nats = format!("nats://127.0.0.1:{}", free_port()?);
    let mut serve = vec![
        "--processes".to_string(),
        args.servers.map_or("auto".into(), |s| s.to_string()),
        "--max-connections".into(),
        (n + n / 50 + 1_000).to_string(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--admin".into(),
        "127.0.0.1:0".into(),
        "--store".into(),
        format!("sqlite:{}", db.display()),
        "--nats".into(),
        nats.clone(),
        "--loops".into(),
        ctx.loops.unwrap_or(1).to_string(),
        "--csv".into(),
        dir.join("supervisor.csv").display().to_string(),
    ];
    serve.extend(heartbeat_flags(&args.server_flags));
    // `--publish-via router`: the router's own publish port, plain HTTP.
    let publish_port = match args.publish_via {
        PublishVia::Router => {
            let addr = format!("127.0.0.1:{}", free_port()?);
            serve.extend(["--publish-listen".into(), addr.clone()]);
            Some(addr)
        }
        PublishVia::Http | PublishVia::Nats => None,
    };
    if let Some((cert, key)) = super::context::tls_files() {
        // Forwarded to every gateway; the admin listeners stay plain for the probes.
        serve.extend(["--tls-cert".into(), cert.display().to_string()]);
        serve.extend(["--tls-key".into(), key.display().to_string()]);
    }
    // `--server-flag`s go to the supervisor, which gives them to every child (e.g.
    // `--server-flag=--router-shards=2`).
    serve.extend(args.server_flags.iter().cloned());
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
    let url = format!("{scheme}://{}/sub/%d", server.addr);
    let mut source = 2u64;
    let mut first_user = 1u64;
    let mut floods = Vec::new();
    let transports = [Transport::Stream, Transport::Sse, Transport::Ws];
    for (i, tr) in transports.into_iter().enumerate() {
        let share = n / 3 + u64::from((i as u64) < n % 3);
        if share == 0 {
            continue;
        }
        let name = format!("{tr:?}").to_lowercase();
        let mut fa = flood_args(
            vec![url.clone()],
            share,
            tr,
            Some(dir.join(format!("flood-{name}.csv"))),
        );
        fa.first_user = first_user;
        // A whole number of source addresses per flood process: each process then
        // owns its addresses, and the gateways' heartbeats, phased by peer address on
        // the grid, wake each process for its own connections in one instant.
        let procs = share.div_ceil(PER_FLOOD_PROCESS);
        let sources = share
            .div_ceil(load::doctor::connections_per_source())
            .div_ceil(procs)
            * procs;
        anyhow::ensure!(
            source + sources <= 255,
            "too many connections for 127.0.0.x sources"
        );
        fa.sources = vec![format!("127.0.0.{source}-127.0.0.{}", source + sources - 1)];
        fa.procs = procs.to_string();
        fa.connect_timeout = 30.0;
        // The three floods together keep flood's default in flight: with 3 × 4,096
        // waiting for their heads, ~2.5 % of 100,000 got a bad status (measured).
        fa.max_inflight = FloodArgs::default().max_inflight / transports.len();
        fa.max_time = FLOOD_MAX_TIME;
        source += sources;
        first_user += share;
        floods.push((name, fa));
    }
    let flood_names: Vec<String> = floods.iter().map(|(n, _)| n.clone()).collect();
    let floods = Arc::new(Floods::start(floods));
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
    let (held_wait, held_groups) = hold_window.finish();
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
        let cpu_wait = window.finish();
        // Over the samples' own times: the phase's quiet tail is in the CPU read,
        // so it must be in the time divided by too (not only the sending seconds).
        let (cpu, window_s) = (cpu_percent(cpu0, cpu1), cpu1.0 - cpu0.0);
        Ok(Phase {
            received: floods.messages() - received0,
            hist: floods.take_hist(),
            lag_max: watch.take_lag(),
            cpu,
            window_s,
            cpu_wait,
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

    // 6. The report.
    let failed: u64 = summaries.iter().map(|(_, s)| s.failed).sum();
    let failures: Vec<String> = summaries
        .iter()
        .filter(|(_, s)| s.failed > 0)
        .map(|(name, s)| format!("{name}: {}", s.failures.describe()))
        .collect();
    report.row(
        "concurrent connections held by one myriad",
        format!(
            "{} of {} (server counts {}; {} open before publishing, {} at the end; {failed} failed{})",
            count(open as f64),
            count(n as f64),
            count(server_conns as f64),
            count(open_before_publish as f64),
            count(open_end as f64),
            if failures.is_empty() { String::new() } else { format!(": {}", failures.join("; ")) }
        ),
        "≥ 99.99 % of N open at once (1M: ≥ 999,900)",
        met(open * 10_000 >= n * 9_999 && server_conns >= open),
    );
    report.fact(
        "connect rate",
        format!(
            "{}/s over {connect_s:.1} s (server's best second {}/s)",
            count(open as f64 / connect_s.max(1e-3)),
            count(seen.peak_connects)
        ),
    );
    let user = rss_held.saturating_sub(rss_idle) as f64 / open.max(1) as f64;
    report.row(
        "user space per connection (supervisor + router + gateways)",
        format!(
            "{} (RSS of all {} processes {} → {})",
            bytes(user),
            gateways + 1 + routers,
            bytes(rss_idle as f64),
            bytes(rss_held as f64)
        ),
        "≤ 256 B",
        memory_verdict(user),
    );
    let kernel = kernel_held.saturating_sub(kernel_idle) as f64 / (2 * open.max(1)) as f64;
    report.fact(
        "kernel memory per socket (slab + TCP buffers, machine-wide / 2 ends)",
        bytes(kernel),
    );
    report.fact("loop lag while holding (worst process, max)", ms(held_lag));
    report.fact(
        "server CPU while holding (all processes)",
        format!("{held_cpu:.0} % of a core"),
    );
    report.fact(
        "wait for a CPU while holding: server / load threads",
        held_wait,
    );
    report.fact(
        "CPU while holding: server (with nats-server) / load / rest of the machine",
        held_groups,
    );
    phase_rows(
        &mut report,
        "graph publish",
        "graph publishes",
        &graph_phase,
        held_cpu,
        (50_000, "≤ 50 ms"),
    );
    phase_rows(
        &mut report,
        "unicast",
        "unicast publishes",
        &unicast_phase,
        held_cpu,
        (5_000, "≤ 5 ms"),
    );
    report.fact(
        "graph: generate / bulk load / server start (index build)",
        format!(
            "{} friendships in {gen_s:.1} s / {} subscriptions into SQLite in {load_s:.1} s (+ {} inbox subscriptions) / {start_s:.1} s",
            count(loaded.pairs as f64),
            count(loaded.edges_new as f64),
            count(inboxes.edges_new as f64)
        ),
    );
    report.row(
        "processes left after the stop",
        format!(
            "{} of {} (supervisor stopped in {stop_s:.1} s)",
            left.len(),
            pids.len()
        ),
        "0",
        met(left.is_empty()),
    );
    report.fact(
        "processes",
        format!(
            "1 supervisor, {routers} router(s), {gateways} gateways, 1 nats-server; floods: {}",
            flood_names.join(", ")
        ),
    );
    report
        .sections
        .push(("Processes".into(), process_table(&seen)));
    report.note(format!(
        "One server: `myriad serve --processes {}{}` (supervisor, router, gateways sharing one \
         port with SO_REUSEPORT, NATS at {nats} started by the supervisor). Clients: one flood \
         per transport (stream, SSE, WebSocket), users 1..{n}, ≤ {PER_FLOOD_PROCESS} \
         connections per flood process, each process on its own source addresses 127.0.0.x, ≤ {} per address (connect() uses the even half of the local port range).",
        args.servers.map_or("auto".into(), |s| s.to_string()),
        args.server_flags.iter().map(|f| format!(" {f}")).collect::<String>(),
        load::doctor::connections_per_source()
    ));
    report.note(format!(
        "Graph publishes: msggen power law (exponent {GRAPH_EXPONENT}) over users 1..{n} of a \
         Barabási–Albert graph (m = {GRAPH_M}); each reaches the user's connection and its \
         friends'. Unicast: uniformly random users' inbox subjects (user × {INBOX_FACTOR}, \
         followed by that user only: one delivery each). {PUBLISHERS} {} publishers, {}-byte payloads, {} s \
         per phase. Latency is publish → receipt by flood, over every delivery of the phase.",
        match args.publish_via {
            PublishVia::Http => "HTTP (POST /pub to the gateways)",
            PublishVia::Nats => "NATS (requests to myriad.pub.<subject>, straight to the router)",
            PublishVia::Router => "HTTP to the router's publish port (--publish-listen)",
        },
        args.size, args.duration
    ));
    report.note(
        "User space: summed RSS of every server process (from the supervisor's /stats) with \
         all connections open minus the same before the first connection (the graph index is \
         in both). Kernel: machine-wide slab + TCP buffer growth over the same interval, / 2 \
         ends / connections.",
    );
    report.csvs.push(dir.join("server-total.csv"));
    report.csvs.push(dir.join("router.csv"));
    for name in &flood_names {
        report.csvs.push(dir.join(format!("flood-{name}.csv")));
    }
    report.live = live.lines();
    Ok(report)
}

/// Runs doctor's checks for `n`; applies its `sysctl -w` fixes when `raise` (root),
/// saying each; stops on what still blocks.
fn doctor(n: u64, raise: bool, live: &Live, report: &mut Report) -> anyhow::Result<()> {
    use load::doctor::Level;
    for c in load::doctor::checks(n) {
        if c.level == Level::Ok {
            continue;
        }
        let mut fixed = false;
        for fix in c.fix.iter().filter_map(|f| f.strip_prefix("sysctl -w ")) {
            let Some((key, value)) = fix.split_once('=') else {
                continue;
            };
            let value = value.trim_matches('"');
            let msg = if !raise {
                format!(
                    "doctor: {}: {} — not raised (--no-tune): {key}={value}",
                    c.name, c.detail
                )
            } else {
                match observe::procfs::write_sysctl(key, value) {
                    Ok(()) => {
                        fixed = true;
                        format!("doctor: {}: {} — raised {key} to {value}", c.name, c.detail)
                    }
                    Err(e) => format!("doctor: {}: could not set {key}={value}: {e}", c.name),
                }
            };
            live.emit(msg.clone());
            report.note(msg);
        }
        if !fixed {
            live.emit(format!("doctor: {}: {} ({:?})", c.name, c.detail, c.level));
        }
    }
    let blocking: Vec<String> = load::doctor::checks(n)
        .into_iter()
        .filter(|c| c.level == Level::Block)
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    anyhow::ensure!(
        blocking.is_empty(),
        "doctor: cannot hold {n} connections here: {}",
        blocking.join("; ")
    );
    Ok(())
}

/// Percent of a core between two (sample time, CPU seconds) readings.
fn cpu_percent((t0, cpu0): (f64, f64), (t1, cpu1): (f64, f64)) -> f64 {
    (cpu1 - cpu0) / (t1 - t0).max(1e-3) * 100.0
}

/// A free loopback port for the run's own nats-server.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// SPEC's 20-s heartbeats, unless a `--server-flag` sets its own (to see what the
/// beats cost, e.g. `--server-flag=--heartbeat=3600`).
fn heartbeat_flags(server_flags: &[String]) -> Vec<String> {
    let own = server_flags
        .iter()
        .any(|f| f == "--heartbeat" || f.starts_with("--heartbeat="));
    if own {
        vec![]
    } else {
        vec!["--heartbeat".into(), "20".into()]
    }
}

#[cfg(test)]
mod tests {
    use super::heartbeat_flags;

    #[test]
    fn the_spec_heartbeat_unless_a_server_flag_sets_one() {
        let flags =
            |f: &[&str]| heartbeat_flags(&f.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(flags(&[]), ["--heartbeat", "20"]);
        assert_eq!(
            flags(&["--heartbeat-grid=0.01"]),
            ["--heartbeat", "20"],
            "another flag"
        );
        assert!(flags(&["--heartbeat=3600"]).is_empty());
        assert!(flags(&["--heartbeat", "3600"]).is_empty());
    }
}
