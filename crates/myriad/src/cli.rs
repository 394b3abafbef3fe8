//! The subcommand table. Every entry is a `clap::Args` struct owned by the crate that
//! implements it, plus a `run` function returning `anyhow::Result<()>`.

use clap::{Parser, Subcommand};

/// The heading of the flags every subcommand takes, apart from its own.
const GLOBAL_HEADING: &str = "Global options";

#[derive(Parser)]
#[command(
    name = "myriad",
    // The package version and the git commit it was built from (build.rs).
    version = env!("MYRIAD_VERSION"),
    about = "A real-time push server for a million connections on one machine"
)]
struct Cli {
    /// Log level or filter (trace, debug, info, warn, error; or a tracing filter string)
    /// [default: info; warn for demo, whose own lines tell what happens].
    #[arg(long, global = true, env = "MYRIAD_LOG", help_heading = GLOBAL_HEADING)]
    log: Option<String>,
    /// Log format: text or json.
    #[arg(long, global = true, env = "MYRIAD_LOG_FORMAT", default_value = "text", help_heading = GLOBAL_HEADING)]
    log_format: String,
    /// TOML config file: keys are flag names (`listen = "0.0.0.0:8000"`, `max-connections = 20000`).
    /// Precedence: flags, then MYRIAD_* variables, then this file, then defaults.
    #[arg(long, global = true, env = "MYRIAD_CONFIG", help_heading = GLOBAL_HEADING)]
    config: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    // -- commands: one variant per line group; add yours below, keep this marker --
    /// Benchmark scenarios (idle, broadcast, unicast, mass-disconnect, churn, keepalive, c100k, all): servers, load, CSV, plots and a Markdown report against the SPEC targets.
    Bench(crate::bench::BenchArgs),
    /// Open N client connections (stream, SSE, WebSocket, long-poll) to any push server; count messages and latency.
    Flood(load::flood::FloodArgs),
    /// The sprites clients of `bench sprites` for one slice of the users (its child
    /// processes): steered by lines on stdin, a JSON line of counters a second on stdout.
    #[command(hide = true)]
    SpritesClients(load::sprites_child::ChildArgs),
    /// Publish stamped messages to random subjects at a rate over keep-alive HTTP connections.
    Msggen(load::msggen::MsggenArgs),
    /// A flood agent steered through a control port (status, set url/n/rate, restart, stop).
    Drone(load::drone::DroneArgs),
    /// Drive many drones and watch them in a live table with totals.
    Fleet(load::fleet::FleetArgs),
    /// Check file limits, ports, backlogs, tcp_mem, conntrack and memory for N connections.
    Doctor(host::doctor::DoctorArgs),
    /// Live terminal view of a server's processes (CPU, memory, connections, loop lag) from their admin addresses.
    Top(viewer::top::TopArgs),
    /// Render PNG charts (memory, CPU, connections, loop lag, deliveries, latency) from serve/flood CSV files.
    Plot(viewer::plot::PlotArgs),
    /// Friends graph tools: generate a Barabási–Albert graph, load an edge list into the store.
    Friends(load::friends::FriendsArgs),
    /// Run the push server: subscriptions on /sub/<id> (stream, SSE, WebSocket), /poll/<id>, and the HTTP API.
    Serve(Box<crate::serve::ServeArgs>),
    /// The whole system on one machine: a friends graph, a server, 10,000 connections, publishing, a live view and a report.
    Demo(crate::demo::DemoArgs),
}

pub fn main() -> anyhow::Result<()> {
    crate::config_file::apply(std::env::args_os())?;
    let cli = Cli::parse();
    let _ = &cli.config; // read before parsing, by config_file::apply
    let log = cli.log.as_deref().unwrap_or(match cli.command {
        Command::Demo(_) => "warn",
        _ => "info",
    });
    init_logging(log, &cli.log_format);
    match cli.command {
        // -- dispatch: one arm per variant; add yours below, keep this marker --
        Command::Bench(args) => crate::bench::run(args),
        Command::Flood(args) => load::flood::run(args),
        Command::SpritesClients(args) => load::sprites_child::run_child(args),
        Command::Msggen(args) => load::msggen::run(args),
        Command::Drone(args) => load::drone::run(args),
        Command::Fleet(args) => load::fleet::run(args),
        Command::Doctor(args) => host::doctor::run(args),
        Command::Top(args) => viewer::top::run(args),
        Command::Plot(args) => viewer::plot::run(args),
        Command::Friends(args) => load::friends::run(args),
        // Children are started with an explicit --role: only `all` supervises.
        Command::Serve(args) => match (args.processes, args.cluster.role) {
            (Some(processes), cluster::Role::All) => crate::supervise::run(&args, processes),
            _ => crate::serve::run(*args),
        },
        Command::Demo(args) => crate::demo::run(args),
    }
}

fn init_logging(filter: &str, format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: logs piped to files and tools stay plain `key=value`.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}
