//! `bench mass-disconnect`: N connections closed at once by the client. The figure is
//! the server's CPU time from the close until it counts no connection, minus what it
//! spends idle over the same time (its 10 ms lag tick and our `/stats` polls), and its
//! memory `--settle` seconds later compared with before anyone connected.

use super::held::{flood_args, sub_url, watch, Held, Live, Probe};
use super::report::{bytes, count, met, Report};
use super::{BenchArgs, Ctx};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Seconds of idle CPU measured before the close, for the baseline.
const BASELINE_SECS: f64 = 2.0;
/// How often the server is asked whether connections remain.
const POLL_EVERY: Duration = Duration::from_millis(100);
/// Bound on waiting for the server to notice every close.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("mass-disconnect")?;
    let n = args.connections();
    let live = Live::new("mass-disconnect");
    let mut report = Report::new(
        "mass-disconnect",
        &format!("{} connections closed at once", count(n as f64)),
        &dir,
    );
    let server_csv = dir.join("server.csv");
    let flood_csv = dir.join("flood.csv");
    let server = Arc::new(ctx.server(&server_csv, &[])?);
    report.csvs.push(server_csv);
    let rss_idle = server.rss();
    let held = Held::start(
        flood_args(
            vec![sub_url(&server)],
            n,
            args.transport()?,
            Some(flood_csv.clone()),
        ),
        live.clone(),
        vec![server.clone()],
    );
    let open = held.wait_open(n, Duration::from_secs(120));
    std::thread::sleep(Duration::from_secs(1));
    let probe = Probe::new(vec![server.clone()]);
    let c0 = probe.cpu();
    std::thread::sleep(Duration::from_secs_f64(BASELINE_SECS));
    let idle_rate = (probe.cpu() - c0) / BASELINE_SECS;
    let rss_held = server.rss();
    live.emit(format!("closing {open} connections at once"));
    let cpu_before = probe.cpu();
    let t0 = Instant::now();
    let summary = held.finish()?;
    let client_done = t0.elapsed();
    let mut left = u64::MAX;
    while t0.elapsed() < CLOSE_TIMEOUT {
        // Minus the /stats request's own connection.
        left = server.stats()?["connections"]
            .as_u64()
            .map_or(u64::MAX, |c| c.saturating_sub(1));
        if left == 0 {
            break;
        }
        std::thread::sleep(POLL_EVERY);
    }
    let server_done = t0.elapsed();
    // The last closes may still be in flight on a loop: one more poll period.
    std::thread::sleep(POLL_EVERY);
    let window = t0.elapsed().as_secs_f64();
    let raw = probe.cpu() - cpu_before;
    let cpu = (raw - idle_rate * window).max(0.0);
    let mut probe = Probe::new(vec![server.clone()]);
    live.emit(format!("everyone left; settling {:.0} s", args.settle));
    watch(&live, &mut probe, args.settle, &mut |_| false);
    let rss_after = server.rss();
    report.csvs.push(flood_csv);
    report.row(
        "connections held before the close",
        format!(
            "{} of {} ({} failed)",
            count(open as f64),
            count(n as f64),
            summary.failed
        ),
        "all",
        met(open == n),
    );
    report.row(
        &format!("mass disconnect of {}: server CPU", count(open as f64)),
        format!(
            "{cpu:.3} s (raw {raw:.3} s over {window:.2} s, idle {:.3} s/s subtracted)",
            idle_rate
        ),
        "≤ 0.2 s",
        met(cpu <= 0.2 && left == 0),
    );
    report.fact(
        "time until the server counted no connection",
        format!(
            "{:.2} s (client closed all in {:.2} s); {left} left",
            server_done.as_secs_f64(),
            client_done.as_secs_f64()
        ),
    );
    let ratio = rss_after as f64 / rss_idle.max(1) as f64;
    report.row(
        &format!("memory {:.0} s after everyone left", args.settle),
        format!(
            "{} vs {} idle, {} held ({:+.1} % vs idle)",
            bytes(rss_after as f64),
            bytes(rss_idle as f64),
            bytes(rss_held as f64),
            (ratio - 1.0) * 100.0
        ),
        "back to idle ± 10 %",
        met((ratio - 1.0).abs() <= 0.10),
    );
    report.note(
        "Server CPU is user + system time of the server process (from /proc) between the \
         moment flood was told to close everything and one poll period after the server's \
         /stats showed 0 connections, minus the idle rate measured over the 2 s before.",
    );
    report.live = live.lines();
    Ok(report)
}
