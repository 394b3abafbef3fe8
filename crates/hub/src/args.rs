//! The router side's flags of `myriad serve`: where subscriptions are stored and
//! how much history each user keeps (with `MYRIAD_*` environment fallbacks).

use std::time::Duration;

#[derive(clap::Args, Clone, Debug)]
pub struct HubArgs {
    /// Subscription store: `sqlite:PATH` (embedded, default), `postgres://…`, or `memory`.
    #[arg(long, env = "MYRIAD_STORE", default_value = "sqlite:myriad.db")]
    pub store: String,
    /// Messages kept per user for SSE Last-Event-ID, long-poll `since` and resume.
    #[arg(long, env = "MYRIAD_HISTORY", default_value_t = 64)]
    pub history: usize,
    /// Seconds a user's history is kept after their last connection closed.
    #[arg(long, env = "MYRIAD_HISTORY_TTL", default_value_t = 60.0)]
    pub history_ttl: f64,
}

impl HubArgs {
    pub fn router_config(&self) -> router::RouterConfig {
        router::RouterConfig {
            history: self.history,
            history_ttl: Duration::from_secs_f64(self.history_ttl.max(0.0)),
            ..Default::default()
        }
    }
}
