//! `bench sprites` (issue 46): the load shape of the Node.js sprites server that
//! held a million long-polls, where every client also sends. N clients each hold a
//! keep-alive long-poll and, on a keep-alive connection of their own with their own
//! JWT, throw a sprite every `--send-every` seconds to a random other client (a client
//! publish over HTTP), so the server carries N / send-every publishes a second and
//! their deliveries on top of holding.
//!
//! At any N: the server is one supervised myriad (`serve --processes auto`, its
//! gateways sized from the file limit, linked through a nats-server the supervisor
//! starts; watched as `bench c1m` watches it), and the clients are child processes
//! (`load::sprites_child`, each under the file limit with source addresses of its
//! own). Phases: doctor's checks → server → open → hold `--hold` s → one throwing step
//! of `--duration` s, or the `--rates` ladder (`sprites_steps`) → stop the supervisor.
//!
//! Reports the holding cost per client (user space: the server processes' RSS growth;
//! kernel: the machine's socket memory growth, both ends of both connections on this
//! box), publishes/s sustained against offered, throw → receipt p50/p99/max (the
//! children's histograms merged), errors and the server's CPU.

use super::c1m_setup::{doctor, free_port};
use super::c1m_watch::{stop_supervisor, Watch};
use super::held::Live;
use super::ladder::climb;
use super::report::{bytes, count, met, ms, Report};
use super::sprites_steps::{self, Step};
use super::{BenchArgs, Ctx};
use crate::server_process::{kernel_socket_bytes, serve_command, ServerProcess};
use load::sprites_child::{ChildArgs, Plan, SpritesChildren};
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Default clients of `sprites`.
pub const DEFAULT_CLIENTS: u64 = 9_000;
/// Sockets per client process: two per client, under the 20,000-file limit.
const SOCKETS_PER_CHILD: u64 = 18_000;
/// Connects per second while opening, over all children (both connections count).
const CONNECT_RATE: f64 = 4_000.0;
/// Opening gives up once no client connected for this long, or after `OPEN_MAX`.
const OPEN_STALL: Duration = Duration::from_secs(30);
const OPEN_MAX: Duration = Duration::from_secs(900);

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("sprites")?;
    let n = args.connections.unwrap_or(DEFAULT_CLIENTS).max(2);
    anyhow::ensure!(
        super::context::tls_ca().is_none(),
        "sprites speaks plain HTTP/1.1"
    );
    let every = args.send_every.max(0.01);
    let live = Live::new("sprites");
    let mut report = Report::new(
        "sprites",
        &format!(
            "{} long-poll clients, each throwing a sprite every {every} s to a random other \
             client with its own token, on one supervised myriad",
            count(n as f64)
        ),
        &dir,
    );
    doctor(2 * n, !args.no_tune, &live, &mut report)?;

    // The supervised server. A sender is idle from its connect until a step starts
    // and between steps: the keep-alive timeout must outlast that (a closed sender
    // connection is an error here, not a reconnect).
    let secret = format!("sprites-bench-secret-{}", host::sys::unix_micros());
    let keepalive = format!("{}", (every * 3.0).ceil().max(900.0) as u64);
    let mut serve: Vec<String> = [
        "--processes",
        &args.servers.map_or("auto".into(), |s| s.to_string()),
        "--max-connections",
        &(2 * n + 2 * n / 50 + 1_000).to_string(),
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
        "--store",
        "memory",
        "--nats",
        &format!("nats://127.0.0.1:{}", free_port()?),
        "--loops",
        &ctx.loops.unwrap_or(1).to_string(),
        "--jwt-secret",
        &secret,
        "--keepalive-timeout",
        &keepalive,
        "--csv",
        &dir.join("supervisor.csv").display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    serve.extend(args.server_flags.iter().cloned());
    let server = Arc::new(ServerProcess::start_command_at(
        serve_command(&serve),
        "myriad supervisor serving",
        Some(&dir.join("server.log")),
    )?);
    let mut watch = Watch::start(
        server.clone(),
        Arc::new(Mutex::new(None)),
        live.clone(),
        &dir,
    )?;
    report.csvs.push(dir.join("server-total.csv"));
    watch.next();
    watch.next();
    let rss_idle = watch.rss();
    let kernel_idle = kernel_socket_bytes();
    let gateways = lock(&watch.seen).latest.len().saturating_sub(2); // the supervisor and the router

    // The clients, over child processes and source addresses 127.0.0.2-….
    let procs = (2 * n)
        .div_ceil(SOCKETS_PER_CHILD)
        .max(args.flood_procs.map_or(1, u64::from))
        .min(n);
    let sources = (2 * n)
        .div_ceil(host::doctor::connections_per_source())
        .div_ceil(procs)
        * procs;
    anyhow::ensure!(sources <= 250, "too many clients for 127.0.0.x sources");
    let plan = Plan {
        exe: std::env::current_exe()?,
        args: ChildArgs {
            addr: server.addr,
            clients: n,
            first: 1,
            last: n,
            source: (0..sources as u8)
                .map(|i| [127, 0, 0, 2 + i].into())
                .collect(),
            secret,
            size: args.size,
            connect_rate: CONNECT_RATE,
        },
        procs,
    };
    let mut clients = SpritesChildren::start(&plan)?;
    let open_s = open(&mut clients, &live, n)?;
    let opened = clients.total();
    let held = opened.polling + opened.senders;
    watch.next();
    let rss_held = watch.rss();
    let kernel_held = kernel_socket_bytes();
    let server_conns: u64 = lock(&watch.seen).latest.iter().map(|s| s.connections).sum();
    live.emit(format!(
        "holding {} connections (server counts {}) for {} s",
        count(held as f64),
        count(server_conns as f64),
        args.hold
    ));
    let hold_until = Instant::now() + Duration::from_secs_f64(args.hold);
    while Instant::now() < hold_until {
        clients.gather(Duration::from_secs(1));
    }
    let after_hold = clients.total();

    // The steps: one at N / send-every, or the `--rates` ladder.
    let rates = match args.rates.is_empty() {
        true => vec![n as f64 / every],
        false => args.rates.clone(),
    };
    let steps = climb(
        &rates,
        |rate| {
            Ok(sprites_steps::run(
                &mut clients,
                server.child.id(),
                &live,
                n,
                rate,
                args.duration,
            ))
        },
        |s: &Step, _| s.ok,
    )?;
    let steps: Vec<Step> = steps.into_iter().map(|(_, s)| s).collect();
    let (client_rss, client_procs) = (clients.total().rss, clients.len());
    clients.finish();
    watch.stop();
    let stopped = stop_supervisor(&server);
    server.stop();

    let mut csv = std::fs::File::create(dir.join("ladder-sprites.csv"))?;
    csv.write_all(sprites_steps::CSV_HEADER.as_bytes())?;
    csv.write_all(b"\n")?;
    for s in &steps {
        csv.write_all(s.csv_row().as_bytes())?;
    }
    report.csvs.push(dir.join("ladder-sprites.csv"));

    report.row(
        "clients held (a long-poll and a sender each)",
        format!(
            "{} of {} connections (server counts {}; opened in {open_s:.0} s; {} still held after the {} s hold)",
            count(held as f64),
            count(2.0 * n as f64),
            count(server_conns as f64),
            count((after_hold.polling + after_hold.senders) as f64),
            args.hold
        ),
        "all",
        met(held == 2 * n && after_hold.polling + after_hold.senders == 2 * n),
    );
    let user = rss_held.saturating_sub(rss_idle) as f64 / n as f64;
    let kernel = kernel_held.saturating_sub(kernel_idle) as f64;
    report.fact(
        "holding cost per client, user space (server processes' RSS growth / clients; two connections, tokens checked)",
        format!("{} (RSS {} → {})", bytes(user), bytes(rss_idle as f64), bytes(rss_held as f64)),
    );
    report.fact(
        "holding cost per client, kernel (machine socket memory growth / clients; both ends of both connections on this box)",
        format!("{} ({} a socket end)", bytes(kernel / n as f64), bytes(kernel / (4 * n) as f64)),
    );
    if let [step] = &steps[..] {
        step_rows(&mut report, step);
    } else {
        if let Some(best) = steps.iter().take_while(|s| s.ok).last() {
            report.fact(
                "highest step passed (ladder)",
                format!(
                    "{} sprites/s: p99 {}, max {}, server CPU {:.0} %",
                    count(best.rate),
                    ms(best.p99_us),
                    ms(best.max_us),
                    best.server_cpu
                ),
            );
        }
        if let Some(miss) = steps.iter().find(|s| !s.ok) {
            report.fact(
                "first step missed",
                format!("{} sprites/s", count(miss.rate)),
            );
        }
    }
    report
        .sections
        .push(("Steps".into(), sprites_steps::table(&steps)));
    report.fact(
        "processes",
        format!(
            "server: supervisor, router, {gateways} gateways, nats-server; clients: {} processes from {sources} source addresses (their RSS {})",
            client_procs,
            bytes(client_rss as f64)
        ),
    );
    report.fact(
        "supervisor stopped (SIGTERM)",
        match stopped {
            Ok(s) => format!("in {s:.1} s"),
            Err(e) => format!("{e:#}"),
        },
    );
    report.note(format!(
        "Each client is user k of 1..{n}: GET /poll/k?token=… (keep-alive, from the last \
         answer's since) and, on its own keep-alive connection, POST /pub/<random other> \
         with Authorization: Bearer <its token, pub claim 1-{n}>, {}-byte payloads stamped \
         ts=<µs>. Latency is stamp to the poll answer's parse, clients and server on one box. \
         A step passes when publishes/s ≥ 95 % of offered, received = published, no sprite \
         later than 1 s and no error.",
        args.size
    ));
    report.live = live.lines();
    Ok(report)
}

/// Waits until every client's poll and sender are up, the clients stop making
/// progress, or `OPEN_MAX`; seconds taken.
fn open(clients: &mut SpritesChildren, live: &Live, n: u64) -> anyhow::Result<f64> {
    let t = Instant::now();
    let mut last = (0, Instant::now());
    loop {
        let alive = clients.gather(Duration::from_secs(1));
        let s = clients.total();
        live.emit(format!(
            "opening: {} polling, {} senders, errors {} send / {} poll; clients' cpu {:.0} %",
            count(s.polling as f64),
            count(s.senders as f64),
            s.send_errors,
            s.poll_errors,
            s.cpu_pct
        ));
        let done = s.polling + s.senders;
        if done >= 2 * n {
            break;
        }
        anyhow::ensure!(alive, "the sprites client processes ended while opening");
        if done != last.0 {
            last = (done, Instant::now());
        } else if last.1.elapsed() >= OPEN_STALL || t.elapsed() >= OPEN_MAX {
            break;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    // Settle: the last answers read, the server's samples caught up.
    clients.gather(Duration::from_secs(3));
    Ok(secs)
}

/// The rows of a single step against their targets.
fn step_rows(report: &mut Report, s: &Step) {
    report.row(
        "publishes/s sustained (client publishes over HTTP)",
        format!(
            "{} of {} offered",
            count(s.published_per_s()),
            count(s.rate)
        ),
        "≥ 95 % of offered",
        met(s.published_per_s() >= sprites_steps::MIN_SUSTAINED * s.rate),
    );
    report.row(
        "sprites received / published",
        format!(
            "{} / {}",
            count(s.received as f64),
            count(s.published as f64)
        ),
        "all, once",
        met(s.received == s.published && s.published > 0),
    );
    report.row(
        "throw → receipt latency p99",
        ms(s.p99_us),
        "≤ 50 ms",
        met(s.published > 0 && s.p99_us <= 50_000),
    );
    report.row(
        "latency p50 / max",
        format!("{} / {}", ms(s.p50_us), ms(s.max_us)),
        "max ≤ 1 s",
        met(s.max_us <= super::ladder::STEP_MAX_LATENCY_US),
    );
    report.row(
        "errors (sends refused or failed / polls failed)",
        format!("{} / {}", s.send_errors, s.poll_errors),
        "0",
        met(s.send_errors == 0 && s.poll_errors == 0),
    );
    report.fact(
        "server CPU while throwing (all its processes; its nats-server among them)",
        format!(
            "{:.1} % of a core ({:.1} %; clients {:.0} %)",
            s.server_cpu, s.nats_cpu, s.client_cpu
        ),
    );
    report.row(
        "step length",
        format!("{:.0} s", s.secs),
        "≥ 10 s",
        met(s.secs >= 10.0),
    );
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
