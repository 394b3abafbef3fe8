//! The flags of `myriad serve` that choose which side of the bus a process runs
//! (with `MYRIAD_*` environment fallbacks like every `serve` flag).

/// What one `myriad serve` process runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Gateway loops and the router in one process, linked in process (no NATS).
    All,
    /// The router only: presence, the follower index, history; reached over NATS.
    Router,
    /// Gateway loops only, reaching the router over NATS.
    Gateway,
}

/// The flag's own word (`all`, `router`, `gateway`), for the start line.
impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::All => "all",
            Role::Router => "router",
            Role::Gateway => "gateway",
        })
    }
}

#[derive(clap::Args, Clone, Debug)]
pub struct ClusterArgs {
    /// `all` (one process, in-process bus), `router` or `gateway` (linked over NATS).
    #[arg(long, env = "MYRIAD_ROLE", value_enum, default_value = "all")]
    pub role: Role,
    /// NATS server linking gateways and the router (roles `router` and `gateway`).
    /// A user and password (`nats://user:pass@host`) or a token (`nats://token@host`)
    /// written in it work but are in argv: prefer the `--nats-*` flags. It is shown
    /// as `nats://user:***@host` (and `--help` hides the variable's value).
    #[arg(
        long,
        env = "MYRIAD_NATS",
        hide_env_values = true,
        default_value = nats_link::DEFAULT_NATS
    )]
    pub nats: String,
    /// Boxed: eight paths most servers leave unset (clippy's large_enum_variant on
    /// the command enum holding `serve`'s flags).
    #[command(flatten)]
    pub nats_auth: Box<nats_link::NatsAuthArgs>,
    /// Set by `serve --processes` on each gateway: its place (0, 1, …). A gateway
    /// restarted in the same place tells the router that its predecessor died, so
    /// the router forgets it at once instead of after 3 s of silence.
    #[arg(long, hide = true)]
    pub supervised_place: Option<u32>,
    /// Router processes sharing the users and the follower index (roles `router` and
    /// `gateway`): user `u`'s presence, sequence numbers and history live on shard
    /// `u % K`, subject `s`'s followers and publishes on shard `s % K`.
    #[arg(long, env = "MYRIAD_ROUTER_SHARDS", default_value_t = 1)]
    pub router_shards: u16,
    /// With `--role router --router-shards K`: which shard this router is (0..K).
    #[arg(long, env = "MYRIAD_ROUTER_SHARD", default_value_t = 0)]
    pub router_shard: u16,
    /// The router's publish port (roles `router`, and `serve --processes`, which
    /// gives it to every router shard): back-ends `POST /pub/<subject>` and `POST /pub`
    /// here, straight to the router, one hop shorter than through a gateway. Plain
    /// HTTP for back-ends: `--api-key` as on the gateways (none: loopback peers only).
    #[arg(long, env = "MYRIAD_PUBLISH_LISTEN")]
    pub publish_listen: Option<std::net::SocketAddr>,
    /// What the router keeps of each gateway's recent batches (at most 10 s of
    /// them), to send again to a gateway whose NATS connection dropped while the
    /// router's did not (role `router`). A gateway that lost more tells its
    /// connections to resume from history.
    #[arg(long, env = "MYRIAD_REPLAY_BYTES", default_value_t = crate::router_role::DEFAULT_RING_BYTES)]
    pub replay_bytes: usize,
}

impl ClusterArgs {
    /// `--nats` and its credential and TLS flags, resolved (secret files read).
    pub fn nats_config(&self) -> anyhow::Result<nats_link::NatsConfig> {
        Ok(nats_link::NatsConfig::from_flags(
            &self.nats,
            &self.nats_auth,
        )?)
    }

    /// The shard settings, checked.
    pub fn shards(&self) -> anyhow::Result<crate::shards::Shards> {
        anyhow::ensure!(
            self.router_shards >= 1,
            "--router-shards must be at least 1"
        );
        anyhow::ensure!(
            self.router_shard < self.router_shards,
            "--router-shard {} is not below --router-shards {}",
            self.router_shard,
            self.router_shards
        );
        Ok(crate::shards::Shards {
            index: self.router_shard,
            count: self.router_shards,
        })
    }
}
