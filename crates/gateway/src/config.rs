//! The gateway's settings: its flags of `myriad serve` (with `MYRIAD_*` environment
//! fallbacks; the binary also maps a config file onto those variables), the plain
//! [`ServerConfig`] the server starts with, and the core's [`connection::Config`] in ticks.
//! Limits are named here with their defaults and why.

use anyhow::Context as _;
use connection::clock::{MAX_TICKS, TICK_MS};
use connection::Access;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod policy_flags;
mod tls_setup;
pub use tls_setup::{Ktls, TlsMode, TlsSetup};

/// The core's policies, named by the flags `--ws-heartbeat` and `--slow-policy`.
pub use connection::{SlowPolicy, WsHeartbeat};

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Event loops (threads), each with its own SO_REUSEPORT listener (SPEC E1, A6).
    pub loops: usize,
    pub heartbeat: Duration,
    pub ws_heartbeat: WsHeartbeat,
    /// Heartbeats fall due on multiples of this (wall-clock aligned; divides 1 s).
    pub heartbeat_grid: Duration,
    pub head_timeout: Duration,
    pub keepalive_timeout: Duration,
    pub poll_timeout: Duration,
    /// Largest payload of `POST /pub/<id>`.
    pub max_message: usize,
    /// Largest body of the batch endpoints (`POST /pub`, `POST /subscriptions`).
    pub max_batch: usize,
    /// Client connections held by this process at most; beyond it: 503 + Retry-After.
    pub max_connections: usize,
    /// Connections per source address at most (0 = unlimited).
    pub max_per_ip: usize,
    pub max_queued: usize,
    /// Most named channels one connection holds.
    pub max_channels: usize,
    pub slow_policy: SlowPolicy,
    /// SSE `retry:` advice to clients.
    pub sse_retry: Duration,
    pub tcp_nodelay: bool,
    /// Tokens and API keys accepted (C5); the default lets every subscription in
    /// and answers the API on loopback only.
    pub access: Arc<Access>,
    /// How long a graceful drain (SIGTERM) spreads its goodbyes over.
    pub drain: Duration,
    /// TLS on the client listener (`--tls-cert`/`--tls-key` or `--tls self-signed`);
    /// `None`: plain HTTP.
    pub tls: Option<TlsSetup>,
    /// Leave the SO_REUSEPORT listening group while this process is full and rejoin
    /// below [`ServerConfig::rejoin_below`] (several gateway processes on one port).
    pub leave_when_full: bool,
    /// HTTP/2 streams per connection at most (SETTINGS_MAX_CONCURRENT_STREAMS; more
    /// get REFUSED_STREAM); 0: TLS offers HTTP/1.1 only.
    pub max_streams_per_connection: u32,
    /// Submit a fan-out's sends together through io_uring (plain TCP; TLS and
    /// HTTP/2 write as before); where the kernel has no io_uring, `writev` it is.
    pub io_uring: bool,
    /// How far this process's loops tick ahead of the machine's shared 10-ms marks
    /// (`--tick-groups`; zero unless supervised): see [`tick_offset`].
    pub tick_offset: Duration,
    /// The counts `max_per_ip` is checked against (`None`: nobody is counted).
    pub peers: Option<Arc<crate::peers::PeerTable>>,
}

impl ServerConfig {
    /// How the loops will send, for the start line: `io_uring`, or `writev` and why.
    pub fn send_path(&self) -> String {
        if !self.io_uring {
            return "writev".into();
        }
        if self.tls.is_some() {
            return "writev (TLS)".into();
        }
        match io_uring::IoUring::new(2) {
            Ok(_) => "io_uring".into(),
            Err(e) => format!("writev (io_uring refused: {e})"),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:8000".parse().expect("literal address"),
            loops: default_loops(),
            heartbeat: Duration::from_secs(20),
            ws_heartbeat: WsHeartbeat::Pong,
            heartbeat_grid: DEFAULT_HEARTBEAT_GRID,
            head_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(5),
            poll_timeout: Duration::from_secs(30),
            max_message: 64 * 1024,
            max_batch: 16 * 1024 * 1024,
            max_connections: 1_000_000,
            max_per_ip: DEFAULT_MAX_PER_IP,
            max_queued: 256 * 1024,
            max_channels: 64,
            slow_policy: SlowPolicy::Disconnect,
            sse_retry: Duration::from_secs(2),
            tcp_nodelay: true,
            access: Arc::default(),
            drain: Duration::from_secs(5),
            tls: None,
            leave_when_full: false,
            max_streams_per_connection: DEFAULT_MAX_STREAMS,
            io_uring: true,
            tick_offset: Duration::ZERO,
            peers: None,
        }
    }
}

/// Heartbeat grid by default (see `--heartbeat-grid`). Measured with `bench c1m` (1 M
/// connections, 53 gateways, 50,000 beats/s; docs/decisions/heartbeat-grid-and-tick-groups.md): 100 ms made each
/// instant's burst long enough to put unicast p99 at 40–43 ms, 50 ms halved that at
/// the same CPU, 10–20 ms cut it to 9–14 ms for a tenth more of the machine. Since
/// each client address beats on its own tick of the grid (part I), a 50-ms grid's
/// bursts are a tick's share of the beats: at 300 k, unicast p99 15.6–16.6 ms against
/// 21–24 ms with every address on one tick, for about a fifth more server CPU.
pub const DEFAULT_HEARTBEAT_GRID: Duration = Duration::from_millis(50);

/// Default connections per client address: one host cannot take a 1 M-connection
/// server's whole capacity, while a large NAT (10,000 users behind one address) still
/// fits.
/// Tick groups of a supervised server by default (`--tick-groups`). Measured with
/// `bench c1m` (1 M, 53 gateways, 50,000 beats/s; docs/decisions/heartbeat-grid-and-tick-groups.md): with every
/// gateway on the same marks 17–19 server threads waited for a CPU on average and a
/// 100/s unicast trickle had a p99 of 5.4–31 ms (median 9.0); with 5 groups 3–6
/// threads and 4.0–6.2 ms (median 5.2), for the same server CPU (2 and 10 groups:
/// 7.2 and 6.2 ms, one run each). Clients holding connections to every gateway wake
/// once per group instead of once.
pub const DEFAULT_TICK_GROUPS: u32 = 5;

/// How far the loops of the gateway in supervised `place` tick ahead of the shared
/// 10-ms marks: places taken in turn over `groups` groups, 10/`groups` ms apart. A
/// process that is not supervised keeps the marks.
pub fn tick_offset(groups: u32, place: Option<u32>) -> Duration {
    let groups = groups.max(1);
    let group = place.map_or(0, |p| p % groups);
    Duration::from_micros(TICK_MS * 1000 * u64::from(group) / u64::from(groups))
}

pub const DEFAULT_MAX_PER_IP: usize = 10_000;

/// HTTP/2 streams per connection by default: nginx allows 128, hyper 200, Go 250; a
/// page with 100 EventSources on one origin fits.
pub const DEFAULT_MAX_STREAMS: u32 = 100;

/// `--heartbeat-grid`: whole wheel ticks that divide the loops' one-second epoch
/// alignment (otherwise processes would not share the instants).
fn heartbeat_grid(secs: f64) -> anyhow::Result<Duration> {
    let ms = (secs * 1000.0).round();
    let ok = secs.is_finite()
        && (ms - secs * 1000.0).abs() < 1e-6
        && ms >= TICK_MS as f64
        && (ms as u64).is_multiple_of(TICK_MS)
        && crate::wheel::EPOCH_ALIGN_MS.is_multiple_of(ms as u64);
    anyhow::ensure!(
        ok,
        "--heartbeat-grid {secs}: must be a multiple of {} s that divides 1 s (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1)",
        TICK_MS as f64 / 1000.0
    );
    Ok(Duration::from_millis(ms as u64))
}

/// One loop per core.
pub fn default_loops() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How long a closing connection may take to read our last bytes.
const LINGER: Duration = Duration::from_secs(2);

impl ServerConfig {
    /// A gateway that left the listening group rejoins when its connections fall
    /// below this: 1/8 under the limit, so a gateway near the limit does not flap
    /// in and out of the group (each join or leave rehashes the whole port).
    pub fn rejoin_below(&self) -> usize {
        self.max_connections - (self.max_connections / 8).max(1).min(self.max_connections)
    }

    /// The connection core's view: durations in wheel ticks (at least one, at most
    /// `connection::clock::MAX_TICKS`). Called when a loop starts its clock: `unix_start_ms` is
    /// this second (the loop keeps it up to date, see `pump`).
    pub fn core(&self) -> connection::Config {
        let unix_start_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() * 1000);
        let ticks = |d: Duration| {
            ((d.as_millis() as u64).div_ceil(TICK_MS)).clamp(1, u64::from(MAX_TICKS)) as u32
        };
        connection::Config {
            heartbeat: ticks(self.heartbeat),
            ws_heartbeat: self.ws_heartbeat,
            heartbeat_grid: ticks(self.heartbeat_grid),
            head_timeout: ticks(self.head_timeout),
            keepalive_timeout: ticks(self.keepalive_timeout),
            poll_timeout: ticks(self.poll_timeout),
            linger: ticks(LINGER),
            max_message: self.max_message,
            max_batch: self.max_batch,
            max_queued: self.max_queued,
            max_channels: self.max_channels,
            slow_policy: self.slow_policy,
            sse_retry_ms: self.sse_retry.as_millis().min(u32::MAX as u128) as u32,
            limits: wire::Limits::default(),
            access: self.access.clone(),
            unix_start_ms,
        }
    }
}

/// The gateway's flags of `myriad serve`: the client listener, its loops, timeouts
/// and limits.
#[derive(clap::Args, Clone, Debug)]
pub struct GatewayArgs {
    /// Address to listen on for clients and the HTTP API.
    #[arg(long, env = "MYRIAD_LISTEN", default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,
    /// Event loops (threads); default: one per core.
    #[arg(long, env = "MYRIAD_LOOPS")]
    pub loops: Option<usize>,
    /// Seconds between heartbeats on idle subscriptions (chunk, SSE comment, WebSocket
    /// pong or ping: `--ws-heartbeat`).
    #[arg(long, env = "MYRIAD_HEARTBEAT", default_value_t = 20.0)]
    pub heartbeat: f64,
    /// The WebSocket heartbeat: an unsolicited pong the client does not answer, or a
    /// ping every client answers with a pong (which the server reads and drops).
    #[arg(long, env = "MYRIAD_WS_HEARTBEAT", value_parser = policy_flags::ws_heartbeat(), default_value = "pong")]
    pub ws_heartbeat: WsHeartbeat,
    /// Heartbeats fall due only once per this many seconds of wall-clock time, the
    /// same instants in every loop and process for one client address (each address
    /// on its own 10-ms tick of the grid), so a client holding connections to many
    /// processes wakes once per grid for all its beats, while the beats of different
    /// addresses spread over the grid instead of leaving in one burst. Coarser costs
    /// clients fewer wake-ups; finer makes each address's burst shorter. A multiple of
    /// 0.01 that divides 1.
    #[arg(long, env = "MYRIAD_HEARTBEAT_GRID", default_value_t = DEFAULT_HEARTBEAT_GRID.as_secs_f64())]
    pub heartbeat_grid: f64,
    /// Gateway processes of one supervised server (`--processes`) tick in this many
    /// groups, 10/K ms apart, instead of all on the same 10-ms marks: the machine's
    /// heartbeats then leave in K smaller bursts, so a message arriving meanwhile
    /// waits behind fewer woken threads. A client holding connections to several
    /// groups wakes once per group. 1 = every process on the same marks.
    #[arg(long, env = "MYRIAD_TICK_GROUPS", default_value_t = DEFAULT_TICK_GROUPS,
          value_parser = clap::value_parser!(u32).range(1..=10))]
    pub tick_groups: u32,
    /// Seconds a client has to send a whole request head (slowloris guard) → 408.
    #[arg(long, env = "MYRIAD_HEAD_TIMEOUT", default_value_t = 10.0)]
    pub head_timeout: f64,
    /// Seconds an idle keep-alive connection is kept after its last response.
    #[arg(long, env = "MYRIAD_KEEPALIVE_TIMEOUT", default_value_t = 5.0)]
    pub keepalive_timeout: f64,
    /// Seconds a long-poll request waits for a message before answering empty.
    #[arg(long, env = "MYRIAD_POLL_TIMEOUT", default_value_t = 30.0)]
    pub poll_timeout: f64,
    /// Largest message body of `POST /pub/<id>`, in bytes → 413 beyond.
    #[arg(long, env = "MYRIAD_MAX_MESSAGE", default_value_t = 64 * 1024)]
    pub max_message: usize,
    /// Largest body of batch requests (`POST /pub`, `POST /subscriptions`), in bytes.
    #[arg(long, env = "MYRIAD_MAX_BATCH", default_value_t = 16 * 1024 * 1024)]
    pub max_batch: usize,
    /// Connections this process holds at most; beyond it new ones get 503 + Retry-After.
    #[arg(long, env = "MYRIAD_MAX_CONNECTIONS", default_value_t = 1_000_000)]
    pub max_connections: usize,
    /// Connections per client address (an IPv4 address, an IPv6 /64) at most, for
    /// the whole server (0 = no limit); loopback peers are not counted.
    #[arg(long, env = "MYRIAD_MAX_PER_IP", default_value_t = DEFAULT_MAX_PER_IP)]
    pub max_per_ip: usize,
    /// Set by `serve --processes` on each gateway: the inherited descriptor of the
    /// per-address table every gateway shares (`peers`).
    #[arg(long, hide = true)]
    pub peer_table_fd: Option<i32>,
    /// Output bytes queued per connection before the slow-consumer policy applies.
    #[arg(long, env = "MYRIAD_MAX_QUEUED", default_value_t = 256 * 1024)]
    pub max_queued: usize,
    /// Named channels one connection may hold (`channel=` and WebSocket
    /// subscribes together); a request over it gets 400, a subscribe an error frame.
    #[arg(long, env = "MYRIAD_MAX_CHANNELS_PER_CONNECTION", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..=255))]
    pub max_channels_per_connection: u64,
    /// Slow-consumer policy: disconnect, or drop deliveries until the socket drains.
    #[arg(long, env = "MYRIAD_SLOW_POLICY", value_parser = policy_flags::slow_policy(), default_value = "disconnect")]
    pub slow_policy: SlowPolicy,
    /// Disable TCP_NODELAY (on by default: pushes are small and latency matters).
    #[arg(long, env = "MYRIAD_NO_NODELAY")]
    pub no_nodelay: bool,
    /// HS256 secret (≥ 32 bytes) subscription tokens are signed with; with neither
    /// this nor --jwt-key, subscriptions are open.
    #[arg(long, env = "MYRIAD_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<String>,
    /// Public key file for subscription tokens: PEM (RS256 / ES256) or a JWKS.
    #[arg(long, env = "MYRIAD_JWT_KEY", conflicts_with = "jwt_secret")]
    pub jwt_key: Option<PathBuf>,
    /// Audience a subscription token's `aud` must name (repeatable; the variable
    /// takes a comma-separated list); none: `aud` is not checked.
    #[arg(
        long = "jwt-audience",
        env = "MYRIAD_JWT_AUDIENCE",
        value_delimiter = ','
    )]
    pub jwt_audiences: Vec<String>,
    /// Issuer a subscription token's `iss` must be (repeatable; the variable takes a
    /// comma-separated list); none: `iss` is not checked.
    #[arg(long = "jwt-issuer", env = "MYRIAD_JWT_ISSUER", value_delimiter = ',')]
    pub jwt_issuers: Vec<String>,
    /// Longest `info` claim a subscription token may carry (compact JSON bytes):
    /// shown beside the user in presence lists; a longer one is refused (400).
    #[arg(long, env = "MYRIAD_MAX_PRESENCE_INFO", default_value_t = auth::DEFAULT_MAX_INFO)]
    pub max_presence_info: usize,
    /// API key for publish, subscriptions, subscribers and stats (repeatable; the
    /// variable takes a comma-separated list); none: the API answers loopback only.
    #[arg(
        long = "api-key",
        env = "MYRIAD_API_KEY",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub api_keys: Vec<String>,
    /// Browser origins (scheme://host[:port], comma-separated) let in to subscribe and
    /// to call the API; `*`: any page may subscribe, none may call the API.
    #[arg(
        long,
        env = "MYRIAD_ALLOWED_ORIGINS",
        value_delimiter = ',',
        default_value = "*"
    )]
    pub allowed_origins: Vec<String>,
    /// Host names served (comma-separated; `*.domain` for its sub-domains): a request
    /// naming another `Host` gets 421, one without `Host` 400. None: any host.
    #[arg(long, env = "MYRIAD_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,
    /// A Pusher Channels app, `ID:KEY:SECRET` (repeatable): Pusher clients connect to
    /// `/app/<KEY>` (docs/protocol.md "Pusher clients"). None: `/app/` refuses every key.
    #[arg(
        long = "pusher-app",
        env = "MYRIAD_PUSHER_APPS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub pusher_apps: Vec<String>,
    /// Seconds a SIGTERM drain spreads its reconnect notices over (stops accepting
    /// at once; exits 0 when every client is gone).
    #[arg(long, env = "MYRIAD_DRAIN", default_value_t = 5.0)]
    pub drain: f64,
    /// TLS certificate chain (PEM) for the client listener: https:// and wss://;
    /// re-read with the key on SIGHUP (open connections keep theirs).
    #[arg(
        long,
        env = "MYRIAD_TLS_CERT",
        requires = "tls_key",
        conflicts_with = "tls"
    )]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM: PKCS#8, PKCS#1 or SEC1) for --tls-cert.
    #[arg(long, env = "MYRIAD_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// `self-signed`: TLS with a certificate generated at start (written next to the
    /// log's `tls_ca=` path, for clients to trust).
    #[arg(long, env = "MYRIAD_TLS", value_enum)]
    pub tls: Option<TlsMode>,
    /// At --max-connections, close the listener so SO_REUSEPORT sends new clients to
    /// the other processes on the port; listen again 1/8 below it.
    #[arg(long, env = "MYRIAD_LEAVE_WHEN_FULL")]
    pub leave_when_full: bool,
    /// HTTP/2 streams per connection on the TLS listener (more get REFUSED_STREAM);
    /// 0: TLS offers HTTP/1.1 only.
    #[arg(long, env = "MYRIAD_MAX_STREAMS_PER_CONNECTION", default_value_t = DEFAULT_MAX_STREAMS)]
    pub max_streams_per_connection: u32,
    /// With TLS: after each TLS 1.3 handshake, hand the connection's transmit side to
    /// the kernel (kTLS) so it seals what is written; probed at start, and where the
    /// kernel cannot, a warning says why and TLS stays in user space.
    #[arg(long, env = "MYRIAD_KTLS")]
    pub ktls: bool,
    /// `true`: submit each slice of a fan-out's sends in one io_uring call (plain
    /// TCP; measured: a fifth to a quarter less server CPU per delivery); `false`:
    /// one writev per connection. Where the kernel refuses io_uring, a warning says
    /// so and writev is used.
    #[arg(long, env = "MYRIAD_IO_URING", default_value_t = true, action = clap::ArgAction::Set)]
    pub io_uring: bool,
}

impl GatewayArgs {
    pub fn server_config(&self) -> anyhow::Result<ServerConfig> {
        let secs = |name: &str, v: f64| -> anyhow::Result<Duration> {
            anyhow::ensure!(
                v.is_finite() && v > 0.0,
                "--{name} must be a positive number of seconds"
            );
            Ok(Duration::from_secs_f64(v))
        };
        Ok(ServerConfig {
            listen: self.listen,
            loops: self.loops.unwrap_or_else(default_loops).max(1),
            heartbeat: secs("heartbeat", self.heartbeat)?,
            ws_heartbeat: self.ws_heartbeat,
            heartbeat_grid: heartbeat_grid(self.heartbeat_grid)?,
            head_timeout: secs("head-timeout", self.head_timeout)?,
            keepalive_timeout: secs("keepalive-timeout", self.keepalive_timeout)?,
            poll_timeout: secs("poll-timeout", self.poll_timeout)?,
            max_message: self.max_message,
            max_batch: self.max_batch,
            max_connections: self.max_connections,
            max_per_ip: self.max_per_ip,
            max_queued: self.max_queued,
            max_channels: self.max_channels_per_connection as usize,
            slow_policy: self.slow_policy,
            tcp_nodelay: !self.no_nodelay,
            access: Arc::new(self.access()?),
            drain: secs("drain", self.drain)?,
            tls: self.tls_setup()?,
            leave_when_full: self.leave_when_full,
            max_streams_per_connection: self.max_streams_per_connection,
            io_uring: self.io_uring,
            // A supervised gateway is given the supervisor's table instead (`serve`).
            peers: match (self.max_per_ip, self.peer_table_fd) {
                (0, _) | (_, Some(_)) => None,
                _ => Some(Arc::new(crate::peers::PeerTable::private(
                    crate::peers::capacity_for(self.max_connections),
                )?)),
            },
            ..ServerConfig::default()
        })
    }

    fn tls_setup(&self) -> anyhow::Result<Option<TlsSetup>> {
        let h2 = self.max_streams_per_connection > 0;
        let setup = match (&self.tls, &self.tls_cert, &self.tls_key) {
            (Some(TlsMode::SelfSigned), _, _) => {
                let dir = std::env::temp_dir().join(format!("myriad-tls-{}", std::process::id()));
                Some(TlsSetup::self_signed(&dir, h2)?)
            }
            (None, Some(cert), Some(key)) => {
                Some(TlsSetup::from_files(cert.clone(), key.clone(), h2)?)
            }
            _ => None,
        };
        anyhow::ensure!(
            !self.ktls || setup.is_some(),
            "--ktls needs TLS (--tls-cert and --tls-key, or --tls self-signed)"
        );
        Ok(setup.map(|s| TlsSetup {
            ktls: Ktls::probe(self.ktls),
            ..s
        }))
    }
}

impl GatewayArgs {
    /// The accepted credentials from `--jwt-secret` / `--jwt-key` / `--api-key`.
    fn access(&self) -> anyhow::Result<Access> {
        let keys = match (&self.jwt_secret, &self.jwt_key) {
            (Some(secret), _) => {
                Some(auth::JwtKeys::hs256(secret.as_bytes()).context("--jwt-secret")?)
            }
            (None, Some(path)) => Some(
                auth::JwtKeys::from_file(path)
                    .with_context(|| format!("--jwt-key {}", path.display()))?,
            ),
            (None, None) => None,
        };
        anyhow::ensure!(
            keys.is_some() || (self.jwt_audiences.is_empty() && self.jwt_issuers.is_empty()),
            "--jwt-audience and --jwt-issuer need --jwt-secret or --jwt-key"
        );
        let verifier = keys.map(|keys| {
            auth::JwtVerifier::new(keys)
                .with_audiences(self.jwt_audiences.clone())
                .with_issuers(self.jwt_issuers.clone())
                .with_max_info(self.max_presence_info)
        });
        Ok(Access {
            jwt: verifier,
            api_keys: auth::ApiKeys::new(&self.api_keys).context("--api-key")?,
            origins: connection::Origins::parse(&self.allowed_origins)
                .map_err(anyhow::Error::msg)?,
            hosts: connection::Hosts::parse(&self.allowed_hosts).map_err(anyhow::Error::msg)?,
            publish_rates: Default::default(),
            pusher: auth::PusherApps::parse(&self.pusher_apps).context("--pusher-app")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supervised_places_take_the_tick_groups_in_turn() {
        let us = |groups, place| tick_offset(groups, place).as_micros();
        let five: Vec<_> = (0..7).map(|p| us(5, Some(p))).collect();
        assert_eq!(five, [0, 2000, 4000, 6000, 8000, 0, 2000]);
        assert_eq!(us(3, Some(2)), 6666);
        // One group, or a process nobody supervises, keeps the shared marks.
        assert_eq!(us(1, Some(4)), 0);
        assert_eq!(us(5, None), 0);
    }

    #[test]
    fn heartbeat_grids_are_whole_ticks_that_divide_a_second() {
        for (secs, ms) in [
            (0.01, 10),
            (0.02, 20),
            (0.05, 50),
            (0.1, 100),
            (0.25, 250),
            (1.0, 1000),
        ] {
            assert_eq!(
                heartbeat_grid(secs).unwrap(),
                Duration::from_millis(ms),
                "{secs}"
            );
        }
        for bad in [0.0, -0.1, 0.005, 0.015, 0.03, 0.3, 2.0, f64::NAN] {
            let e = heartbeat_grid(bad).expect_err("refused");
            assert!(e.to_string().contains("divides 1 s"), "{bad}: {e}");
        }
    }
}
