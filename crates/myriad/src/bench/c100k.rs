//! `bench c100k`: 100,000+ connections on one machine. A process may hold only 20,000
//! open files here, so N `myriad serve` processes listen on N ports (each below the
//! limit) and flood spreads its connections over them round-robin, from several
//! source addresses (127.0.0.2-…, each with its own port range per destination) and
//! in several child processes of its own. Reports connections held, connect rate and
//! memory per connection (user space: the servers' RSS growth; kernel: machine-wide
//! slab + TCP growth over 2 ends).

use super::context::{listen_overflows, socket_slab_bytes};
use super::held::{flood_args, sub_url, Held, Live, Probe};
use super::report::{bytes, count, memory_verdict, met, Report, MEMORY_TARGET};
use super::{BenchArgs, Ctx};
use crate::server_process::kernel_socket_bytes;
use host::doctor::KERNEL_BYTES_PER_SOCKET;
use std::sync::Arc;
use std::time::Duration;

/// Connections per server process by default (under the 20,000-file limit, with room
/// for the listener, epoll, CSV and the admin side).
const PER_SERVER: u64 = 16_000;
/// Connections per source address (under the 28,232 ephemeral ports per destination).
const PER_SOURCE: u64 = 20_000;
/// Memory left free on top of the estimate before starting, bytes.
const MEMORY_MARGIN: u64 = 2 << 30;

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("c100k")?;
    let n = args.connections();
    let servers_n = args
        .servers
        .map_or(n.div_ceil(PER_SERVER), u64::from)
        .max(1);
    // Each socket end costs ≈ 4.2 KB of kernel memory; both ends are here.
    let need = n * (2 * KERNEL_BYTES_PER_SOCKET + 1024) + MEMORY_MARGIN;
    let available = observe::procfs::read_meminfo().map_or(0, |m| m.available);
    anyhow::ensure!(
        available >= need,
        "{n} connections need about {} of memory; {} available",
        bytes(need as f64),
        bytes(available as f64)
    );
    let mut sources = n.div_ceil(PER_SOURCE).max(1);
    // Coprime with the servers, so round-robin reaches every (source, server) pair.
    while gcd(sources, servers_n) != 1 {
        sources += 1;
    }
    let live = Live::new("c100k");
    let mut report = Report::new(
        "c100k",
        &format!(
            "{} connections over {servers_n} server processes",
            count(n as f64)
        ),
        &dir,
    );
    let mut servers = Vec::new();
    for i in 0..servers_n {
        let csv = dir.join(format!("server-{i}.csv"));
        servers.push(Arc::new(ctx.server(&csv, &[])?));
        if i == 0 {
            report.csvs.push(csv); // one server's CSV is enough for the charts
        }
    }
    let probe = Probe::new(servers.clone());
    let rss_idle = probe.rss();
    let kernel_idle = kernel_socket_bytes();
    let slab_idle = socket_slab_bytes();
    let overflows0 = listen_overflows();
    let flood_csv = dir.join("flood.csv");
    let mut fa = flood_args(
        servers.iter().map(|s| sub_url(s)).collect(),
        n,
        args.transport()?,
        Some(flood_csv.clone()),
    );
    let source_range = format!("127.0.0.2-127.0.0.{}", 1 + sources);
    fa.sources = vec![source_range.clone()];
    fa.connect_timeout = 30.0;
    live.emit(format!(
        "{n} connections to {servers_n} servers from {source_range}"
    ));
    let held = Held::start(fa, live.clone(), servers.clone());
    let open = held.wait_open(n, Duration::from_secs(300));
    std::thread::sleep(Duration::from_secs(3));
    let rss_held = probe.rss();
    let kernel_held = kernel_socket_bytes();
    let slab_held = socket_slab_bytes();
    let overflows = listen_overflows().saturating_sub(overflows0);
    let mut server_conns = 0;
    for s in &servers {
        // Minus the /stats request's own connection.
        server_conns += s.stats()?["connections"]
            .as_u64()
            .unwrap_or(0)
            .saturating_sub(1);
    }
    live.emit(format!("holding {open} for {} s", args.hold));
    std::thread::sleep(Duration::from_secs_f64(args.hold));
    let open_end = held.open();
    let peak_accepts = held.peak_accepts();
    let client_cpu = held.peak_client_cpu();
    let summary = held.finish()?;
    report.csvs.push(flood_csv);
    let user = rss_held.saturating_sub(rss_idle) as f64 / open.max(1) as f64;
    let kernel = kernel_held.saturating_sub(kernel_idle) as f64 / (2 * open.max(1)) as f64;
    report.row(
        "concurrent connections held",
        format!(
            "{} of {} (servers count {}; {} still open after {} s hold; {} failed: {})",
            count(open as f64),
            count(n as f64),
            count(server_conns as f64),
            count(open_end as f64),
            args.hold,
            summary.failed,
            summary.failures.describe()
        ),
        &format!("{} this run (SPEC: 1,000,000)", count(n as f64)),
        met(open == n && open_end == n),
    );
    report.row(
        "connection accept rate",
        format!(
            "{}/s (servers' best second {}/s; flood's {} processes peaked at {} % of a core)",
            count(summary.connect_rate),
            count(peak_accepts as f64),
            summary.processes,
            client_cpu
        ),
        "≥ 30,000/s",
        met(summary.connect_rate >= 30_000.0),
    );
    report.fact(
        "listen-queue overflows while connecting",
        format!("{overflows} (machine-wide; each costs a 1 s SYN retransmit)"),
    );
    report.row(
        "user-space memory per idle connection",
        format!(
            "{} (all servers' RSS {} → {})",
            bytes(user),
            bytes(rss_idle as f64),
            bytes(rss_held as f64)
        ),
        MEMORY_TARGET,
        memory_verdict(user),
    );
    let slab = slab_idle
        .zip(slab_held)
        .map(|(a, b)| b.saturating_sub(a) as f64 / (2 * open.max(1)) as f64);
    report.row(
        "kernel memory per socket",
        format!(
            "{} (socket slab caches + TCP buffers: {})",
            bytes(kernel),
            slab.map_or("unreadable".into(), bytes)
        ),
        "what the kernel takes (≈ 4.2 KB)",
        "—".into(),
    );
    report.fact(
        "processes",
        format!(
            "{servers_n} servers (each under the 20,000-file per-process limit), {} flood process(es), {} source addresses",
            summary.processes, sources
        ),
    );
    report.note(format!(
        "This machine allows {} open files per process, so one server process cannot hold \
         more than that: {servers_n} `myriad serve --store memory` processes listen on \
         {servers_n} ports, and flood spreads connections over them round-robin from source \
         addresses {source_range} (each address has its own ephemeral port range per \
         destination).",
        host::sys::nofile().1
    ));
    report.note(
        "Kernel memory per socket: machine-wide slab + TCP buffer growth / 2 ends / \
         connections; in brackets the same from the socket slab caches of /proc/slabinfo only.",
    );
    report.live = live.lines();
    Ok(report)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn gcd_finds_common_factors() {
        assert_eq!(super::gcd(6, 4), 2);
        assert_eq!(super::gcd(7, 6), 1);
        assert_eq!(super::gcd(5, 1), 1);
    }
}
