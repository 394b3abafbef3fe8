//! The router role's counters as `/stats` shows them.

use crate::Hub;
use router::RouterStats;

impl Hub {
    /// `/stats`'s router part: [`stats_json`] and the webhooks' counters: the
    /// `--webhook`'s as `webhook`, each `--pusher-webhook`'s under
    /// `pusher_webhooks.<app id>`.
    pub fn stats_json(&self) -> serde_json::Value {
        let mut json = stats_json(&self.stats());
        if let Some(hook) = &self.webhook {
            json["webhook"] = hook.stats_json();
        }
        for (id, hook) in &self.pusher_webhooks {
            json["pusher_webhooks"][id] = hook.stats_json();
        }
        json
    }
}

/// The router's counters as `/stats` shows them. Named so they cannot be confused:
/// `subscription_edges` are durable follow edges (A follows B);
/// `connections_logged_in` are open client connections the router delivers to.
pub fn stats_json(r: &RouterStats) -> serde_json::Value {
    serde_json::json!({
        "users_online": r.users_online,
        "connections_logged_in": r.connections,
        "users_with_history": r.users_with_history,
        "subscription_edges": r.subscriptions,
        "messages_in": r.messages_in,
        "deliveries_planned": r.deliveries,
        "channels": r.channels,
        "channel_subscriptions": r.channel_subscriptions,
    })
}
