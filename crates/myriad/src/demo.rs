//! `myriad demo` (SPEC G7): the whole system on one machine with no external service.
//!
//! It generates a Barabási–Albert friends graph, loads it into an embedded SQLite store,
//! starts `myriad serve` as a child process (a process may hold only so many files, and
//! the load must not share the server's), opens thousands of connections with `flood`,
//! publishes with `msggen` for a while, prints one live line per second, and ends with
//! a short report (also written as Markdown next to the CSV and the plots). The store
//! and every process it started are cleaned up; the report, CSVs and plots stay.

use crate::server_process::{kernel_socket_bytes, ServerProcess};
use anyhow::Context;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// `myriad demo`: a server, a friends graph, thousands of connections and a live view.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Users in the generated friends graph (ids 1..=N).
    #[arg(long, default_value_t = 10_000)]
    pub users: u64,
    /// Friendships per new user in the Barabási–Albert graph.
    #[arg(long, default_value_t = 5)]
    pub m: u32,
    /// Client connections to open (user i+1 for connection i, cycling over the users).
    #[arg(long, default_value_t = 10_000)]
    pub connections: u64,
    /// Transport of the connections: stream, sse, ws or poll.
    #[arg(long, value_enum, default_value = "stream")]
    pub transport: load::flood::Transport,
    /// Seconds of publishing.
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    /// Messages published per second (each reaches the user and their friends).
    #[arg(long, default_value_t = 500.0)]
    pub rate: f64,
    /// Where the report, CSVs and plots go.
    #[arg(long, default_value = "myriad-demo")]
    pub out: PathBuf,
}

pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.users > args.m as u64 + 1,
        "--users must exceed --m + 1"
    );
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let out = args.out.canonicalize()?;
    let work = tempfile::tempdir().context("cannot create a temporary directory")?;
    let started = Instant::now();

    // 1. The friends graph, into the embedded store.
    let graph = work.path().join("friends.txt");
    let db = work.path().join("demo.db");
    let store_url = format!("sqlite:{}", db.display());
    eprintln!(
        "demo: generating a Barabási–Albert graph of {} users (m = {})",
        args.users, args.m
    );
    load::friends::gen(load::friends::GenArgs {
        users: args.users,
        m: args.m,
        seed: 1,
        out: graph.clone(),
    })?;
    let loaded = load::friends::load_with_summary(load::friends::LoadArgs {
        file: graph,
        store: store_url.clone(),
        directed: false,
        on_bad_line: load::friends::BadLinePolicy::Reject,
    })?;
    eprintln!(
        "demo: {} friendships → {} subscriptions in {}",
        loaded.pairs,
        loaded.edges_new,
        db.display()
    );

    // 2. The server, in its own process.
    let server_csv = out.join("server.csv");
    let server = ServerProcess::start(&[
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--store".into(),
        store_url,
        "--csv".into(),
        server_csv.display().to_string(),
    ])?;
    std::thread::sleep(Duration::from_millis(300));
    let rss_idle = server.rss();
    let tcp_idle = kernel_socket_bytes();
    eprintln!(
        "demo: server pid {} on {} (RSS {} KiB)",
        server.child.id(),
        server.addr,
        rss_idle / 1024
    );

    // 3. The connections, held until publishing is over.
    let transport = args.transport;
    let flood_csv = out.join("flood.csv");
    let flood_args = load::flood::FloodArgs {
        urls: vec![format!("http://{}/sub/%d", server.addr)],
        connections: args.connections,
        rate: 0.0,
        transport,
        users: Some(format!("1-{}", args.users)),
        max_time: args.seconds + 120.0,
        csv: Some(flood_csv.clone()),
        quiet: true,
        ..Default::default()
    };
    let stop_flood = Arc::new(AtomicBool::new(false));
    let (tick_tx, ticks) = mpsc::channel();
    let flood = {
        let stop = stop_flood.clone();
        std::thread::spawn(move || {
            load::flood::run_until(flood_args, &stop, &mut |t| {
                let _ = tick_tx.send(t.clone());
            })
        })
    };

    // 4. Live view; publishing starts once every connection is open (or after 30 s).
    eprintln!("demo:   time   open  failed   msgs/s  deliv/s   p50 ms   p99 ms  server RSS/conn");
    let stop_msggen = Arc::new(AtomicBool::new(false));
    let mut msggen: Option<std::thread::JoinHandle<anyhow::Result<load::msggen::MsggenSummary>>> =
        None;
    let mut publish_window: Option<(Instant, Value)> = None; // when publishing began, server stats then
    let mut peak = (0u64, 0u64, 0u64); // open, server RSS, kernel socket memory
    let mut connected = (0u64, 0u64, 0u64); // the same, once connected and before publishing
    let mut last_out = 0u64;
    let mut lines = Vec::new();
    loop {
        let tick = match ticks.recv_timeout(Duration::from_secs(3)) {
            Ok(t) => t,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let stats = server.stats().unwrap_or(Value::Null);
        let out_total = stats["messages_out"].as_u64().unwrap_or(0);
        let rss = server.rss();
        if tick.open >= peak.0 {
            peak = (tick.open, rss, kernel_socket_bytes());
        }
        let per_conn = match tick.open {
            0 => "-".to_string(),
            open => (rss.saturating_sub(rss_idle) / open).to_string(),
        };
        let line = format!(
            "{:>6.0}s {:>6} {:>7} {:>8} {:>8} {:>8.2} {:>8.2} {:>10} B",
            tick.elapsed.as_secs_f64(),
            tick.open,
            tick.failed,
            tick.messages,
            out_total.saturating_sub(last_out),
            tick.lat_p50_us as f64 / 1000.0,
            tick.lat_p99_us as f64 / 1000.0,
            per_conn
        );
        eprintln!("demo: {line}");
        lines.push(line);
        last_out = out_total;
        let all_open = tick.open + tick.failed >= args.connections;
        if msggen.is_none() && (all_open || tick.elapsed > Duration::from_secs(30)) {
            // Memory of idle connections: measured before any message, so no history yet.
            connected = (tick.open, rss, kernel_socket_bytes());
            publish_window = Some((Instant::now(), stats.clone()));
            let msggen_args = load::msggen::MsggenArgs {
                url: format!("http://{}", server.addr),
                rate: args.rate,
                max: args.users,
                duration: args.seconds,
                quiet: true,
                ..Default::default()
            };
            let stop = stop_msggen.clone();
            msggen = Some(std::thread::spawn(move || {
                load::msggen::run_with(msggen_args, &stop)
            }));
        }
        if let Some(handle) = &msggen {
            if handle.is_finished() && !stop_flood.load(Ordering::Relaxed) {
                // Let the last deliveries land, then close everything.
                std::thread::sleep(Duration::from_secs(1));
                stop_flood.store(true, Ordering::Relaxed);
            }
        }
    }
    let flood = flood
        .join()
        .map_err(|_| anyhow::anyhow!("flood panicked"))??;
    let published = match msggen {
        Some(h) => Some(h.join().map_err(|_| anyhow::anyhow!("msggen panicked"))??),
        None => None,
    };
    let end_stats = server.stats().unwrap_or(Value::Null);
    drop(server);

    // 5. The report.
    let start_stats = publish_window.map(|w| w.1).unwrap_or(Value::Null);
    let window = published.as_ref().map_or(1.0, |p| p.elapsed_s.max(0.001));
    let deliveries = end_stats["messages_out"].as_u64().unwrap_or(0)
        - start_stats["messages_out"].as_u64().unwrap_or(0);
    let user_idle = connected.1.saturating_sub(rss_idle) as f64 / connected.0.max(1) as f64;
    let user_peak = peak.1.saturating_sub(rss_idle) as f64 / peak.0.max(1) as f64;
    // Both ends of every loopback connection are on this machine: halve it.
    let kernel_per_conn =
        connected.2.saturating_sub(tcp_idle) as f64 / (2 * connected.0.max(1)) as f64;
    let plots = observe::plot::render(&observe::plot::PlotArgs {
        files: vec![server_csv.clone(), flood_csv.clone()],
        out: out.clone(),
        window: 10,
        font: None,
    });
    let plots = match plots {
        Ok(files) => format!("{} charts in {}", files.len(), out.display()),
        Err(e) => format!("no charts ({e:#})"),
    };
    let report = format!(
        "# myriad demo\n\n\
         | what | value |\n|---|---|\n\
         | friends graph | {users} users, m = {m}, {pairs} friendships |\n\
         | connections held ({transport}) | {open} of {asked} ({failed} failed), {rate:.0} connects/s |\n\
         | server memory per idle connection | {user:.0} B user space (RSS growth / connections, before publishing) |\n\
         | … with history filled | {user_peak:.0} B user space (each user keeps its last messages for resume) |\n\
         | kernel memory per socket | {kernel:.0} B (slab + TCP buffers, machine-wide growth / 2 ends / connections) |\n\
         | published | {sent} messages at {achieved:.0}/s ({errors} errors) |\n\
         | deliveries | {deliveries} in {window:.1} s = {dps:.0}/s |\n\
         | publish → receive latency | p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms |\n\
         | total time | {total:.1} s |\n\n\
         Server CSV: `{scsv}`; flood CSV: `{fcsv}`; {plots}.\n\n\
         ## Live view\n\n```\n  time   open  failed   msgs/s  deliv/s   p50 ms   p99 ms  server RSS/conn\n{live}\n```\n",
        users = args.users,
        m = args.m,
        pairs = loaded.pairs,
        transport = format!("{:?}", args.transport).to_lowercase(),
        open = flood.peak_open,
        asked = args.connections,
        failed = flood.failed,
        rate = flood.connect_rate,
        user = user_idle,
        user_peak = user_peak,
        kernel = kernel_per_conn,
        sent = published.as_ref().map_or(0, |p| p.sent),
        achieved = published.as_ref().map_or(0.0, |p| p.achieved_rate),
        errors = published.as_ref().map_or(0, |p| p.errors),
        deliveries = deliveries,
        window = window,
        dps = deliveries as f64 / window,
        p50 = flood.lat_p50_us as f64 / 1000.0,
        p99 = flood.lat_p99_us as f64 / 1000.0,
        max = flood.lat_max_us as f64 / 1000.0,
        total = started.elapsed().as_secs_f64(),
        scsv = server_csv.display(),
        fcsv = flood_csv.display(),
        plots = plots,
        live = lines.join("\n"),
    );
    let report_path = out.join("report.md");
    std::fs::write(&report_path, &report)?;
    println!("{}", summary_text(&report));
    println!("Report: {}", report_path.display());
    drop(work); // removes the store and the graph file
    Ok(())
}

/// The report's table, for the terminal.
fn summary_text(report: &str) -> String {
    report
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| what"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            format!(
                "{:<36} {}",
                cells.first().copied().unwrap_or(""),
                cells.get(1).copied().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
