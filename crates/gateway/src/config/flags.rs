//! [`GatewayArgs`]: the gateway's flags of `myriad serve` (each with its `MYRIAD_*`
//! environment fallback) and what they become, a [`ServerConfig`] and the core's
//! [`Access`].

use super::*;

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
            max_connections: descriptor_bound(self.max_connections, nofile_soft()),
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

/// Descriptors a gateway process keeps for everything but client connections: its
/// listeners, epoll and eventfds, NATS, the store, logs and libraries (about 40 with
/// two loops, measured), the admin listener's clients (its HTTP library panics,
/// aborting the process, when it accepted a socket it cannot get a second
/// descriptor for), publishers, and the sockets answered 503 beyond the limit. The
/// supervisor plans its gateways with it too.
pub const FD_RESERVE: usize = 256;

/// `--max-connections` within what the process may open (`soft`, its
/// RLIMIT_NOFILE) less [`FD_RESERVE`]: a connect storm meets the 503 of a full
/// process before the process runs out of descriptors.
pub fn descriptor_bound(asked: usize, soft: u64) -> usize {
    let room = usize::try_from(soft)
        .unwrap_or(usize::MAX)
        .saturating_sub(FD_RESERVE)
        .max(1);
    if asked > room {
        tracing::info!(
            asked,
            room,
            soft,
            "--max-connections bound by the descriptors this process may open, less a reserve"
        );
    }
    asked.min(room)
}

/// This process's soft RLIMIT_NOFILE (`myriad serve` raises it to the hard one
/// first).
fn nofile_soft() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } {
        0 => lim.rlim_cur,
        _ => u64::MAX,
    }
}
