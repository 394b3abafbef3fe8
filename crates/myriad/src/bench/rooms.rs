//! `bench rooms`: many small channels. N connections (15,000) each join
//! `--channels-per-conn` (5) of `--channels` rooms (3,000), laid out by `flood --rooms`
//! so every room has the same N·K/C members (25); publishes go to uniformly random rooms
//! at the ladder's rates (`ladder`, 10-s steps), each step judged per message: every
//! message reached all its room's members and the slowest delivery took ≤ 1 s. The
//! figure is the highest passing rate, with its p99.
//!
//! One client for every server, one WebSocket per connection with all its rooms on it:
//! - myriad: framed mode, `/ws?channel=r1&channel=r7…`, `POST /pub/<room>`;
//! - `--peer nchan`: one multiplexed subscriber, `/rooms/sub/r1,r7,…`, `POST /rooms/pub/<room>`;
//! - `--peer socketio`: Engine.IO's WebSocket transport, rooms joined from the
//!   handshake's `?rooms=r1,r7,…`, `POST /pub/<room>` (the peer's endpoint emits to it).
//!
//! Not here: the memory of connections with channels and no traffic (`idle
//! --channels-per-conn`), the peers themselves (`peer`).

use super::held::{flood_args, Held, Live, Probe};
use super::ladder::{self, Publish, MIN_STEP_SECS};
use super::report::{bytes, count, met, Report};
use super::{BenchArgs, Ctx, Peer, DEFAULT_CHANNELS_PER_CONN, ROOMS_RATES};
use crate::server_process::ServerProcess;
use load::flood::Transport;
use std::sync::Arc;
use std::time::Duration;

/// Seconds allowed for all connections to open (and join their rooms).
const OPEN_TIMEOUT: Duration = Duration::from_secs(120);
/// Rate asked of one publishing connection, messages/s: a publish to 25 members
/// answers in well under 50 ms even on a loaded box.
const RATE_PER_PUBLISHER: f64 = 20.0;
/// Publishing connections at most (threads of msggen in this process).
const MAX_PUBLISHERS: usize = 256;
/// Wait after the last connection opened: Socket.IO joins rooms only after its
/// namespace connect, a round trip after the WebSocket opened.
const SETTLE: Duration = Duration::from_secs(2);

/// How one server is subscribed to and published to.
struct Dialect {
    /// flood's URL, `%c` for the rooms.
    url: String,
    /// What goes between two room names in `%c`.
    sep: &'static str,
    transport: Transport,
    /// msggen's path, `%d` for the room number.
    publish: String,
}

/// The subscription and publish paths of `peer` (`None`: myriad) at `server`.
fn dialect(peer: Option<Peer>, server: &ServerProcess) -> anyhow::Result<Dialect> {
    let addr = server.addr;
    Ok(match peer {
        None => Dialect {
            url: format!("ws://{addr}/ws?channel=%c"),
            sep: "&channel=",
            transport: Transport::Ws,
            publish: "/pub/r%d".into(),
        },
        Some(Peer::Nchan) => Dialect {
            url: format!("ws://{addr}/rooms/sub/%c"),
            sep: ",",
            transport: Transport::Ws,
            publish: "/rooms/pub/r%d".into(),
        },
        Some(Peer::Socketio) => Dialect {
            url: format!("ws://{addr}/socket.io/?EIO=4&transport=websocket&rooms=%c"),
            sep: ",",
            transport: Transport::Socketio,
            publish: "/pub/r%d".into(),
        },
        Some(p) => anyhow::bail!("rooms runs against myriad, nchan and socketio, not {p:?}"),
    })
}

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("rooms")?;
    let n = args.connections();
    let rooms = args.channels.max(1);
    let per_conn = args
        .channels_per_conn
        .first()
        .copied()
        .unwrap_or(DEFAULT_CHANNELS_PER_CONN);
    anyhow::ensure!(
        args.channels_per_conn.len() <= 1,
        "rooms takes one --channels-per-conn (idle measures several)"
    );
    anyhow::ensure!(
        super::context::scheme() == "http",
        "rooms runs over plain WebSocket (drop --tls)"
    );
    // Equal rooms make the expected deliveries sent × members, whichever rooms were drawn.
    anyhow::ensure!(
        n.is_multiple_of(u64::from(rooms)) && per_conn <= rooms,
        "--connections {n} must be a multiple of --channels {rooms} (so every room has the \
         same members) and --channels-per-conn {per_conn} at most --channels"
    );
    let members = n * u64::from(per_conn) / u64::from(rooms);
    let server_name = super::peer::server_name(args.peer);
    let mut report = Report::new(
        "rooms",
        &format!(
            "{} connections in {per_conn} of {} rooms each ({members} members a room), {server_name}",
            count(n as f64),
            count(f64::from(rooms))
        ),
        &dir,
    );
    let live = Live::new("rooms");
    let server_csv = dir.join("server.csv");
    let (server, server_csv) = ctx.server_or_peer(args.peer, &dir, &server_csv)?;
    let server = Arc::new(server);
    report.csvs.extend(server_csv);
    let d = dialect(args.peer, &server)?;
    let rss_idle = server.rss();

    let flood_csv = dir.join("flood.csv");
    let mut fa = flood_args(vec![d.url.clone()], n, d.transport, Some(flood_csv.clone()));
    fa.rooms = Some(rooms);
    fa.rooms_per_connection = per_conn;
    fa.room_sep = d.sep.to_string();
    if let Some(procs) = args.flood_procs {
        fa.procs = procs.to_string();
    }
    live.emit(format!(
        "---- {n} connections in {per_conn} rooms each ({}) ----",
        d.url
    ));
    let held = Held::start(fa, live.clone(), vec![server.clone()]);
    let open = held.wait_open(n, OPEN_TIMEOUT);
    std::thread::sleep(SETTLE);
    let rss_held = server.rss();
    report.row(
        "connections open, each in its rooms",
        format!("{} of {}", count(open as f64), count(n as f64)),
        "all",
        met(open == n),
    );
    report.fact(
        &format!("server memory per connection in {per_conn} rooms (user space, RSS growth)"),
        format!(
            "{} (RSS {} → {})",
            bytes(rss_held.saturating_sub(rss_idle) as f64 / open.max(1) as f64),
            bytes(rss_idle as f64),
            bytes(rss_held as f64)
        ),
    );

    live.emit("---- ladder ----".into());
    let probe = Probe::new(vec![server.clone()]);
    let ladder_csv = dir.join("ladder-rooms.csv");
    let to = Publish {
        addr: server.addr,
        path: d.publish.clone(),
        subjects: u64::from(rooms),
        fanout: members,
        per_publisher: RATE_PER_PUBLISHER,
        max_publishers: MAX_PUBLISHERS,
        pusher: None,
    };
    let steps = ladder::run(
        &held,
        &probe,
        &live,
        &to,
        &args.rates(ROOMS_RATES),
        args.step_secs,
        args.size,
        &ladder_csv,
    )?;
    held.finish()?;
    // The live probe thread may still hold the server: end it here, not at exit.
    server.stop();
    report.csvs.push(flood_csv);
    report.csvs.push(ladder_csv);
    let figure = "rooms: highest publish rate with every message to all its members within 1 s";
    ladder::report_best(&mut report, figure, &steps, args.step_secs);
    ladder::report_steps(&mut report, &steps, "");
    report.note(format!(
        "Connection i joins {per_conn} rooms `r1..r{rooms}` as `flood --rooms {rooms} \
         --rooms-per-connection {per_conn}` lays them out: every room has {members} members. \
         Each publish goes to a room drawn uniformly at random from up to {MAX_PUBLISHERS} \
         keep-alive connections (one per {RATE_PER_PUBLISHER} msg/s); only stamped messages \
         count as deliveries (a protocol's own frames do not)."
    ));
    report.note(format!(
        "A step passes when msggen reached 90 % of the rate without error, received \
         deliveries ≥ sent × {members}, no connection dropped and the slowest delivery of the \
         step took at most 1 s (judged per message: the max, not an average). The ladder \
         continues one step past the first miss. Payloads are {} bytes stamped with the \
         send time; steps last {} s (below {MIN_STEP_SECS} s a slowly growing backlog \
         hides, so shorter steps give no figure).",
        args.size, args.step_secs
    ));
    report.live = live.lines();
    Ok(report)
}
