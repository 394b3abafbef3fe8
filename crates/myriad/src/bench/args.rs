//! `myriad bench`'s flags ([`BenchArgs`]) and the choices they take; defaults the
//! scenarios share.

use super::{abuse_cases, history};
use std::path::PathBuf;

/// Default connection count of the 15k scenarios (the SPEC's reference scale).
pub const DEFAULT_CONNECTIONS: u64 = 15_000;
/// Default connection count of `c100k`.
pub const DEFAULT_C100K: u64 = 100_000;
/// Default connection count of `c1m`.
pub const DEFAULT_C1M: u64 = 1_000_000;
/// Default ladder of `broadcast`, messages/s.
pub const BROADCAST_RATES: &[f64] = &[
    2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 60.0, 80.0, 120.0, 160.0, 200.0,
];
/// Default ladder of `rooms`, messages/s (each to one room of 25 by default).
pub const ROOMS_RATES: &[f64] = &[
    100.0, 200.0, 500.0, 1_000.0, 1_500.0, 2_000.0, 3_000.0, 5_000.0, 7_500.0, 10_000.0, 15_000.0,
    20_000.0, 30_000.0, 40_000.0,
];
/// Default rooms of `rooms` (15,000 connections in 5 each: rooms of 25).
pub const DEFAULT_CHANNELS: u32 = 3_000;
/// Default rooms per connection of `rooms`.
pub const DEFAULT_CHANNELS_PER_CONN: u32 = 5;

/// Which scenario to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Memory per idle connection (user space and kernel), connect rate, memory after everyone left.
    Idle,
    /// N subscribers of one publish (--shape): latency at 5 msg/s and a ladder of rates in 10-s steps.
    Broadcast,
    /// N connections to distinct users, 10,000 msg/s to random users: latency and server CPU.
    Unicast,
    /// N connections closed at once by the client: server CPU spent, memory afterwards.
    MassDisconnect,
    /// Connections opening and closing continuously: connects/s, closes/s, errors, memory.
    Churn,
    /// N HTTP/1.1 keep-alive clients send one request and go idle: time until the server closed them.
    Keepalive,
    /// 100,000+ connections over several server processes and source addresses.
    C100k,
    /// One supervised myriad (router + gateways over NATS) holding 1,000,000 mixed connections over a friends graph, with graph and unicast publishes.
    C1m,
    /// Connect storms from several flood processes: accepts per second on the server side.
    Connect,
    /// N honest subscribers' broadcast latency and server RSS, clean and under hostile clients.
    Abuse,
    /// N connections in --channels-per-conn of --channels rooms each, publishes to random rooms: a ladder of rates in 10-s steps.
    Rooms,
    /// N users (default 10,000) in one channel: GET /presence/<channel> (the whole list) and its /stats, p50/p99.
    Presence,
    /// N Pusher clients (protocol 7) on one channel, events through the signed Pusher HTTP API: memory per idle connection, connect rate, latency at 5 msg/s, a ladder of rates in 10-s steps (--peer sockudo|soketi: the same against them).
    Pusher,
    /// N long-poll clients (default 9,000; 100,000 and more over a supervised server and client processes), each throwing a message every --send-every s to a random other client with its own token: holding cost, publishes/s, latency, errors; --rates for a ladder.
    Sprites,
    /// idle, broadcast, unicast, mass-disconnect, churn and keepalive in sequence.
    All,
}

/// Transport choice of the scenarios (`all` only for `idle`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportChoice {
    Stream,
    Sse,
    Ws,
    Poll,
    All,
}

/// Who receives a broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// One user holding N connections; publish to that user.
    OneUser,
    /// N users following one subject (one connection each); publish to the subject.
    Followers,
    /// One-user, then followers.
    Both,
}

/// A server other than `myriad serve` to run broadcast (one-user), unicast, connect or rooms against (and, for c1m, beside it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Peer {
    /// A Node.js cluster of 2 workers, one `res.write` per subscriber (`node` on PATH).
    Node,
    /// nginx with nchan, 2 workers (`apt-get install nginx-light libnginx-mod-nchan`).
    Nchan,
    /// The floor: a minimal C epoll server, 2 threads, one send per delivery (built with `cc`).
    Floor,
    /// Socket.IO with rooms, a Node.js cluster of 2 (rooms only; npm installs `socket.io`).
    Socketio,
    /// Sockudo, a Pusher server in Rust (pusher only; `cargo install sockudo --locked`).
    Sockudo,
    /// soketi, a Pusher server on Node.js and uWebSockets.js (pusher only; npm installs `@soketi/soketi`).
    Soketi,
}

impl Peer {
    /// Whether its publish replies count the deliveries (nchan and the floor answer
    /// without counts; in unicast each user holds one connection, so one per publish).
    pub fn counts_deliveries(self) -> bool {
        self == Peer::Node
    }
}

/// Flags of `myriad bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// The scenario.
    #[arg(value_enum)]
    pub scenario: Scenario,
    /// Client connections (default 15,000; c100k: 100,000; c1m: 1,000,000; sprites:
    /// clients of two connections each, default 9,000).
    #[arg(long)]
    pub connections: Option<u64>,
    /// Client transport (default: all for idle, stream otherwise).
    #[arg(long, value_enum)]
    pub transport: Option<TransportChoice>,
    /// Seconds to wait after everyone left before measuring memory again.
    #[arg(long, default_value_t = 30.0)]
    pub settle: f64,
    /// Directory for the reports; each scenario writes DIR/<scenario>/report.md.
    #[arg(long, default_value = "myriad-bench")]
    pub out: PathBuf,
    /// Event loops per server process (default: the server's, one per core).
    #[arg(long)]
    pub loops: Option<u32>,
    /// broadcast: publish rate of the latency phase, messages/s.
    #[arg(long, default_value_t = 5.0)]
    pub latency_rate: f64,
    /// broadcast: seconds of the latency phase.
    #[arg(long, default_value_t = 10.0)]
    pub latency_secs: f64,
    /// broadcast, rooms, sprites: publish rates of the ladder, messages/s (it stops one
    /// step after the first miss; broadcast: 2,5,10,15,20,30,40,60,80,120,160,200; rooms:
    /// 100,200,500,1000,1500,2000,3000,5000,7500,10000,15000,20000,30000,40000;
    /// sprites: no ladder unless given, one step at connections / --send-every; each
    /// step lasts --duration).
    #[arg(long, value_delimiter = ',')]
    pub rates: Vec<f64>,
    /// broadcast: seconds per ladder step; below 10 s a backlog that grows slowly does
    /// not show, so the report marks shorter steps as not a valid figure.
    #[arg(long, default_value_t = 10.0)]
    pub step_secs: f64,
    /// broadcast: who receives each message.
    #[arg(long, value_enum, default_value = "both")]
    pub shape: Shape,
    /// broadcast (one-user), unicast, connect (node, nchan, floor), rooms (nchan,
    /// socketio): run against this peer server instead of `myriad serve`; c1m (floor):
    /// after myriad, the same connections and unicast rates on the floor, side by side.
    #[arg(long, value_enum)]
    pub peer: Option<Peer>,
    /// Run this `myriad` executable as the server (e.g. a baseline build) instead of this one.
    #[arg(long, value_name = "PATH")]
    pub server_bin: Option<PathBuf>,
    /// Flood processes (connect: default 4, so the client is not the limit; broadcast:
    /// default one, in the bench process; churn: default 4 churning children at once;
    /// sprites: client processes, at least one per 9,000 clients).
    #[arg(long)]
    pub flood_procs: Option<u32>,
    /// connect: connect storms to run (each opens --connections, then closes them all).
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
    /// unicast, c1m: messages per second to random users.
    #[arg(long, default_value_t = 10_000.0)]
    pub unicast_rate: f64,
    /// c1m: graph publishes per second (issue 9 asks 1,000).
    #[arg(long, default_value_t = 1_000.0)]
    pub graph_rate: f64,
    /// c1m: unicast rates to step through after the two phases, `--duration` s each
    /// (≥ 10 s for a valid figure), each judged against the unicast target (≥ 90 % of
    /// the rate reached, every delivery, p99 ≤ 5 ms); it stops one step after the
    /// first miss so the cliff shows (e.g. `--unicast-ladder 250,500,1000,2000,4000`).
    #[arg(long, value_delimiter = ',')]
    pub unicast_ladder: Vec<f64>,
    /// c1m: how the publishers publish: `http` (POST /pub to the gateways), `router`
    /// (POST /pub to the router's publish port, `--publish-listen`) or `nats` (a
    /// back-end's request to `myriad.pub.<subject>`, straight to the router).
    #[arg(long, value_enum, default_value_t = PublishVia::Http)]
    pub publish_via: PublishVia,
    /// c1m: where a delivery's latency ends, `read` (when flood reads it: the issue's
    /// publish → receive) or `socket` (the kernel's arrival stamp at the client's
    /// socket: leaves out the clients' own wait for a CPU on this shared box).
    #[arg(long, value_enum, default_value_t = load::flood::LatencyAt::Read)]
    pub client_latency: load::flood::LatencyAt,
    /// c1m: run the floods (the clients) at this niceness, e.g. 10, so that on a box
    /// shared with the load the server is scheduled first (default: the same as the server).
    #[arg(long)]
    pub client_nice: Option<i32>,
    /// sprites: seconds between one client's throws.
    #[arg(long, default_value_t = 5.0)]
    pub send_every: f64,
    /// unicast publishing seconds; churn seconds; sprites' throwing step.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// churn: connects per second over all workers (0 = as fast as they can).
    #[arg(long, default_value_t = 0.0)]
    pub churn_rate: f64,
    /// churn: each connection joins one of this many rooms (`r1..rN`) with
    /// `presence=1`, so every join and leave is pushed to the room's other members
    /// (issue 42's churn in 100-member rooms: N = connections / 100); 0 = none.
    #[arg(long, default_value_t = 0)]
    pub churn_rooms: u32,
    /// churn with `--churn-rooms`: members of the channel held through the churn
    /// whose `GET /presence/<channel>` is timed meanwhile (issue 42: 10,000).
    #[arg(long, default_value_t = 10_000)]
    pub churn_held: u64,
    /// churn: messages per second published to random churning users meanwhile (0 = none).
    #[arg(long, default_value_t = 500.0)]
    pub churn_publish_rate: f64,
    /// churn: seconds per soak interval (RSS and open fds reported for each).
    #[arg(long, default_value_t = 60.0)]
    pub sample_every: f64,
    /// churn: seconds of warm-up whose intervals the ±5 % soak judgement leaves out
    /// (default: the first interval), e.g. until history rings are full.
    #[arg(long)]
    pub soak_warmup: Option<f64>,
    /// An extra flag for every `myriad serve` the scenario starts, e.g.
    /// `--server-flag=--history=8` (repeatable; c1m gives them to its supervisor, which
    /// passes them to every child, e.g. `--server-flag=--router-shards=2`).
    #[arg(long = "server-flag", value_name = "FLAG", allow_hyphen_values = true)]
    pub server_flags: Vec<String>,
    /// Payload size in bytes (the SPEC's reference figures use 60).
    #[arg(long, default_value_t = 60)]
    pub size: usize,
    /// rooms, idle with --channels-per-conn: the rooms `r1..rN` the connections join.
    #[arg(long, default_value_t = DEFAULT_CHANNELS)]
    pub channels: u32,
    /// rooms: rooms each connection joins (default 5); idle: measure WebSocket
    /// connections in this many rooms each instead of the transports, one fresh server
    /// per value (e.g. 1,5,20).
    #[arg(long, value_delimiter = ',')]
    pub channels_per_conn: Vec<u32>,
    /// idle with --channels-per-conn: each K twice, without users and with a user per
    /// connection (`/ws/<id>?channel=…`), and what the users add per (user, channel)
    /// membership: presence's memory (issue 42: ≤ 16 B).
    #[arg(long)]
    pub channel_users: bool,
    /// keepalive: the server's keep-alive idle timeout, seconds.
    #[arg(long, default_value_t = 5.0)]
    pub keepalive_timeout: f64,
    /// c100k: server processes (default: one per 16,000 connections; each process may hold only 20,000 files here); c1m, sprites: gateway processes (default: `--processes auto`); churn: gateway processes of one supervised server (`serve --processes N`; default: one process, no supervisor).
    #[arg(long)]
    pub servers: Option<u32>,
    /// c100k, c1m, sprites: seconds to hold the connections once all are open.
    #[arg(long, default_value_t = 10.0)]
    pub hold: f64,
    /// Servers keep history durably instead of in memory, from empty storage: `sqlite`
    /// (the default: a fresh file next to each server's CSV), `postgres`
    /// (`--bench-postgres`) or `jetstream` (`--bench-nats`): what durability costs.
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true, default_missing_value = "sqlite")]
    pub durable_history: Option<history::DurableHistory>,
    /// With `--durable-history=postgres`: the store (its `history` table is dropped
    /// before each server starts).
    #[arg(
        long,
        default_value = "postgres://postgres@127.0.0.1:5432/test?schema=myriad_bench"
    )]
    pub bench_postgres: String,
    /// With `--durable-history=jetstream`: the NATS server (the history stream is
    /// deleted before each server starts).
    #[arg(long, default_value = cluster::DEFAULT_NATS)]
    pub bench_nats: String,
    /// Leave kernel settings alone (by default backlogs below 65,535 are raised when root).
    #[arg(long)]
    pub no_tune: bool,
    /// c1m: run in a network namespace of its own whose established-socket hash is
    /// sized for the run (`auto`: when root and this namespace's table has fewer
    /// buckets than half the sockets; the main table is fixed at boot).
    #[arg(long, value_enum, default_value_t = NetnsChoice::Auto)]
    pub netns: NetnsChoice,
    /// Serve over TLS (one ECDSA P-256 certificate generated for the run): flood,
    /// msggen, keepalive's and abuse's clients and the bench's API calls use https://
    /// and wss:// and trust it.
    #[arg(long)]
    pub tls: bool,
    /// With --tls: flood's subscribers speak HTTP/2 (ALPN h2), --streams-per-connection
    /// streams on each connection (not ws).
    #[arg(long, requires = "tls")]
    pub h2: bool,
    /// With --h2: streams multiplexed on one connection.
    #[arg(long, default_value_t = 1)]
    pub streams_per_connection: u32,
    /// abuse: after the three phases, one phase per hostile case alone.
    #[arg(long)]
    pub abuse_each: bool,
    /// abuse's child process: run the hostile cases against ADDR until stdin closes.
    #[arg(long, hide = true, value_name = "ADDR")]
    pub abusers_at: Option<std::net::SocketAddr>,
    /// With --abusers-at: the server speaks TLS with this certificate.
    #[arg(long, hide = true, value_name = "PEM")]
    pub abusers_ca: Option<PathBuf>,
    /// With --abusers-at: the cases to run (repeatable).
    #[arg(long = "abuse-case", hide = true, value_enum)]
    pub abuse_cases: Vec<abuse_cases::Case>,
}

impl Shape {
    /// The single shapes this choice stands for.
    pub fn each(self) -> Vec<Shape> {
        match self {
            Shape::Both => vec![Shape::OneUser, Shape::Followers],
            s => vec![s],
        }
    }

    /// As typed on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Shape::OneUser => "one-user",
            Shape::Followers => "followers",
            Shape::Both => "both",
        }
    }
}

/// `--netns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum NetnsChoice {
    Auto,
    Always,
    Never,
}

impl BenchArgs {
    pub(super) fn connections(&self) -> u64 {
        match (self.connections, self.scenario) {
            (Some(n), _) => n.max(1),
            (None, Scenario::C100k) => DEFAULT_C100K,
            (None, Scenario::C1m) => DEFAULT_C1M,
            (None, _) => DEFAULT_CONNECTIONS,
        }
    }

    /// `--rates`, or the scenario's ladder when not given.
    pub(super) fn rates(&self, default: &[f64]) -> Vec<f64> {
        if self.rates.is_empty() {
            default.to_vec()
        } else {
            self.rates.clone()
        }
    }

    /// The single transport of the non-idle scenarios.
    pub(super) fn transport(&self) -> anyhow::Result<load::flood::Transport> {
        use load::flood::Transport;
        Ok(match self.transport.unwrap_or(TransportChoice::Stream) {
            TransportChoice::Stream => Transport::Stream,
            TransportChoice::Sse => Transport::Sse,
            TransportChoice::Ws => Transport::Ws,
            TransportChoice::Poll => Transport::Poll,
            TransportChoice::All => anyhow::bail!("--transport all is for the idle scenario"),
        })
    }
}

/// `--publish-via` (c1m).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PublishVia {
    Http,
    Router,
    Nats,
}
