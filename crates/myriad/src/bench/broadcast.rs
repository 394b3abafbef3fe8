//! `bench broadcast`: one publish reaching N subscribers, in one or both shapes
//! (`--shape`): **one-user** (user 1 holds N connections; publish to user 1) and
//! **followers** (users 2..=N+1 follow subject 1, one connection each; publish to
//! subject 1). Per shape, over one held flood:
//! (a) Latency: `--latency-rate` msg/s for `--latency-secs`; p50/p99/max over every
//!     delivery of that phase.
//! (b) The ladder (`ladder`): rates in `--step-secs` steps (10 s by default), each
//!     judged per message, continued one step past the first miss; plotted as latency
//!     p50/p99/max against the rate (`ladder.png`).
//!
//! `--peer node|nchan|floor` runs the same against a peer server (`peer`; one-user only).

use super::held::{client_cpu, flood_args, post, sub_url, Held, Live, Probe};
use super::ladder::{self, MIN_STEP_SECS};
use super::report::{count, met, ms, Report};
use super::{BenchArgs, Ctx, Shape};
use crate::server_process::ServerProcess;
use load::flood::stats::quantile;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The broadcast subject (one-user: the user published to).
const SUBJECT: u64 = 1;

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("broadcast")?;
    let n = args.connections();
    let server_name = super::peer::server_name(args.peer);
    let mut report = Report::new(
        "broadcast",
        &format!(
            "{} subscribers, shape {}, {server_name}",
            count(n as f64),
            args.shape.name()
        ),
        &dir,
    );
    let live = Live::new("broadcast");
    for shape in args.shape.each() {
        live.emit(format!("==== shape {} ====", shape.name()));
        run_shape(args, ctx, shape, &live, &mut report)?;
    }
    report.note(format!(
        "Payloads are {} bytes, stamped by msggen with the send time; latency is publish \
         (before the HTTP request) to receipt by flood, over every delivery.",
        args.size
    ));
    report.note(format!(
        "A ladder step passes when msggen reached 90 % of the rate without error, received \
         deliveries ≥ sent × subscribers, no connection dropped and the slowest delivery of \
         the step took at most 1 s (judged per message: the max, not an average). The ladder \
         continues one step past the first miss. Steps last {} s; below {MIN_STEP_SECS} s a \
         slowly growing backlog hides, so shorter steps give no figure.",
        args.step_secs
    ));
    report.live = live.lines();
    Ok(report)
}

/// Starts the server of one shape: `myriad serve` (or `--server-bin`) or the peer.
fn start(
    args: &BenchArgs,
    ctx: &Ctx,
    shape: Shape,
) -> anyhow::Result<(ServerProcess, Option<PathBuf>)> {
    let dir = ctx.dir("broadcast")?;
    anyhow::ensure!(
        args.peer.is_none() || shape == Shape::OneUser,
        "the peers serve only --shape one-user (they have no follower graph)"
    );
    ctx.server_or_peer(
        args.peer,
        &dir,
        &dir.join(format!("server-{}.csv", shape.name())),
    )
}

fn run_shape(
    args: &BenchArgs,
    ctx: &Ctx,
    shape: Shape,
    live: &Arc<Live>,
    report: &mut Report,
) -> anyhow::Result<()> {
    let dir = ctx.dir("broadcast")?;
    let n = args.connections();
    let tag = shape.name();
    let (server, server_csv) = start(args, ctx, shape)?;
    let server = Arc::new(server);
    if let Some(csv) = server_csv {
        report.csvs.push(csv);
    }
    let users = match shape {
        Shape::Followers => {
            let mut body = String::with_capacity(n as usize * 8);
            for u in 2..=n + 1 {
                let _ = writeln!(body, "{u} {SUBJECT}");
            }
            let (status, reply) = post(&server, "/subscriptions", body.as_bytes())?;
            anyhow::ensure!(status == 200, "POST /subscriptions: {status} {reply}");
            live.emit(format!("subscriptions: {}", reply.trim()));
            format!("2-{}", n + 1)
        }
        _ => format!("{SUBJECT}-{SUBJECT}"),
    };
    let flood_csv = dir.join(format!("flood-{tag}.csv"));
    let mut fa = flood_args(
        vec![sub_url(&server)],
        n,
        args.transport()?,
        Some(flood_csv.clone()),
    );
    fa.users = Some(users);
    if let Some(procs) = args.flood_procs {
        // Receiving 15,000 sockets in one thread can be the limit: spread it.
        fa.procs = procs.to_string();
    }
    let held = Held::start(fa, live.clone(), vec![server.clone()]);
    let open = held.wait_open(n, Duration::from_secs(120));
    std::thread::sleep(Duration::from_secs(1));
    report.row(
        &format!("subscribers connected ({tag})"),
        format!("{} of {}", count(open as f64), count(n as f64)),
        "all",
        met(open == n),
    );

    // (a) Latency.
    live.emit(format!(
        "---- latency: {} msg/s for {} s ----",
        args.latency_rate, args.latency_secs
    ));
    let probe = Probe::new(vec![server.clone()]);
    held.take_hist();
    let before = held.messages();
    let (client0, server0) = (client_cpu(), probe.cpu());
    let sent = ladder::publish(
        server.addr,
        SUBJECT,
        args.latency_rate,
        args.latency_secs,
        args.size,
    )?;
    let secs = sent.elapsed_s.max(1e-3);
    let client_lat = (client_cpu() - client0) / secs * 100.0;
    let server_lat = (probe.cpu() - server0) / secs * 100.0;
    held.wait_quiet(Duration::from_secs(10));
    let received = held.messages() - before;
    let h = held.take_hist();
    let q = |x: f64| quantile(&h, x);
    let p99 = q(0.99);
    report.row(
        &format!(
            "broadcast latency p99 at {} msg/s × {} ({tag})",
            args.latency_rate,
            count(n as f64)
        ),
        ms(p99),
        "≤ 50 ms",
        met(p99 > 0 && p99 <= 50_000),
    );
    report.fact(
        &format!("broadcast latency p50 / max ({tag})"),
        format!("{} / {}", ms(q(0.5)), ms(h.max())),
    );
    report.fact(
        &format!("latency phase: server CPU / client CPU ({tag})"),
        format!("{server_lat:.0} % / {client_lat:.0} % of a core"),
    );
    report.row(
        &format!("latency phase: deliveries received / expected ({tag})"),
        format!(
            "{} / {}",
            count(received as f64),
            count((sent.sent * open) as f64)
        ),
        "all",
        met(received >= sent.sent * open && sent.sent > 0),
    );

    // (b) The ladder.
    live.emit(format!("---- ladder ({tag}) ----"));
    let ladder_csv = dir.join(format!("ladder-{tag}.csv"));
    let steps = ladder::run(
        &held,
        &probe,
        live,
        &ladder::Publish::subject(server.addr, SUBJECT, open),
        &args.rates(super::BROADCAST_RATES),
        args.step_secs,
        args.size,
        &ladder_csv,
    )?;
    held.finish()?;
    // The live probe thread may still hold the server: end it here, not at exit.
    server.stop();
    report.csvs.push(flood_csv);
    report.csvs.push(ladder_csv);
    let valid = args.step_secs >= MIN_STEP_SECS;
    let figure = format!("broadcast: deliveries/s, every message to all within 1 s ({tag})");
    match ladder::best(&steps) {
        Some(s) if valid => report.row(
            &figure,
            format!(
                "{}/s (at {} msg/s, p99 {}, max {})",
                count(s.deliveries_per_s),
                s.rate,
                ms(s.p99_us),
                ms(s.max_us)
            ),
            "≥ 600,000/s (40 msg/s × 15,000)",
            // Judged on the step's rate: msggen's achieved rate and the step's length
            // make measured deliveries/s a hair under rate × subscribers (599,536/s at 40).
            met(s.rate * open as f64 >= 600_000.0),
        ),
        Some(s) => report.row(
            &figure,
            format!(
                "{}/s at {} msg/s, but steps of {} s < {MIN_STEP_SECS} s: no figure",
                count(s.deliveries_per_s),
                s.rate,
                args.step_secs
            ),
            "≥ 600,000/s (40 msg/s × 15,000)",
            met(false),
        ),
        None => report.row(
            &figure,
            "no step met the criterion".into(),
            "≥ 600,000/s (40 msg/s × 15,000)",
            met(false),
        ),
    }
    ladder::report_steps(report, &steps, tag);
    Ok(())
}
