//! `bench pusher`: N Pusher Channels clients (protocol 7) subscribed to one channel,
//! on `myriad serve --pusher-app` or, with `--peer sockudo|soketi`, on another
//! Pusher server (`peer_pusher`), with the same client and the same publish path:
//! - the clients are `flood --transport pusher` on `/app/<key>?protocol=7`: each waits
//!   for `pusher:connection_established`, subscribes to [`CHANNEL`], is open once
//!   `pusher_internal:subscription_succeeded` arrives, answers `pusher:ping`;
//! - every message is an event published through the Pusher HTTP API, a signed
//!   `POST /apps/<id>/events` (`msggen --pusher`), its data stamped with the send time.
//!
//! Figures, over one held flood: (a) the server's user-space memory per idle
//! subscribed connection (RSS growth over its baseline) and the kernel's per socket,
//! the connect rate (connections subscribed per second, from the first connect to the
//! last subscription); (b) the latency at `--latency-rate` (5 msg/s) for
//! `--latency-secs`; (c) the broadcast ladder in `--step-secs` steps (`ladder`),
//! each judged per message (every message to all within 1 s), one step past the
//! first miss.
//!
//! Not here: the peers (`peer_pusher`), the client (`load::flood`).

use super::held::{client_cpu, flood_args, Held, Live, Probe};
use super::ladder::{self, Publish};
use super::peer_pusher::{self, APP_KEY};
use super::report::{bytes, count, met, ms, Report};
use super::{BenchArgs, Ctx, Peer};
use crate::server_process::{kernel_socket_bytes, ServerProcess};
use load::flood::stats::quantile;
use load::flood::Transport;
use std::sync::Arc;
use std::time::Duration;

/// The one channel every client subscribes to and every event goes to.
const CHANNEL: &str = "bench";
/// Seconds allowed for all connections to open and subscribe.
const OPEN_TIMEOUT: Duration = Duration::from_secs(120);
/// Quiet after the last subscription, before memory is read.
const SETTLE: Duration = Duration::from_secs(2);

/// Starts the scenario's server: myriad with the bench's app, or the peer.
fn start(
    args: &BenchArgs,
    ctx: &Ctx,
) -> anyhow::Result<(ServerProcess, Option<std::path::PathBuf>)> {
    let dir = ctx.dir("pusher")?;
    anyhow::ensure!(
        super::context::scheme() == "http",
        "pusher runs over plain WebSocket (drop --tls)"
    );
    match args.peer {
        None => {
            let csv = dir.join("server.csv");
            let spec = peer_pusher::app_spec();
            Ok((ctx.server(&csv, &["--pusher-app", &spec])?, Some(csv)))
        }
        Some(Peer::Sockudo) => Ok((peer_pusher::start_sockudo(&dir)?, None)),
        Some(Peer::Soketi) => Ok((peer_pusher::start_soketi(&dir)?, None)),
        Some(p) => anyhow::bail!("pusher runs against myriad, sockudo and soketi, not {p:?}"),
    }
}

/// The server's name in the report.
fn server_name(peer: Option<Peer>) -> &'static str {
    match peer {
        Some(Peer::Sockudo) => "Sockudo (one process, memory drivers)",
        Some(Peer::Soketi) => "soketi",
        _ => "myriad serve",
    }
}

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("pusher")?;
    let n = args.connections();
    let mut report = Report::new(
        "pusher",
        &format!(
            "{} Pusher clients on one channel, {}",
            count(n as f64),
            server_name(args.peer)
        ),
        &dir,
    );
    let live = Live::new("pusher");
    let (server, server_csv) = start(args, ctx)?;
    let server = Arc::new(server);
    report.csvs.extend(server_csv);
    let rss_idle = server.rss();
    let kernel_idle = kernel_socket_bytes();

    // (a) Memory and connect rate.
    let flood_csv = dir.join("flood.csv");
    let url = format!("ws://{}/app/{APP_KEY}?protocol=7", server.addr);
    let mut fa = flood_args(
        vec![url.clone()],
        n,
        Transport::Pusher,
        Some(flood_csv.clone()),
    );
    fa.pusher_channel = CHANNEL.into();
    if let Some(procs) = args.flood_procs {
        fa.procs = procs.to_string();
    }
    live.emit(format!(
        "---- {n} Pusher clients on {url}, channel {CHANNEL} ----"
    ));
    let held = Held::start(fa, live.clone(), vec![server.clone()]);
    let open = held.wait_open(n, OPEN_TIMEOUT);
    std::thread::sleep(SETTLE);
    let rss_held = server.rss();
    let kernel_held = kernel_socket_bytes();
    report.row(
        "clients subscribed",
        format!("{} of {}", count(open as f64), count(n as f64)),
        "all",
        met(open == n),
    );
    report.fact(
        "server memory per idle subscribed connection (user space, RSS growth)",
        format!(
            "{} (RSS {} → {})",
            bytes(rss_held.saturating_sub(rss_idle) as f64 / open.max(1) as f64),
            bytes(rss_idle as f64),
            bytes(rss_held as f64)
        ),
    );
    report.fact(
        "kernel memory per socket (slab + TCP buffers, machine-wide growth / 2 ends)",
        bytes(kernel_held.saturating_sub(kernel_idle) as f64 / (2 * open.max(1)) as f64),
    );

    // (b) Latency.
    let to = Publish {
        addr: server.addr,
        path: CHANNEL.into(),
        subjects: 1,
        fanout: open,
        per_publisher: 2.0,
        max_publishers: 48,
        pusher: Some(peer_pusher::app_spec()),
    };
    live.emit(format!(
        "---- latency: {} msg/s for {} s ----",
        args.latency_rate, args.latency_secs
    ));
    let probe = Probe::new(vec![server.clone()]);
    held.take_hist();
    let before = held.messages();
    let (client0, server0) = (client_cpu(), probe.cpu());
    let sent = ladder::publish_to(&to, args.latency_rate, args.latency_secs, args.size)?;
    let secs = sent.elapsed_s.max(1e-3);
    let client_lat = (client_cpu() - client0) / secs * 100.0;
    let server_lat = (probe.cpu() - server0) / secs * 100.0;
    held.wait_quiet(Duration::from_secs(10));
    let received = held.messages() - before;
    let h = held.take_hist();
    let q = |x: f64| quantile(&h, x);
    report.row(
        &format!(
            "latency p99 / max at {} msg/s × {}",
            args.latency_rate,
            count(open as f64)
        ),
        format!("{} / {}", ms(q(0.99)), ms(h.max())),
        "p99 ≤ 50 ms",
        met(q(0.99) > 0 && q(0.99) <= 50_000),
    );
    report.fact("latency p50", ms(q(0.5)));
    report.fact(
        "latency phase: server CPU / client CPU",
        format!("{server_lat:.0} % / {client_lat:.0} % of a core"),
    );
    report.row(
        "latency phase: deliveries received / expected",
        format!(
            "{} / {} ({} publish errors)",
            count(received as f64),
            count((sent.sent * open) as f64),
            sent.errors
        ),
        "all",
        met(sent.sent > 0 && sent.errors == 0 && received >= sent.sent * open),
    );

    // (c) The ladder.
    live.emit("---- ladder ----".into());
    let ladder_csv = dir.join("ladder-pusher.csv");
    let steps = ladder::run(
        &held,
        &probe,
        &live,
        &to,
        &args.rates(super::BROADCAST_RATES),
        args.step_secs,
        args.size,
        &ladder_csv,
    )?;
    let summary = held.finish()?;
    server.stop();
    report.csvs.push(flood_csv);
    report.csvs.push(ladder_csv);
    report.fact(
        "connect rate (connections subscribed per second)",
        format!("{}/s", count(summary.connect_rate)),
    );
    let figure = "broadcast to one channel: highest rate with every message to all within 1 s";
    ladder::report_best(&mut report, figure, &steps, args.step_secs);
    ladder::report_steps(&mut report, &steps, "");
    report.note(format!(
        "Clients: `flood --transport pusher` on `/app/{APP_KEY}?protocol=7`, subscribed to \
         `{CHANNEL}` (open once `pusher_internal:subscription_succeeded` arrived). Every \
         message is a Pusher event published through a signed `POST /apps/<id>/events` \
         (`msggen --pusher`), its data {} bytes stamped with the send time; only stamped \
         events count as deliveries.",
        args.size
    ));
    report.note(format!(
        "A ladder step passes when msggen reached 90 % of the rate without error, received \
         deliveries ≥ sent × subscribers, no connection dropped and the slowest delivery \
         took at most 1 s. Steps last {} s; the ladder continues one step past the first miss.",
        args.step_secs
    ));
    report.live = live.lines();
    Ok(report)
}
