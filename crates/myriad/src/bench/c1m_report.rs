//! `bench c1m`'s report: what a run measured (connections held, memory, holding's
//! cost, each publishing phase, the stop) as rows against issue 9's targets, the
//! per-process table, and how the run was made.

use super::c1m_cost::{box_budget, per_publish_us};
use super::c1m_graph::{Graph, GRAPH_EXPONENT, GRAPH_M, INBOX_FACTOR};
use super::c1m_setup::{tick_groups, PER_FLOOD_PROCESS, PUBLISHERS};
use super::c1m_watch::Seen;
use super::cpu_wait::Stretch;
use super::ladder::{MIN_ACHIEVED, MIN_STEP_SECS};
use super::report::{bytes, count, memory_verdict, met, ms, Report};
use super::{BenchArgs, PublishVia};
use load::flood::stats::quantile;
use load::flood::{FloodSummary, LatencyAt};
use load::msggen::MsggenSummary;
use std::path::Path;

/// Issue 9's latency targets at a million: p99 of graph and of unicast publishes, µs.
pub(super) const GRAPH_P99_US: u64 = 50_000;
pub(super) const UNICAST_P99_US: u64 = 5_000;

/// One publishing phase's figures.
pub(super) struct Phase {
    pub sent: MsggenSummary,
    pub received: u64,
    pub hist: hdrhistogram::Histogram<u64>,
    pub lag_max: u64,
    /// All server processes' CPU over the phase, percent of one core...
    pub cpu: f64,
    /// ...over this many seconds (the sending and the quiet tail after it).
    pub window_s: f64,
    /// Server and load threads' wait for a CPU over the phase, the CPU of server,
    /// load and the rest of the machine, and the whole machine's busy share.
    pub stretch: Stretch,
}

impl Phase {
    /// The latency (µs) at quantile `x` of the phase's deliveries; 0 without any.
    fn latency_at(&self, x: f64) -> u64 {
        quantile(&self.hist, x)
    }
}

/// The report rows of one publishing phase: deliveries, latency against its target
/// (µs, as text), CPU, and the CPU per publish above holding's (`held`): what a
/// message costs, comparable between runs at different rates, and what the `asked`
/// rate needs of the whole box.
fn phase_rows(
    report: &mut Report,
    (what, plural): (&str, &str),
    p: &Phase,
    (held, asked): (&Held, f64),
    (target_us, target): (u64, &str),
) {
    let held_cpu = held.cpu;
    let q = |x: f64| p.latency_at(x);
    let (p50, p99, p999) = (q(0.5), q(0.99), q(0.999));
    report.row(
        &format!("{plural}: deliveries received / reported by the server"),
        format!(
            "{} / {} ({} published at {}/s, {} errors; {}/s deliveries)",
            count(p.received as f64),
            count(p.sent.deliveries as f64),
            count(p.sent.sent as f64),
            count(p.sent.achieved_rate),
            p.sent.errors,
            count(p.sent.deliveries as f64 / p.sent.elapsed_s.max(1e-3))
        ),
        "all",
        met(p.received == p.sent.deliveries && p.sent.sent > 0 && p.sent.errors == 0),
    );
    report.row(
        &format!("{what} latency p50 / p99 / p99.9 / max"),
        format!(
            "{} / {} / {} / {}",
            ms(p50),
            ms(p99),
            ms(p999),
            ms(p.hist.max())
        ),
        &format!("p99 {target}"),
        met(p99 > 0 && p99 <= target_us),
    );
    report.fact(
        &format!("{plural}: server CPU (all processes) / worst loop lag"),
        format!("{:.0} % of a core / {}", p.cpu, ms(p.lag_max)),
    );
    report.fact(
        &format!("{plural}: server CPU per publish above holding"),
        per_publish_us(p.cpu, held_cpu, p.window_s, p.sent.sent)
            .map_or_else(|| "—".into(), |us| format!("{us:.0} µs")),
    );
    report.fact(
        &format!("{plural}: wait for a CPU, server / load threads"),
        p.stretch.wait.clone(),
    );
    report.fact(
        &format!("{plural}: CPU of server (with nats-server) / load / rest of the machine"),
        p.stretch.groups.clone(),
    );
    let Some((box_held, box_now)) = held.stretch.machine.zip(p.stretch.machine) else {
        return;
    };
    let window = (p.stretch.secs, p.sent.sent);
    if let Some(text) = box_budget((box_held.busy, box_now.busy), window, asked, box_now.of) {
        report.fact(
            &format!("{plural}: the whole box's CPU / what the asked rate needs of it"),
            text,
        );
    }
}

/// Whether a unicast step at `rate` met the target: ≥ 90 % of the rate published,
/// every delivery the server reported received without error, p99 ≤ 5 ms.
pub(super) fn unicast_met(p: &Phase, rate: f64) -> bool {
    p.sent.sent > 0
        && p.sent.errors == 0
        && p.received == p.sent.deliveries
        && p.sent.achieved_rate >= MIN_ACHIEVED * rate
        && !p.hist.is_empty()
        && p.latency_at(0.99) <= UNICAST_P99_US
}

/// The unicast ladder's figure (the highest rate met below the first miss), its
/// table, and `unicast-ladder.csv` for the ladder chart (with the 5-ms target as its
/// limit line).
fn ladder_parts(
    report: &mut Report,
    ladder: &[(f64, Phase)],
    held_cpu: f64,
    step_secs: f64,
    dir: &Path,
) -> anyhow::Result<()> {
    let met_until = ladder
        .iter()
        .take_while(|(rate, p)| unicast_met(p, *rate))
        .last()
        .map(|(rate, _)| *rate);
    let valid = step_secs >= MIN_STEP_SECS;
    report.fact(
        "unicast ladder: highest rate with p99 ≤ 5 ms (every step below it met too)",
        match met_until {
            Some(rate) => format!("{}/s", count(rate)),
            None => format!("none: the first step ({}/s) missed", count(ladder[0].0)),
        } + if valid {
            ""
        } else {
            " (steps under 10 s: not a figure)"
        },
    );
    let mut table = String::from(
        "| asked /s | published /s | received / reported | p50 | p99 | p99.9 | max | server CPU | per publish above holding | met? |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let path = dir.join("unicast-ladder.csv");
    let mut csv = String::from(
        "time_s,rate_msg_s,achieved_msg_s,received,reported,lat_p50_us,lat_p99_us,lat_max_us,limit_us,server_cpu_pct,ok\n",
    );
    let mut t = 0.0;
    for (rate, p) in ladder {
        let q = |x: f64| p.latency_at(x);
        let ok = unicast_met(p, *rate);
        table.push_str(&format!(
            "| {} | {} | {} / {} | {} | {} | {} | {} | {:.0} % | {} | {} |\n",
            count(*rate),
            count(p.sent.achieved_rate),
            count(p.received as f64),
            count(p.sent.deliveries as f64),
            ms(q(0.5)),
            ms(q(0.99)),
            ms(q(0.999)),
            ms(p.hist.max()),
            p.cpu,
            per_publish_us(p.cpu, held_cpu, p.window_s, p.sent.sent)
                .map_or_else(|| "—".into(), |us| format!("{us:.0} µs")),
            if ok { "yes" } else { "no" },
        ));
        t += p.window_s;
        csv.push_str(&format!(
            "{t:.1},{rate},{:.1},{},{},{},{},{},{UNICAST_P99_US},{:.1},{}\n",
            p.sent.achieved_rate,
            p.received,
            p.sent.deliveries,
            q(0.5),
            q(0.99),
            p.hist.max(),
            p.cpu,
            u8::from(ok)
        ));
    }
    std::fs::write(&path, csv)?;
    report.csvs.push(path);
    report.sections.push((
        "Unicast ladder".into(),
        format!(
            "Unicast publishes to inbox subjects at rising rates, {step_secs} s each, while \
             holding every connection with heartbeats; a step meets the target when its \
             publishers reached 90 % of the rate, every delivery arrived and its p99 is \
             within 5 ms. The ladder stops one step after the first miss.\n\n{table}"
        ),
    ));
    Ok(())
}

/// What one c1m run measured while it held its connections.
pub(super) struct Held {
    pub open: u64,
    /// Connections the server processes counted once all were open.
    pub server_conns: u64,
    pub open_before_publish: u64,
    pub open_end: u64,
    pub connect_s: f64,
    /// Summed RSS of the server processes before the first connection and with all
    /// open; the machine's socket memory at the same two moments.
    pub rss_idle: u64,
    pub rss_held: u64,
    pub kernel_idle: u64,
    pub kernel_held: u64,
    /// Worst loop lag and the server's CPU (percent of a core) while holding...
    pub lag: u64,
    pub cpu: f64,
    /// ...and threads' wait for a CPU, CPU per group and the whole machine's.
    pub stretch: Stretch,
    pub gateways: usize,
    pub routers: usize,
}

/// How the run ended: the floods' summaries, what the watcher saw, the processes
/// started and those still alive after the supervisor's stop.
pub(super) struct Stopped {
    pub floods: Vec<(String, FloodSummary)>,
    pub seen: Seen,
    pub pids: Vec<u32>,
    pub left: Vec<u32>,
    pub stop_s: f64,
}

/// A whole c1m run, for its report.
pub(super) struct Run {
    pub n: u64,
    pub nats: String,
    pub graph: Graph,
    /// The supervised server's start (router index built from the store), seconds.
    pub start_s: f64,
    pub held: Held,
    /// Graph publishes, then unicast.
    pub phases: [Phase; 2],
    /// `--unicast-ladder`: each step's asked rate and figures.
    pub ladder: Vec<(f64, Phase)>,
    pub stopped: Stopped,
    pub flood_names: Vec<String>,
}

/// The report of `run`: connections held, memory, holding's cost, both phases, the
/// stop, the processes, and how it was run.
pub(super) fn write(
    report: &mut Report,
    run: &Run,
    args: &BenchArgs,
    dir: &Path,
) -> anyhow::Result<()> {
    let &Run {
        n,
        ref nats,
        ref graph,
        start_s,
        ref held,
        phases: [ref graph_phase, ref unicast_phase],
        ref ladder,
        ref stopped,
        ref flood_names,
    } = run;
    let Stopped {
        floods: summaries,
        seen,
        pids,
        left,
        stop_s,
    } = stopped;
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
            count(held.open as f64),
            count(n as f64),
            count(held.server_conns as f64),
            count(held.open_before_publish as f64),
            count(held.open_end as f64),
            if failures.is_empty() { String::new() } else { format!(": {}", failures.join("; ")) }
        ),
        "≥ 99.99 % of N open at once (1M: ≥ 999,900)",
        met(held.open * 10_000 >= n * 9_999 && held.server_conns >= held.open),
    );
    report.fact(
        "connect rate",
        format!(
            "{}/s over {:.1} s (server's best second {}/s)",
            count(held.open as f64 / held.connect_s.max(1e-3)),
            held.connect_s,
            count(seen.peak_connects)
        ),
    );
    let user = held.rss_held.saturating_sub(held.rss_idle) as f64 / held.open.max(1) as f64;
    report.row(
        "user space per connection (supervisor + router + gateways)",
        format!(
            "{} (RSS of all {} processes {} → {})",
            bytes(user),
            held.gateways + 1 + held.routers,
            bytes(held.rss_idle as f64),
            bytes(held.rss_held as f64)
        ),
        "≤ 256 B",
        memory_verdict(user),
    );
    let kernel =
        held.kernel_held.saturating_sub(held.kernel_idle) as f64 / (2 * held.open.max(1)) as f64;
    report.fact(
        "kernel memory per socket (slab + TCP buffers, machine-wide / 2 ends)",
        bytes(kernel),
    );
    report.fact("loop lag while holding (worst process, max)", ms(held.lag));
    report.fact(
        "server CPU while holding (all processes)",
        format!("{:.0} % of a core", held.cpu),
    );
    report.fact(
        "wait for a CPU while holding: server / load threads",
        held.stretch.wait.clone(),
    );
    report.fact(
        "CPU while holding: server (with nats-server) / load / rest of the machine",
        held.stretch.groups.clone(),
    );
    if let Some(machine) = held.stretch.machine {
        report.fact(
            "the whole box's CPU while holding",
            format!("{:.0} % of {:.0} %", machine.busy, machine.of),
        );
        let s = held.stretch.shares;
        report.fact(
            "the clients' share of the box while holding (floods: each beat is read by one)",
            format!(
                "{:.0} % of a core, {:.0} % of what the box spent (server {:.0} %, rest {:.0} %: the kernel's softirqs and the monitor)",
                s.load,
                s.load / machine.busy.max(1e-3) * 100.0,
                s.server,
                s.other
            ),
        );
    }
    phase_rows(
        report,
        ("graph publish", "graph publishes"),
        graph_phase,
        (held, args.graph_rate),
        (GRAPH_P99_US, "≤ 50 ms"),
    );
    phase_rows(
        report,
        ("unicast", "unicast publishes"),
        unicast_phase,
        (held, args.unicast_rate),
        (UNICAST_P99_US, "≤ 5 ms"),
    );
    report.fact(
        "graph: generate / bulk load / server start (index build)",
        format!(
            "{} friendships in {:.1} s / {} subscriptions into SQLite in {:.1} s (+ {} inbox subscriptions) / {start_s:.1} s",
            count(graph.pairs as f64),
            graph.gen_s,
            count(graph.edges as f64),
            graph.load_s,
            count(graph.inbox_edges as f64)
        ),
    );
    report.row(
        "processes left after the stop",
        format!(
            "{} of {} (supervisor stopped in {:.1} s)",
            left.len(),
            pids.len(),
            stop_s
        ),
        "0",
        met(left.is_empty()),
    );
    report.fact(
        "processes",
        format!(
            "1 supervisor, {} router(s), {} gateways, 1 nats-server; floods: {}",
            held.routers,
            held.gateways,
            flood_names.join(", ")
        ),
    );
    report
        .sections
        .push(("Processes".into(), process_table(seen)));
    report.note(format!(
        "One server: `myriad serve --processes {}{}` (supervisor, router, gateways sharing one \
         port with SO_REUSEPORT and ticking in {} groups (`--tick-groups`), NATS at {nats} \
         started by the supervisor). Clients: one flood \
         per transport (stream, SSE, WebSocket), users 1..{n}, ≤ {PER_FLOOD_PROCESS} \
         connections per flood process, each process on its own source addresses 127.0.0.x, ≤ {} per address (connect() uses the even half of the local port range).",
        args.servers.map_or("auto".into(), |s| s.to_string()),
        args.server_flags.iter().map(|f| format!(" {f}")).collect::<String>(),
        tick_groups(&args.server_flags),
        host::doctor::connections_per_source()
    ));
    report.note(format!(
        "Graph publishes: msggen power law (exponent {GRAPH_EXPONENT}) over users 1..{n} of a \
         Barabási–Albert graph (m = {GRAPH_M}); each reaches the user's connection and its \
         friends'. Unicast: uniformly random users' inbox subjects (user × {INBOX_FACTOR}, \
         followed by that user only: one delivery each). {PUBLISHERS} {} publishers, {}-byte payloads, {} s \
         per phase. Latency is publish → {}, over every delivery of the phase.{}",
        match args.publish_via {
            PublishVia::Http => "HTTP (POST /pub to the gateways)",
            PublishVia::Nats => "NATS (requests to myriad.pub.<subject>, straight to the router)",
            PublishVia::Router => "HTTP to the router's publish port (--publish-listen)",
        },
        args.size,
        args.duration,
        match args.client_latency {
            LatencyAt::Read => "read by flood",
            LatencyAt::Socket =>
                "arrival at the client's socket (`--client-latency socket`: the kernel's \
                 receive stamp; the clients' own wait for a CPU is left out)",
        },
        args.client_nice
            .map(|n| format!(" The floods ran at niceness {n} (`--client-nice`)."))
            .unwrap_or_default()
    ));
    report.note(
        "User space: summed RSS of every server process (from the supervisor's /stats) with \
         all connections open minus the same before the first connection (the graph index is \
         in both). Kernel: machine-wide slab + TCP buffer growth over the same interval, / 2 \
         ends / connections.",
    );
    report.csvs.push(dir.join("server-total.csv"));
    report.csvs.push(dir.join("router.csv"));
    for name in flood_names {
        report.csvs.push(dir.join(format!("flood-{name}.csv")));
    }
    if !ladder.is_empty() {
        ladder_parts(report, ladder, held.cpu, args.duration, dir)?;
    }
    Ok(())
}

/// The per-process table: role, peak connections, CPU over the run, RSS, loop lag.
fn process_table(seen: &Seen) -> String {
    let mut t = String::from(
        "| pid | role | connections (max) | CPU s | RSS max | loop lag p99 max | loop lag max |\n|---|---|---|---|---|---|---|\n",
    );
    for (pid, p) in &seen.peaks {
        t.push_str(&format!(
            "| {pid} | {} | {} | {:.1} | {} | {} | {} |\n",
            p.role,
            p.connections_max,
            p.cpu_last - p.cpu_first.unwrap_or(p.cpu_last),
            bytes(p.rss_max as f64),
            ms(p.lag_p99_max),
            ms(p.lag_max)
        ));
    }
    t
}
