//! `bench unicast`: N connections to distinct users 1..=N, `--unicast-rate` msg/s to
//! random users for `--duration` s. Latency p50/p99/p99.9 over every delivery of the
//! publishing window (the flood's merged per-second histograms) and the server's CPU
//! over that window, as percent of one core. `--peer` runs it against a peer server.

use super::held::{client_cpu, flood_args, sub_url, Held, Live};
use super::report::{count, met, ms, Report};
use super::{BenchArgs, Ctx};
use load::flood::stats::quantile;
use load::msggen::MsggenArgs;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Publishing connections (each waits for its reply: 10,000 msg/s needs several).
const PUBLISHERS: usize = 8;

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("unicast")?;
    let n = args.connections();
    let transport = args.transport()?;
    let live = Live::new("unicast");
    let server_name = super::peer::server_name(args.peer);
    let mut report = Report::new(
        "unicast",
        &format!(
            "{} msg/s to random users among {}, {server_name}",
            count(args.unicast_rate),
            count(n as f64)
        ),
        &dir,
    );
    let flood_csv = dir.join("flood.csv");
    let (server, server_csv) = ctx.server_or_peer(args.peer, &dir, &dir.join("server.csv"))?;
    let server = Arc::new(server);
    report.csvs.extend(server_csv);
    let mut a = flood_args(
        vec![sub_url(&server)],
        n,
        transport,
        Some(flood_csv.clone()),
    );
    a.users = Some(format!("1-{n}"));
    let held = Held::start(a, live.clone(), vec![server.clone()]);
    let open = held.wait_open(n, Duration::from_secs(120));
    std::thread::sleep(Duration::from_secs(1));
    held.take_hist();
    let client0 = client_cpu();
    let cpu0 = {
        let (u, s) = server.cpu();
        u + s
    };
    live.emit(format!(
        "publishing {} msg/s for {} s",
        args.unicast_rate, args.duration
    ));
    let sent = load::msggen::run_with(
        MsggenArgs {
            url: super::held::base_url(&server),
            ca: super::context::tls_ca(),
            rate: args.unicast_rate,
            max: n,
            publishers: PUBLISHERS,
            duration: args.duration,
            size: args.size,
            quiet: true,
            ..Default::default()
        },
        &AtomicBool::new(false),
    )?;
    let cpu = {
        let (u, s) = server.cpu();
        (u + s - cpu0) / sent.elapsed_s.max(1e-3) * 100.0
    };
    let client = (client_cpu() - client0) / sent.elapsed_s.max(1e-3) * 100.0;
    held.wait_quiet(Duration::from_secs(5));
    let received = held.messages();
    let h = held.take_hist();
    let q = |x: f64| quantile(&h, x);
    let (p50, p99, p999) = (q(0.5), q(0.99), q(0.999));
    held.finish()?;
    report.csvs.push(flood_csv);
    report.row(
        "connections held",
        format!("{} of {}", count(open as f64), count(n as f64)),
        "all",
        met(open == n),
    );
    report.fact(
        "published",
        format!(
            "{} at {}/s ({} errors)",
            count(sent.sent as f64),
            count(sent.achieved_rate),
            sent.errors
        ),
    );
    // Each user holds one connection, so a peer that answers without counts owes
    // exactly one delivery per publish.
    let (expected, by) = match args.peer {
        Some(peer) if !peer.counts_deliveries() => (sent.sent, "one per publish"),
        _ => (sent.deliveries, "reported by the server"),
    };
    report.row(
        &format!("deliveries received / {by}"),
        format!("{} / {}", count(received as f64), count(expected as f64)),
        "all",
        met(received >= expected && sent.sent > 0),
    );
    report.row(
        &format!("unicast latency p99 at {} msg/s", count(args.unicast_rate)),
        ms(p99),
        "≤ 0.5 ms",
        met(p99 > 0 && p99 <= 500),
    );
    report.fact(
        "unicast latency p50 / p99.9 / max",
        format!("{} / {} / {}", ms(p50), ms(p999), ms(h.max())),
    );
    report.row(
        "server CPU while publishing",
        format!("{cpu:.1} % of a core"),
        "≤ 25 % of a core",
        met(cpu <= 25.0),
    );
    report.fact(
        "client CPU while publishing (flood + msggen)",
        format!("{client:.1} % of a core"),
    );
    report.fact(
        "publish request round trip p50 / p99",
        format!("{} / {}", ms(sent.rtt_p50_us), ms(sent.rtt_p99_us)),
    );
    report.note(format!(
        "{PUBLISHERS} msggen keep-alive connections publish {}-byte stamped payloads to \
         uniformly random users 1..{n}; each user holds one connection. Server CPU \
         includes parsing the publish requests.",
        args.size
    ));
    report.note("Latency is publish (before the HTTP request) to receipt by flood.");
    report.live = live.lines();
    Ok(report)
}
