//! `myriad flood` (SPEC G1): open N client connections to any push server and count
//! what arrives. This file holds the flags and runs a flood here or over child
//! processes; the per-second report and the final summary are in `report`, the run's
//! life (ramp, hold, close, samples) in `lifecycle`, HTTP/1.1 and TLS connections on mio in `engine` (requests in
//! `request`, responses scanned in `scan`, kernel arrival stamps for `--latency-at
//! socket` in `stamp`), HTTP/2 streams on tokio in `h2`, child processes in `children`.
//!
//! One process holds at most (soft NOFILE − [`FD_MARGIN`]) connections; above that,
//! flood re-executes itself as child processes, each with its share of the global
//! connection numbers, and sums their per-second JSON lines.

mod children;
pub mod engine;
mod h2;
mod lifecycle;
pub mod plan;
mod report;
mod request;
pub mod resume;
pub mod rooms;
pub mod scan;
pub mod stamp;
pub mod stats;
pub mod target;

pub use plan::CloseMode;
pub use scan::Transport;
pub use stamp::LatencyAt;

use anyhow::{bail, Context};
use serde::Serialize;
use stats::{FailCounts, ProcSummary, ResumeCounts};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use target::Target;

use report::{summarize, Report};
pub use report::{summary_text, tick_line};

pub use host::sys::FD_MARGIN;
/// The CSV header (`myriad plot` reads these names).
pub const CSV_HEADER: &str =
    "time_s,open,failed,closed,messages,bytes,lat_p50_us,lat_p99_us,lat_max_us,rss_bytes,cpu_user,cpu_sys";

/// Flags of `myriad flood`.
#[derive(clap::Args, Clone, Debug)]
pub struct FloodArgs {
    /// Target URL; `%d` becomes the user id, `%c` the connection's rooms (--rooms).
    /// Repeat for several servers or ports: connections are spread round-robin.
    #[arg(long = "url", value_name = "URL")]
    pub urls: Vec<String>,
    /// Number of connections to open.
    #[arg(long, short = 'n', default_value_t = 1000)]
    pub connections: u64,
    /// Connects started per second (0 = as fast as the machine allows).
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// Client protocol.
    #[arg(long, value_enum, default_value = "stream")]
    pub transport: Transport,
    /// Users to log in as, FIRST-LAST, cycled through (default: --first-user upwards).
    #[arg(long)]
    pub users: Option<String>,
    /// First user id when --users is not given (connection i is user FIRST+i).
    #[arg(long, default_value_t = 1)]
    pub first_user: u64,
    /// Source addresses to bind, e.g. 127.0.0.2-127.0.0.60 (repeatable, comma lists).
    /// Default: none, or 127.0.0.2.. when loopback targets need more than one
    /// address's ports. With --procs, each process takes its own block when they
    /// divide evenly (else every process uses them all).
    #[arg(long = "source", value_name = "RANGE")]
    pub sources: Vec<String>,
    /// Seconds to hold once every connection is attempted (default: until --max-time).
    #[arg(long)]
    pub hold: Option<f64>,
    /// How to close at the end: all at once, or gradually over --close-secs.
    #[arg(long, value_enum, default_value = "all")]
    pub close: CloseMode,
    /// Duration of a gradual close.
    #[arg(long, default_value_t = 5.0)]
    pub close_secs: f64,
    /// Hard bound on the whole run, seconds.
    #[arg(long, default_value_t = 600.0)]
    pub max_time: f64,
    /// Seconds a connection may take to get its response head.
    #[arg(long, default_value_t = 10.0)]
    pub connect_timeout: f64,
    /// Connections waiting for their response head at once (over all processes).
    /// Above what the server accepts per second × --connect-timeout, attempts time out.
    #[arg(long, default_value_t = 4096)]
    pub max_inflight: usize,
    /// Extra request header line, "Name: value" (repeatable).
    #[arg(long = "header")]
    pub headers: Vec<String>,
    /// `https://` / `wss://`: trust the CA certificates in this PEM file (a test CA)
    /// instead of the system bundle.
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// `https://` / `wss://`: do not verify the server's certificate at all.
    #[arg(long)]
    pub insecure: bool,
    /// HTTP/2 (stream, sse, poll): `--connections` counts streams, opened
    /// `--streams-per-connection` to a TCP connection (h2c for http://, ALPN h2 for https://).
    #[arg(long)]
    pub h2: bool,
    /// With --h2: streams multiplexed on one connection.
    #[arg(long, default_value_t = 10)]
    pub streams_per_connection: u32,
    /// Open a connection again when the server ends it (close, reset, EOF), after a
    /// bounded backoff with jitter (50 ms doubling to 2 s, ×0.5–1.5), resuming from the
    /// last message seen: SSE `Last-Event-ID`, long-poll / WebSocket / stream `?since=`
    /// (the first connect asks `?since=0`). The summary counts reconnects, gaps the
    /// server reported, and messages lost or repeated by sequence number. HTTP/1.1 only.
    #[arg(long)]
    pub reconnect: bool,
    /// Where a message's latency ends: `read` (when flood reads it) or `socket` (when
    /// its bytes reached this client's socket: the kernel's receive stamp, which leaves
    /// out this client's own wait for a CPU on a box shared with the server).
    /// HTTP/1.1 and WebSocket only.
    #[arg(long, value_enum, default_value_t = LatencyAt::Read)]
    pub latency_at: LatencyAt,
    /// Hold the connections at this niceness (this process, or each child process when
    /// there are children), e.g. 10 so that a server on the same box is scheduled first
    /// (below the current value needs root).
    #[arg(long, allow_hyphen_values = true)]
    pub nice: Option<i32>,
    /// Rooms `r1..rN`: each connection joins --rooms-per-connection of them (every
    /// room gets the same number of members when the connections are a multiple of N),
    /// named in the URL's `%c` joined by --room-sep; then only stamped messages count.
    #[arg(long)]
    pub rooms: Option<u32>,
    /// With --rooms: rooms per connection.
    #[arg(long, default_value_t = 5)]
    pub rooms_per_connection: u32,
    /// With --rooms: what goes between two room names in `%c`, e.g. `,` for
    /// `/sub/%c` or `&channel=` for `/ws?channel=%c`.
    #[arg(long, default_value = ",")]
    pub room_sep: String,
    /// With `--transport pusher`: the channel every client subscribes to.
    #[arg(long, default_value = "bench")]
    pub pusher_channel: String,
    /// Write one CSV row per second here.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Print the final summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// No per-second lines on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// Processes: auto (this process if N fits its free descriptors, else as many
    /// children as the file limit needs), or a number of child processes (even 1: use
    /// that when this process needs its descriptors for something else, e.g. a server).
    #[arg(long, default_value = "auto")]
    pub procs: String,
    /// Connections per process (default: soft NOFILE limit minus a margin).
    #[arg(long)]
    pub per_process: Option<u64>,
    /// Run as a child: JSON lines on stdout, no probe, no further child processes.
    #[arg(long, hide = true)]
    pub child: bool,
    /// A child's first global connection number.
    #[arg(long, hide = true, default_value_t = 0)]
    pub conn_offset: u64,
    /// Executable for child processes, taking these flags directly (tests, embedders).
    /// Default: this executable with the `flood` subcommand.
    #[arg(long, hide = true)]
    pub child_exe: Option<PathBuf>,
}

impl Default for FloodArgs {
    fn default() -> Self {
        FloodArgs {
            urls: Vec::new(),
            connections: 1000,
            rate: 1000.0,
            transport: Transport::Stream,
            users: None,
            first_user: 1,
            sources: Vec::new(),
            hold: None,
            close: CloseMode::All,
            close_secs: 5.0,
            max_time: 600.0,
            connect_timeout: 10.0,
            max_inflight: 4096,
            headers: Vec::new(),
            ca: None,
            insecure: false,
            h2: false,
            streams_per_connection: 10,
            reconnect: false,
            latency_at: LatencyAt::Read,
            nice: None,
            rooms: None,
            rooms_per_connection: 5,
            room_sep: ",".into(),
            pusher_channel: "bench".into(),
            csv: None,
            json: false,
            quiet: false,
            procs: "auto".into(),
            per_process: None,
            child: false,
            conn_offset: 0,
            child_exe: None,
        }
    }
}

/// One second of a flood run, summed over all processes.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FloodTick {
    pub elapsed: Duration,
    /// Connections open now.
    pub open: u64,
    /// Failed attempts so far.
    pub failed: u64,
    /// Connections closed so far (by either side) after being open.
    pub closed: u64,
    /// Messages received during this second.
    pub messages: u64,
    /// Bytes received during this second.
    pub bytes: u64,
    /// Publish→receive latency of the stamps received during this second.
    pub lat_p50_us: u64,
    pub lat_p99_us: u64,
    pub lat_max_us: u64,
    /// flood's own resident memory (all processes).
    pub rss_bytes: u64,
    /// flood's CPU, percent of one core (all processes).
    pub cpu_user: f64,
    pub cpu_sys: f64,
    /// The latency histogram of this second as (value µs, count) pairs, so a caller can
    /// merge exact percentiles over any window (a bench step) instead of averaging p99s.
    pub hist: Vec<(u64, u64)>,
}

/// The end of a flood run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FloodSummary {
    pub requested: u64,
    pub attempted: u64,
    pub opened: u64,
    /// Most connections open at once: exact in one process; over child processes, the
    /// largest per-second sum of their open counts.
    pub peak_open: u64,
    pub failed: u64,
    pub failures: FailCounts,
    pub closed: u64,
    pub messages: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    /// Successful opens per second from the first attempt to the last open.
    pub connect_rate: f64,
    pub lat_p50_us: u64,
    pub lat_p99_us: u64,
    pub lat_max_us: u64,
    /// flood's own RSS growth per open connection, bytes.
    pub rss_per_conn_bytes: f64,
    pub processes: u32,
    /// `--reconnect`: reconnects, gaps, lost and repeated messages.
    pub resume: ResumeCounts,
}

/// `myriad flood`: run, print per-second lines and the summary.
pub fn run(args: FloodArgs) -> anyhow::Result<()> {
    host::sys::catch_interrupt();
    let json = args.json;
    let summary = run_until(args, &AtomicBool::new(false), &mut |_| {})?;
    if json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    }
    Ok(())
}

/// Run a flood with a per-second callback; returns the summary (also printed to stderr
/// unless `--quiet`). Ctrl-C ends the run early with a summary.
pub fn run_with(
    args: FloodArgs,
    on_second: &mut dyn FnMut(&FloodTick),
) -> anyhow::Result<FloodSummary> {
    host::sys::catch_interrupt();
    run_until(args, &AtomicBool::new(false), on_second)
}

/// [`run_with`] that also ends (closing everything) when `stop` becomes true; the drone
/// uses this. Does not install a signal handler.
pub fn run_until(
    args: FloodArgs,
    stop: &AtomicBool,
    on_second: &mut dyn FnMut(&FloodTick),
) -> anyhow::Result<FloodSummary> {
    let soft = host::sys::raise_nofile();
    let plan = make_plan(&args)?;
    // `--nice` lowers the processes that hold the connections: this one when it holds
    // them, else each child (an embedding process, e.g. `bench`, stays as it is).
    let nice = || match args.nice {
        Some(n) => stamp::set_nice(n).with_context(|| format!("--nice {n}")),
        None => Ok(()),
    };
    if args.child {
        nice()?;
        return run_child(&plan, stop);
    }
    for (url, t) in args.urls.iter().zip(&plan.targets) {
        std::net::TcpStream::connect_timeout(&t.addr, Duration::from_secs(3))
            .with_context(|| format!("cannot reach {url} ({}): is the server running?", t.addr))?;
    }
    let per_process = args
        .per_process
        .unwrap_or(soft.saturating_sub(FD_MARGIN))
        .max(1);
    // In this process only what is free now counts (an embedding server may hold many).
    let free_here = soft.saturating_sub(host::sys::open_fds() + FD_MARGIN);
    let (procs, children): (u64, bool) = match args.procs.as_str() {
        "auto" if args.connections <= free_here.min(per_process) => (1, false),
        "auto" => (args.connections.div_ceil(per_process).max(1), true),
        n => {
            let n: u64 = n
                .parse()
                .with_context(|| format!("--procs {n:?}: expected auto or a number"))?;
            (n.max(1), true)
        }
    };
    if children && args.connections.div_ceil(procs) > per_process {
        bail!(
            "{} connections over {procs} processes exceed {per_process} per process",
            args.connections
        );
    }
    let mut report = Report::new(&args, on_second)?;
    if args.insecure && plan.targets.iter().any(|t| t.tls) {
        // Loud on purpose, even with --quiet: the numbers are real, the security is not.
        eprintln!(
            "flood: WARNING --insecure: server certificates are NOT verified; anyone on the path can impersonate the server"
        );
    }
    if !args.quiet {
        eprintln!(
            "flood: {} {:?} connections to {} target(s) at {} conn/s from {} source address(es) in {procs} process(es)",
            args.connections,
            args.transport,
            plan.targets.len(),
            if args.rate > 0.0 { args.rate.to_string() } else { "max".into() },
            plan.sources.len().max(1)
        );
    }
    let procs_summaries = if !children {
        nice()?;
        vec![run_here(&plan, stop, &mut |s| report.sample(&s))?]
    } else {
        children::run_children(&args, procs, stop, &mut |s| report.sample(&s))?
    };
    let mut summary = summarize(&args, &procs_summaries);
    if children {
        summary.peak_open = report.max_open;
    }
    report.finish(&summary)?;
    Ok(summary)
}

/// Turn flags into a plan for this process (its share when a child).
fn make_plan(args: &FloodArgs) -> anyhow::Result<plan::Plan> {
    if args.urls.is_empty() {
        bail!("give at least one --url, e.g. --url 'http://127.0.0.1:8000/sub/%d'");
    }
    let targets = args
        .urls
        .iter()
        .map(|u| Target::parse(u))
        .collect::<Result<Vec<_>, _>>()?;
    let mut sources = target::parse_sources(&args.sources)?;
    let ports = target::ports_per_ip();
    if sources.is_empty() && target::all_loopback(&targets) && args.connections > ports * 4 / 5 {
        sources = target::auto_sources(args.connections, targets.len(), ports);
    }
    let users = args.users.as_deref().map(target::parse_range).transpose()?;
    if args.h2 && args.transport.is_ws() {
        bail!("--h2 carries stream, sse and poll; WebSocket stays on HTTP/1.1 (drop --h2 for ws)");
    }
    if args.reconnect && args.transport == Transport::Socketio {
        bail!("--reconnect does not speak Socket.IO's resumption (drop --reconnect)");
    }
    if args.reconnect && args.transport == Transport::Pusher {
        bail!(
            "--reconnect does not apply to Pusher clients, which resume nothing (drop --reconnect)"
        );
    }
    let rooms = match args.rooms {
        Some(n) => {
            if !targets.iter().any(Target::has_rooms) {
                bail!("--rooms needs a %c in --url where the rooms go");
            }
            let r = rooms::Rooms::new(
                n,
                args.rooms_per_connection,
                &args.room_sep,
                args.conn_offset,
                args.connections,
            )?;
            Some(std::sync::Arc::new(r))
        }
        None => None,
    };
    if args.h2 && args.reconnect {
        bail!("--reconnect works over HTTP/1.1 only (drop --h2)");
    }
    if args.h2 && args.latency_at == LatencyAt::Socket {
        bail!("--latency-at socket works over HTTP/1.1 and WebSocket only (drop --h2)");
    }
    if args.h2 && args.streams_per_connection == 0 {
        bail!("--streams-per-connection must be at least 1");
    }
    let tls = if targets.iter().any(|t| t.tls) {
        for t in targets.iter().filter(|t| t.tls) {
            tls::server_name(&t.server_name)?;
        }
        let roots = match (&args.ca, args.insecure) {
            (Some(_), true) => bail!("give --ca or --insecure, not both"),
            (Some(f), false) => tls::Roots::CaFile(f.clone()),
            (None, true) => tls::Roots::Insecure,
            (None, false) => tls::Roots::System,
        };
        // ALPN: h2 for --h2; HTTP/1.1 otherwise (WebSocket upgrades need it).
        let alpn = if args.h2 {
            tls::Alpn::H2
        } else {
            tls::Alpn::Http11
        };
        // The lean TLS 1.3 phase keeps an idle client session at ~250 B; the h2 path
        // runs rustls through tokio-rustls, which does not use it.
        Some(std::sync::Arc::new(
            tls::client_config(&roots, &[alpn], !args.h2).context("TLS client setup")?,
        ))
    } else {
        None
    };
    Ok(plan::Plan {
        targets,
        transport: args.transport,
        sources,
        users,
        first_user: args.first_user,
        offset: args.conn_offset,
        count: args.connections,
        rate: args.rate.max(0.0),
        hold: args.hold.map(Duration::from_secs_f64),
        close: args.close,
        close_secs: args.close_secs,
        max_time: Duration::from_secs_f64(args.max_time.max(0.0)),
        connect_timeout: Duration::from_secs_f64(args.connect_timeout.max(0.001)),
        max_inflight: args.max_inflight.max(1),
        headers: args.headers.clone(),
        tls,
        h2: args.h2,
        streams_per_conn: args.streams_per_connection,
        reconnect: args.reconnect,
        latency_at: args.latency_at,
        rooms,
        pusher_subscribe: scan::pusher::subscribe_frame(&args.pusher_channel).into(),
    })
}

/// Run the plan in this process on the engine its protocol needs.
fn run_here(
    plan: &plan::Plan,
    stop: &AtomicBool,
    on_sample: &mut dyn FnMut(stats::Sample),
) -> anyhow::Result<ProcSummary> {
    if plan.h2 {
        h2::run(plan, stop, on_sample).context("cannot start the HTTP/2 runtime")
    } else {
        let engine = engine::Engine::new(plan).context("cannot create the event loop")?;
        Ok(engine.run(stop, on_sample))
    }
}

/// A child: JSON lines on stdout, the parent sums them.
fn run_child(plan: &plan::Plan, stop: &AtomicBool) -> anyhow::Result<FloodSummary> {
    children::child_setup();
    let mut out = std::io::stdout();
    let sum = run_here(plan, stop, &mut |s| {
        let line = serde_json::to_string(&stats::ChildLine::Sample(s)).unwrap_or_default();
        let _ = writeln!(out, "{line}");
    })?;
    writeln!(
        out,
        "{}",
        serde_json::to_string(&stats::ChildLine::Final(sum))?
    )?;
    Ok(FloodSummary::default())
}
