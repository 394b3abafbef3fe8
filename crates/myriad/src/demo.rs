//! `myriad demo` (SPEC G7): the whole system on one machine with no external service.
//!
//! It generates a Barabási–Albert friends graph, loads it into an embedded SQLite store,
//! starts `myriad serve` as a child process (a process may hold only so many files, and
//! the load must not share the server's) with its admin listener, so the dashboard can be
//! watched live during the run, opens thousands of connections with `flood`, publishes
//! with `msggen` for a while, prints one live line per second (`live`), and ends with a
//! report (`report`) written as Markdown next to the CSVs, the charts and the server's
//! log. Every process it started is stopped and the store removed, unless `--keep`
//! leaves the server running with the graph loaded.

mod live;
mod report;

use crate::server_process::ServerProcess;
use anyhow::Context;
use observe::kernel::SocketMemory;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
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
    /// Where the report, CSVs, charts and the server's log go (created if missing).
    #[arg(long, default_value = "myriad-demo")]
    pub out: PathBuf,
    /// The server's client and API address (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// The server's admin address: live dashboard at /, /metrics, /stats, /history
    /// (port 0: any free port; the URL is printed at the start).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub admin: SocketAddr,
    /// Leave the server running afterwards with the graph loaded (its store in --out),
    /// and print the curl lines to try and how to stop it.
    #[arg(long)]
    pub keep: bool,
    /// `self-signed`: the server speaks TLS (`https://`, `wss://`) with a certificate
    /// generated at start; flood and msggen trust that certificate.
    #[arg(long, value_enum)]
    pub tls: Option<gateway::config::TlsMode>,
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
    eprintln!(
        "demo: the report, CSVs, charts and the server's log go to {}",
        out.display()
    );

    // 1. The friends graph, into the embedded store: in the temporary directory, or in
    //    --out when the server stays running after the demo.
    let graph = work.path().join("friends.txt");
    let db = if args.keep {
        fresh_store(&out.join("demo.db"))?
    } else {
        work.path().join("demo.db")
    };
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

    // 2. The server, in its own process, logging to a file so the live view stays clean.
    let server_csv = out.join("server.csv");
    let flood_csv = out.join("flood.csv");
    let server_log = out.join("server.log");
    let mut serve_args = vec![
        "--listen".into(),
        args.listen.to_string(),
        "--admin".into(),
        args.admin.to_string(),
        "--store".into(),
        store_url,
        "--csv".into(),
        server_csv.display().to_string(),
    ];
    if args.tls.is_some() {
        serve_args.extend(["--tls".into(), "self-signed".into()]);
    }
    let server = ServerProcess::start_logging_to(&serve_args, &server_log)?;
    // Where `serve --tls self-signed` wrote the certificate clients trust.
    let ca = args.tls.map(|_| {
        std::env::temp_dir()
            .join(format!("myriad-tls-{}", server.child.id()))
            .join("cert.pem")
    });
    let scheme = if ca.is_some() { "https" } else { "http" };
    if let Some(ca) = &ca {
        eprintln!(
            "demo: TLS with a SELF-SIGNED certificate generated by the server (browsers warn); clients trust {}",
            ca.display()
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    let rss_idle = server.rss();
    let kernel_idle = SocketMemory::read();
    eprintln!(
        "demo: server pid {} on {} (RSS {} KiB), log in {}",
        server.child.id(),
        server.addr,
        rss_idle / 1024,
        server_log.display()
    );
    match server.admin {
        Some(admin) => {
            eprintln!(
                "demo: dashboard: http://{admin}/  (open it now to watch connections, memory and deliveries live)"
            );
            eprintln!(
                "demo: channels example (the JavaScript client): http://{admin}/example/?server={scheme}://{}  (demo:ticker gets a message a second)",
                server.addr
            );
        }
        None => eprintln!("demo: the server did not report its admin address; no dashboard"),
    }
    // The example page's channel: one message a second while the demo runs.
    let stop_ticker = Arc::new(AtomicBool::new(false));
    let ticker = (ca.is_none()).then(|| ticker(server.addr, stop_ticker.clone()));

    // 3. The connections, held until publishing is over.
    let flood_args = load::flood::FloodArgs {
        urls: vec![format!("{scheme}://{}/sub/%d", server.addr)],
        ca: ca.clone(),
        connections: args.connections,
        rate: 0.0,
        transport: args.transport,
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
    eprintln!("{}", live::HEADER);
    let stop_msggen = Arc::new(AtomicBool::new(false));
    let mut msggen: Option<std::thread::JoinHandle<anyhow::Result<load::msggen::MsggenSummary>>> =
        None;
    let mut start_stats = Value::Null; // server counters when publishing began
    let mut peak = (0u64, 0u64); // open connections, server RSS
    let mut connected: Option<(u64, u64, SocketMemory)> = None; // the same once all are open, before publishing
    let mut rates = live::ServerRates::default();
    let mut last_second = None;
    let mut lines = Vec::new();
    loop {
        let tick = match ticks.recv_timeout(Duration::from_secs(3)) {
            Ok(t) => t,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let stats = server.stats().unwrap_or(Value::Null);
        let (published_per_s, delivered_per_s) = rates.update(Instant::now(), &stats);
        let rss = server.rss();
        if tick.open >= peak.0 {
            peak = (tick.open, rss);
        }
        let second = tick.elapsed.as_secs_f64().round() as u64;
        // After the stop the flood reports once more while closing: not a second of the run.
        if !stop_flood.load(Ordering::Relaxed) && last_second != Some(second) {
            last_second = Some(second);
            let line = live::Line {
                second,
                open: tick.open,
                failed: tick.failed,
                published_per_s,
                delivered_per_s,
                // No stamped message in this second: no latency to show.
                latency_us: (tick.messages > 0 && tick.lat_p99_us > 0)
                    .then_some((tick.lat_p50_us, tick.lat_p99_us)),
                rss_per_conn: (tick.open > 0).then(|| rss.saturating_sub(rss_idle) / tick.open),
            }
            .render();
            eprintln!("{line}");
            lines.push(line);
        }
        let all_open = tick.open + tick.failed >= args.connections;
        if msggen.is_none() && (all_open || tick.elapsed > Duration::from_secs(30)) {
            // Memory of idle connections: measured before any message, so no history yet.
            connected = Some((tick.open, rss, SocketMemory::read()));
            start_stats = stats.clone();
            let msggen_args = load::msggen::MsggenArgs {
                url: format!("{scheme}://{}", server.addr),
                ca: ca.clone(),
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
    stop_ticker.store(true, Ordering::Relaxed);
    if let Some(ticker) = ticker {
        let _ = ticker.join();
    }
    let flood = flood
        .join()
        .map_err(|_| anyhow::anyhow!("flood panicked"))??;
    let published = match msggen {
        Some(h) => Some(h.join().map_err(|_| anyhow::anyhow!("msggen panicked"))??),
        None => None,
    };
    let end_stats = server.stats().unwrap_or(Value::Null);

    // 5. The report.
    let counter = |v: &Value| v["messages_out"].as_u64().unwrap_or(0);
    let (open_idle, rss_connected, kernel_connected) =
        connected.unwrap_or((0, rss_idle, kernel_idle));
    let charts = viewer::plot::render(&viewer::plot::PlotArgs {
        files: vec![server_csv.clone(), flood_csv.clone()],
        out: out.clone(),
        window: 10,
        font: None,
    })
    .map_err(|e| format!("{e:#}"));
    let figures = report::Figures {
        users: args.users,
        m: args.m,
        pairs: loaded.pairs,
        transport: format!("{:?}", args.transport).to_lowercase()
            + if ca.is_some() {
                " over TLS (self-signed certificate)"
            } else {
                ""
            },
        open: flood.peak_open,
        asked: args.connections,
        failed: flood.failed,
        connect_rate: flood.connect_rate,
        user_idle: rss_connected.saturating_sub(rss_idle) as f64 / open_idle.max(1) as f64,
        user_peak: peak.1.saturating_sub(rss_idle) as f64 / peak.0.max(1) as f64,
        kernel: kernel_connected.per_socket_since(&kernel_idle),
        sent: published.as_ref().map_or(0, |p| p.sent),
        achieved_rate: published.as_ref().map_or(0.0, |p| p.achieved_rate),
        errors: published.as_ref().map_or(0, |p| p.errors),
        deliveries: counter(&end_stats).saturating_sub(counter(&start_stats)),
        window_s: published.as_ref().map_or(1.0, |p| p.elapsed_s.max(0.001)),
        latency_ms: (
            flood.lat_p50_us as f64 / 1000.0,
            flood.lat_p99_us as f64 / 1000.0,
            flood.lat_max_us as f64 / 1000.0,
        ),
        total_s: started.elapsed().as_secs_f64(),
        charts,
        live: lines,
    };
    let text = report::markdown(&figures);
    let report_path = out.join("report.md");
    std::fs::write(&report_path, &text)?;
    println!("{}", report::summary_text(&text));
    println!(
        "\nReport: {}\nCharts, CSVs and the server's log: {}",
        report_path.display(),
        out.display()
    );
    if args.keep {
        let (addr, admin) = (server.addr, server.admin);
        let pid = server.detach();
        print_keep_help(pid, addr, admin, &db, ca.as_deref());
    } else {
        drop(server);
    }
    drop(work); // removes the graph file, and the store unless it is kept
    Ok(())
}

/// A store file with nothing in it: a kept demo's store from an earlier run is removed,
/// so the new graph is loaded into an empty store.
fn fresh_store(db: &Path) -> anyhow::Result<PathBuf> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let f = PathBuf::from(format!("{}{suffix}", db.display()));
        match std::fs::remove_file(&f) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot remove {}", f.display())),
        }
    }
    Ok(db.to_path_buf())
}

/// What to try against a kept server, and how to stop it.
/// Publishes `tick <n>` to channel `demo:ticker` once a second until `stop` (the
/// example page's channel; plain HTTP, loopback: the API needs no key there).
fn ticker(addr: SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    use std::io::Write as _;
    std::thread::spawn(move || {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let body = format!("tick {n}");
            if let Ok(mut s) = std::net::TcpStream::connect(addr) {
                let _ = write!(
                    s,
                    "POST /pub/demo:ticker HTTP/1.1\r\nHost: demo\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = std::io::Read::read_to_end(&mut s, &mut Vec::new());
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}

fn print_keep_help(
    pid: u32,
    addr: SocketAddr,
    admin: Option<SocketAddr>,
    db: &Path,
    ca: Option<&Path>,
) {
    println!(
        "\nThe server keeps running (pid {pid}) with the friends graph in {}:",
        db.display()
    );
    if let Some(ca) = ca {
        println!(
            "  TLS with a self-signed certificate: use https://{addr} and curl --cacert {}",
            ca.display()
        );
    }
    if let Some(admin) = admin {
        println!("  dashboard:  http://{admin}/   (Prometheus: http://{admin}/metrics)");
        println!(
            "  channels example: http://{admin}/example/?server=http://{addr}   (publish: curl -d hi http://{addr}/pub/demo:chat)"
        );
    }
    println!("  curl -N http://{addr}/sub/42                        # a stream for user 42 (one line per message)");
    println!("  curl -N -H 'Accept: text/event-stream' http://{addr}/sub/42   # the same as SSE");
    println!("  curl http://{addr}/subscriptions/42                 # whom user 42 follows");
    println!("  curl http://{addr}/subscribers/42                   # who follows user 42");
    println!(
        "  curl -d 'hello' http://{addr}/pub/42                # publish to 42 and their followers"
    );
    println!("  curl http://{addr}/stats");
    println!("Stop it with: kill {pid}");
}
