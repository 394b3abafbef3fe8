//! The gateway's settings: the plain [`ServerConfig`] the server starts with and the
//! core's [`connection::Config`] in ticks, made from its flags of `myriad serve`
//! ([`flags`], with `MYRIAD_*` environment fallbacks; the binary also maps a config
//! file onto those variables). Limits are named here with their defaults and why.

use anyhow::Context as _;
use connection::clock::{MAX_TICKS, TICK_MS};
use connection::Access;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod flags;
mod policy_flags;
mod tls_setup;
pub use flags::{descriptor_bound, GatewayArgs, FD_RESERVE};
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_leave_a_reserve_of_descriptors() {
        assert_eq!(descriptor_bound(1_000_000, 20_000), 20_000 - FD_RESERVE);
        assert_eq!(descriptor_bound(5_000, 20_000), 5_000);
        assert_eq!(descriptor_bound(1_000, 100), 1);
        assert_eq!(descriptor_bound(1_000, u64::MAX), 1_000);
    }

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
