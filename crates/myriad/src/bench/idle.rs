//! `bench idle`: what an idle connection costs. Per transport, a fresh server takes N
//! connections as fast as flood can open them; the growth of the server's anonymous
//! resident memory (heap and private mappings) divided by N is the user-space memory
//! per connection (the whole RSS is reported beside it: it also counts the pages of
//! the binary the first connections run, paid once), the machine's slab + TCP memory growth
//! divided by 2 ends and N the kernel memory per socket. Then everyone leaves at once
//! and, `--settle` seconds later, the server's RSS is compared with its idle RSS.
//!
//! With `--channels-per-conn K,…` the phases are connections in K channels each
//! (`/ws?channel=r1&channel=r7…`, framed, by default; `--transport stream|sse|ws` or
//! `all` for those three: `/sub?channel=…`, `/sse?channel=…`), laid out over
//! `--channels` rooms by `flood --rooms`: what a channel subscription costs, against
//! the budget of 100 B a connection plus 24 B a channel. `--channel-users` runs each
//! K again with a user per connection (`/ws/<id>?channel=…`): what presence's
//! records of who is in a channel cost, per (user, channel) membership.

use super::context::{listen_overflows, socket_slab_bytes};
use super::held::{base_url, flood_args, sub_url, watch, Held, Live, Probe};
use super::report::{bytes, count, memory_verdict, met, Report, MEMORY_TARGET};
use super::{BenchArgs, Ctx, TransportChoice};
use crate::server_process::kernel_socket_bytes;
use load::flood::Transport;
use std::sync::Arc;
use std::time::Duration;

/// Seconds allowed for all connections to open.
const OPEN_TIMEOUT: Duration = Duration::from_secs(120);
/// The budget of a connection's user-space memory with channels, bytes, before
/// [`CHANNEL_BUDGET`] per channel (DESIGN.md's budget per connection).
const CONN_BUDGET: f64 = 100.0;
/// The budget of one channel subscription, bytes.
const CHANNEL_BUDGET: f64 = 24.0;
/// Seconds to wait after the last connection opened before reading memory.
const QUIET_BEFORE_READING: Duration = Duration::from_secs(2);

/// What one phase measured.
pub struct Idle {
    /// The phase's name: the transport, or `ws, K channels` (the transport's).
    pub name: String,
    /// Channels per connection, in a channel phase.
    pub channels: Option<u32>,
    /// Each connection had a user (`--channel-users`).
    pub users: bool,
    pub open: u64,
    pub asked: u64,
    pub failed: u64,
    pub server_conns: u64,
    /// Anonymous resident memory: before, held.
    pub anon_idle: u64,
    pub anon_held: u64,
    /// The whole RSS, the binary's pages first run included: before, held, after
    /// everyone left.
    pub rss_idle: u64,
    pub rss_held: u64,
    pub rss_after: u64,
    pub kernel_per_socket: f64,
    /// The same from the socket slab caches + TCP buffers only, when readable.
    pub slab_per_socket: Option<f64>,
    pub connect_rate: f64,
    /// Listen-queue overflows on the machine while connecting.
    pub overflows: u64,
    /// The server's best second of accepts.
    pub peak_accepts: u64,
    /// flood's busiest second, percent of a core.
    pub client_cpu: u64,
}

impl Idle {
    /// The transport part of the phase's name.
    fn transport_of(&self) -> &str {
        self.name.split(',').next().unwrap_or("")
    }

    /// Anonymous memory growth per connection. The whole RSS also grows by the
    /// code the first connections run (300–400 KB, once, however many connect:
    /// ~25 B a connection of 15,000 that would be none of a million's).
    pub fn user_per_conn(&self) -> f64 {
        self.anon_held.saturating_sub(self.anon_idle) as f64 / self.open.max(1) as f64
    }

    fn rss_per_conn(&self) -> f64 {
        self.rss_held.saturating_sub(self.rss_idle) as f64 / self.open.max(1) as f64
    }
}

/// One phase: a transport, or connections in some channels each.
struct Phase {
    name: String,
    transport: Transport,
    /// Channels per connection (framed WebSocket), if any.
    channels: Option<u32>,
    /// Each connection logged in as its own user (`--channel-users`).
    users: bool,
}

/// The phases asked for: `--channels-per-conn`, else `--transport`.
fn phases(args: &BenchArgs) -> anyhow::Result<Vec<Phase>> {
    if !args.channels_per_conn.is_empty() {
        let rooms = u64::from(args.channels.max(1));
        anyhow::ensure!(
            args.connections().is_multiple_of(rooms),
            "--connections must be a multiple of --channels {rooms} (rooms of equal members)"
        );
        let transports = match args.transport {
            None => vec![Transport::Ws],
            Some(TransportChoice::All) => vec![Transport::Stream, Transport::Sse, Transport::Ws],
            Some(_) => {
                let t = args.transport()?;
                anyhow::ensure!(
                    t != Transport::Poll,
                    "--channels-per-conn measures held connections: stream, sse or ws"
                );
                vec![t]
            }
        };
        let users: &[bool] = match args.channel_users {
            true => &[false, true],
            false => &[false],
        };
        // With users, also none: what a user's login costs a framed connection alone.
        let mut ks = args.channels_per_conn.clone();
        if args.channel_users && !ks.contains(&0) {
            ks.insert(0, 0);
        }
        return Ok(transports
            .into_iter()
            .flat_map(|transport| {
                let ks = ks.clone();
                ks.into_iter().flat_map(move |k| {
                    users.iter().map(move |&users| Phase {
                        name: format!(
                            "{}, {k} channel{}{}",
                            format!("{transport:?}").to_lowercase(),
                            if k == 1 { "" } else { "s" },
                            if users { ", users" } else { "" }
                        ),
                        transport,
                        channels: Some(k),
                        users,
                    })
                })
            })
            .collect());
    }
    let transports = match args.transport.unwrap_or(TransportChoice::All) {
        TransportChoice::All => vec![
            Transport::Stream,
            Transport::Sse,
            Transport::Ws,
            Transport::Poll,
        ],
        _ => vec![args.transport()?],
    };
    Ok(transports
        .into_iter()
        .map(|t| Phase {
            name: format!("{t:?}").to_lowercase(),
            transport: t,
            channels: None,
            users: false,
        })
        .collect())
}

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("idle")?;
    let phases = phases(args)?;
    let n = args.connections();
    let live = Live::new("idle");
    let mut report = Report::new(
        "idle",
        &format!("{} idle connections", count(n as f64)),
        &dir,
    );
    let mut results = Vec::new();
    for phase in phases {
        let file = phase.name.replace(", ", "-").replace(' ', "-");
        let server_csv = dir.join(format!("server-{file}.csv"));
        let flood_csv = dir.join(format!("flood-{file}.csv"));
        live.emit(format!("---- {}: {n} connections ----", phase.name));
        let r = measure(args, ctx, &live, phase, &server_csv, &flood_csv)?;
        report.csvs.push(server_csv);
        report.csvs.push(flood_csv);
        results.push(r);
    }
    for r in &results {
        let name = &r.name;
        let user = r.user_per_conn();
        report.row(
            &format!("connections held ({name})"),
            format!(
                "{} of {} ({} failed; server counts {})",
                count(r.open as f64),
                count(r.asked as f64),
                r.failed,
                count(r.server_conns as f64)
            ),
            "all",
            met(r.open == r.asked),
        );
        let (target, verdict) = match r.channels {
            Some(k) => {
                let budget = CONN_BUDGET + CHANNEL_BUDGET * f64::from(k);
                (
                    format!("≤ {} (100 B + {k} × 24 B)", bytes(budget)),
                    met(user <= budget),
                )
            }
            None => (MEMORY_TARGET.to_string(), memory_verdict(user)),
        };
        report.row(
            &format!("user-space memory per idle connection ({name})"),
            format!(
                "{} (anonymous {} → {}; whole RSS {} a connection, {} → {}, with the code first run)",
                bytes(user),
                bytes(r.anon_idle as f64),
                bytes(r.anon_held as f64),
                bytes(r.rss_per_conn()),
                bytes(r.rss_idle as f64),
                bytes(r.rss_held as f64)
            ),
            &target,
            verdict,
        );
        report.row(
            &format!("kernel memory per socket ({name})"),
            format!(
                "{} (socket slab caches + TCP buffers: {})",
                bytes(r.kernel_per_socket),
                r.slab_per_socket.map_or("unreadable".into(), bytes)
            ),
            "what the kernel takes (≈ 4.2 KB)",
            "—".into(),
        );
        report.row(
            &format!("connection accept rate ({name})"),
            format!(
                "{}/s (server's best second {}/s; flood client peaked at {} % of a core)",
                count(r.connect_rate),
                count(r.peak_accepts as f64),
                r.client_cpu
            ),
            "≥ 30,000/s",
            met(r.connect_rate >= 30_000.0),
        );
        report.fact(
            &format!("listen-queue overflows while connecting ({name})"),
            format!(
                "{} (machine-wide; each costs a 1 s SYN retransmit)",
                r.overflows
            ),
        );
        let ratio = r.rss_after as f64 / r.rss_idle.max(1) as f64;
        report.row(
            &format!("memory {:.0} s after everyone left ({name})", args.settle),
            format!(
                "{} vs {} idle ({:+.1} %)",
                bytes(r.rss_after as f64),
                bytes(r.rss_idle as f64),
                (ratio - 1.0) * 100.0
            ),
            "back to idle ± 10 %",
            met((ratio - 1.0).abs() <= 0.10),
        );
    }
    membership_rows(&mut report, &results);
    report.note(
        "User-space memory: the server's RSS after all connections opened minus its RSS \
         before, divided by the connections (one fresh server per transport, no message sent).",
    );
    report.note(
        "Kernel memory per socket: machine-wide growth of slab + TCP buffer memory \
         (/proc/meminfo Slab, /proc/net/sockstat mem) divided by 2 ends (client and server \
         sockets are both on this machine) and by the connections; other activity on the \
         machine moves it. In brackets: the same from only the socket slab caches of \
         /proc/slabinfo (TCP sockets, socket inodes, minisocks, epoll items) plus TCP \
         buffers, which other work moves less.",
    );
    report.note(
        "Connect rate: flood's successful opens per second, first attempt to last open \
         (the measured figure); the server's best second is its `connects` counter over \
         the live probe's one-second windows.",
    );
    report.live = live.lines();
    Ok(report)
}

/// With `--channel-users`: per K, what a user per connection adds to the same
/// connections in the same channels beyond what it adds to a connection without
/// channels (the user's login), per (user, channel) membership — each
/// subscription's user in the channel, the user's count of subscriptions, the
/// user's stream on the connection.
fn membership_rows(report: &mut Report, results: &[Idle]) {
    // Same transport and K, one with users and one without: (with, without).
    let pair = |r: &Idle, k: u32| {
        let without = results
            .iter()
            .find(|w| !w.users && w.channels == Some(k) && r.transport_of() == w.transport_of())?;
        let with = results
            .iter()
            .find(|w| w.users && w.channels == Some(k) && r.transport_of() == w.transport_of())?;
        Some((with.user_per_conn(), without.user_per_conn()))
    };
    for r in results.iter().filter(|r| r.users) {
        let Some(k) = r.channels.filter(|&k| k > 0) else {
            continue;
        };
        let (Some((with, without)), Some((login_with, login_without))) = (pair(r, k), pair(r, 0))
        else {
            continue;
        };
        let login = login_with - login_without;
        let per = (with - without - login) / f64::from(k);
        report.row(
            &format!("what users add per (user, channel) membership ({})", r.name),
            format!(
                "{} ({} a connection with users, {} without, less {} a login adds \
                 with no channel)",
                bytes(per),
                bytes(with),
                bytes(without),
                bytes(login)
            ),
            "≤ 16 B (issue 42)",
            met(per <= 16.0),
        );
    }
}

/// One phase on a fresh server.
fn measure(
    args: &BenchArgs,
    ctx: &Ctx,
    live: &Arc<Live>,
    phase: Phase,
    server_csv: &std::path::Path,
    flood_csv: &std::path::Path,
) -> anyhow::Result<Idle> {
    let n = args.connections();
    let server = Arc::new(ctx.server(server_csv, &[])?);
    let (rss_idle, anon_idle) = (server.rss(), server.rss_anon());
    let kernel_idle = kernel_socket_bytes();
    let slab_idle = socket_slab_bytes();
    let overflows = listen_overflows();
    let mut fa = flood_args(
        vec![sub_url(&server)],
        n,
        phase.transport,
        Some(flood_csv.to_path_buf()),
    );
    if let Some(k) = phase.channels {
        let path = match phase.transport {
            Transport::Stream => "sub",
            Transport::Sse => "sse",
            _ => "ws",
        };
        let user = if phase.users { "/%d" } else { "" };
        fa.urls = vec![format!("{}/{path}{user}?channel=%c", base_url(&server))];
        fa.rooms = Some(args.channels);
        fa.rooms_per_connection = k;
        fa.room_sep = "&channel=".into();
        if k == 0 {
            // No channel, framed as the others (a WebSocket); no rooms to name.
            let framed = if phase.transport == Transport::Ws {
                "?framed=1"
            } else {
                ""
            };
            fa.urls = vec![format!("{}/{path}{user}{framed}", base_url(&server))];
            fa.rooms = None;
        }
    }
    let held = Held::start(fa, live.clone(), vec![server.clone()]);
    let open = held.wait_open(n, OPEN_TIMEOUT);
    std::thread::sleep(QUIET_BEFORE_READING);
    let (rss_held, anon_held) = (server.rss(), server.rss_anon());
    let kernel_held = kernel_socket_bytes();
    let slab_held = socket_slab_bytes();
    let overflows = listen_overflows().saturating_sub(overflows);
    // Minus the /stats request's own connection.
    let server_conns = server.stats()?["connections"]
        .as_u64()
        .unwrap_or(0)
        .saturating_sub(1);
    let peak_accepts = held.peak_accepts();
    let client_cpu = held.peak_client_cpu();
    let summary = held.finish()?;
    let mut probe = Probe::new(vec![server.clone()]);
    watch(live, &mut probe, 30.0, &mut |s| s.connections == 0);
    live.emit(format!("everyone left; settling {:.0} s", args.settle));
    watch(live, &mut probe, args.settle, &mut |_| false);
    let rss_after = server.rss();
    Ok(Idle {
        name: phase.name,
        channels: phase.channels,
        users: phase.users,
        open,
        asked: n,
        failed: summary.failed,
        server_conns,
        anon_idle,
        anon_held,
        rss_idle,
        rss_held,
        rss_after,
        kernel_per_socket: kernel_held.saturating_sub(kernel_idle) as f64
            / (2 * open.max(1)) as f64,
        slab_per_socket: slab_idle
            .zip(slab_held)
            .map(|(a, b)| b.saturating_sub(a) as f64 / (2 * open.max(1)) as f64),
        connect_rate: summary.connect_rate,
        overflows,
        peak_accepts,
        client_cpu,
    })
}
