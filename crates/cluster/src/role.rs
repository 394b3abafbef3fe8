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
    #[arg(long, env = "MYRIAD_NATS", default_value = crate::DEFAULT_NATS)]
    pub nats: String,
    /// Set by `serve --processes` on each gateway: its place (0, 1, …). A gateway
    /// restarted in the same place tells the router that its predecessor died, so
    /// the router forgets it at once instead of after 3 s of silence.
    #[arg(long, hide = true)]
    pub supervised_place: Option<u32>,
}
