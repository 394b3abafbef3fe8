//! The router role's counters as `/stats` shows them.

use crate::Hub;
use router::RouterStats;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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
        json["presence_lists"] = self.lists.json();
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

/// Time `GET /presence/<channel>` lists spend in the router role: waiting for the
/// router lock, and holding it to copy the members (µs, summed and the worst).
#[derive(Default)]
pub(crate) struct ListTimes {
    count: AtomicU64,
    wait_sum: AtomicU64,
    wait_max: AtomicU64,
    held_sum: AtomicU64,
    held_max: AtomicU64,
    /// Lists read from a channel's mirror, without the router lock, and their
    /// time (the mirror's own lock and the copy).
    mirror_count: AtomicU64,
    mirror_sum: AtomicU64,
    mirror_max: AtomicU64,
}

impl ListTimes {
    pub(crate) fn record(&self, wait: Duration, held: Duration) {
        let (wait, held) = (wait.as_micros() as u64, held.as_micros() as u64);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.wait_sum.fetch_add(wait, Ordering::Relaxed);
        self.wait_max.fetch_max(wait, Ordering::Relaxed);
        self.held_sum.fetch_add(held, Ordering::Relaxed);
        self.held_max.fetch_max(held, Ordering::Relaxed);
    }

    pub(crate) fn record_mirror(&self, took: Duration) {
        let took = took.as_micros() as u64;
        self.mirror_count.fetch_add(1, Ordering::Relaxed);
        self.mirror_sum.fetch_add(took, Ordering::Relaxed);
        self.mirror_max.fetch_max(took, Ordering::Relaxed);
    }

    fn json(&self) -> serde_json::Value {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        serde_json::json!({
            "count": get(&self.count),
            "lock_wait_us_sum": get(&self.wait_sum),
            "lock_wait_us_max": get(&self.wait_max),
            "held_us_sum": get(&self.held_sum),
            "held_us_max": get(&self.held_max),
            "mirror_count": get(&self.mirror_count),
            "mirror_us_sum": get(&self.mirror_sum),
            "mirror_us_max": get(&self.mirror_max),
        })
    }
}
