//! The router side's flags of `myriad serve`: where subscriptions are stored, how
//! much history each user keeps, how many channels a user may hold and how many
//! users a presence list names (with
//! `MYRIAD_*` environment fallbacks).

use std::time::Duration;

#[derive(clap::Args, Clone, Debug)]
pub struct HubArgs {
    /// Subscription store: `sqlite:PATH` (embedded, default), `postgres://…`, or `memory`.
    #[arg(long, env = "MYRIAD_STORE", default_value = "sqlite:myriad.db")]
    pub store: String,
    /// What a SQLite commit survives: `normal` (a process kill) or `full` (also power
    /// loss: an fsync per commit).
    #[arg(long, env = "MYRIAD_STORE_SYNC", default_value = "normal")]
    pub store_sync: store::SyncMode,
    /// Messages kept per user for SSE Last-Event-ID, long-poll `since` and resume.
    #[arg(long, env = "MYRIAD_HISTORY", default_value_t = 64)]
    pub history: usize,
    /// Seconds a user's history is kept after their last connection closed.
    #[arg(long, env = "MYRIAD_HISTORY_TTL", default_value_t = 60.0)]
    pub history_ttl: f64,
    /// Where history lives: `memory` (lost with the process: clients are told of the
    /// gap by a new epoch), `store` (also written to the `--store`, SQLite or
    /// PostgreSQL, before a publish is answered; a restart keeps it and its epochs)
    /// or `jetstream` (also written to a JetStream stream on the `--nats` server).
    #[arg(long, env = "MYRIAD_HISTORY_STORE", default_value = "memory")]
    pub history_store: HistoryStore,
    /// With `--history-store jetstream`: copies of the stream JetStream keeps on a
    /// NATS cluster (1, 3 or 5; 3 survives the loss of one node). A stream made with
    /// another number is changed to this one.
    #[arg(long, env = "MYRIAD_HISTORY_REPLICAS", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..=5))]
    pub history_replicas: u8,
    /// Channel subscriptions one user's connections may hold together (per router
    /// shard, at most 65,535); a join past it is refused on that channel, the
    /// connection stays.
    #[arg(long, env = "MYRIAD_MAX_SUBSCRIPTIONS_PER_USER",
          default_value_t = router::DEFAULT_MAX_SUBSCRIPTIONS_PER_USER,
          value_parser = clap::value_parser!(u32).range(1..=router::MAX_SUBSCRIPTIONS_PER_USER as i64))]
    pub max_subscriptions_per_user: u32,
    /// Seconds a user whose last connection left a channel is still announced as
    /// a member: back within it, no leave and join are announced.
    #[arg(long, env = "MYRIAD_PRESENCE_GRACE", default_value_t = 5.0)]
    pub presence_grace: f64,
    /// Channels whose names start with this announce no membership events
    /// (repeatable; `--presence-off-prefix ''` turns them off everywhere).
    #[arg(long, env = "MYRIAD_PRESENCE_OFF_PREFIX", value_delimiter = ' ')]
    pub presence_off_prefix: Vec<String>,
    /// POST membership events in batches to this `http://` URL (signed with
    /// `--webhook-secret`).
    #[arg(long, env = "MYRIAD_WEBHOOK")]
    pub webhook: Option<String>,
    /// The shared secret of the webhook's `X-Myriad-Signature` (HMAC-SHA256);
    /// needed with `--webhook`.
    #[arg(long, env = "MYRIAD_WEBHOOK_SECRET", hide_env_values = true)]
    pub webhook_secret: Option<String>,
    /// Kept for compatibility: send `--webhook` in Pusher's format for the first
    /// `--pusher-app` (`X-Pusher-Key` = this key; `--webhook-secret` is then the
    /// app's secret). `--pusher-webhook ID=URL` does the same for any app with its own key.
    #[arg(long, env = "MYRIAD_WEBHOOK_PUSHER_KEY")]
    pub webhook_pusher_key: Option<String>,
    /// A Pusher app's webhook, `ID=URL` (repeatable or comma-separated; `http://`;
    /// ID a `--pusher-app`'s, which the router needs too): that app's membership and
    /// client events in Pusher's format, its channels by the names its clients use,
    /// signed with its key and secret.
    #[arg(
        long = "pusher-webhook",
        env = "MYRIAD_PUSHER_WEBHOOKS",
        value_delimiter = ','
    )]
    pub pusher_webhooks: Vec<String>,
    /// Users one `GET /presence/<channel>` answer names at most (the lowest ids;
    /// the answer then says `"cut":true`); the counts stay exact.
    #[arg(long, env = "MYRIAD_MAX_PRESENCE_MEMBERS",
          default_value_t = router::DEFAULT_MAX_PRESENCE_MEMBERS)]
    pub max_presence_members: usize,
    /// Opted-in followers (`friends=1`) one user's online/offline reaches at
    /// most; the rest are counted as dropped. 0 turns friends events off.
    #[arg(long, env = "MYRIAD_FRIENDS_MAX_FANOUT",
          default_value_t = router::DEFAULT_FRIENDS_MAX_FANOUT)]
    pub friends_max_fanout: usize,
}

/// `--history-store`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HistoryStore {
    Memory,
    Store,
    Jetstream,
}

impl HistoryStore {
    /// For the start line.
    pub fn describe(self) -> &'static str {
        match self {
            HistoryStore::Memory => "memory",
            HistoryStore::Store => "store (durable)",
            HistoryStore::Jetstream => "jetstream (durable)",
        }
    }
}

impl HubArgs {
    pub fn router_config(&self) -> router::RouterConfig {
        router::RouterConfig {
            history: self.history,
            history_ttl: Duration::from_secs_f64(self.history_ttl.max(0.0)),
            journal: self.history_store != HistoryStore::Memory,
            max_subscriptions_per_user: self.max_subscriptions_per_user,
            presence: router::PresenceConfig {
                enabled: true,
                grace: Duration::from_secs_f64(self.presence_grace.max(0.0)),
                off_prefixes: self.presence_off_prefix.clone(),
            },
            max_presence_members: self.max_presence_members,
            friends: router::FriendsConfig {
                max_fanout: self.friends_max_fanout,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    pub fn store_options(&self) -> store::StoreOptions {
        store::StoreOptions {
            sync: self.store_sync,
        }
    }
}
