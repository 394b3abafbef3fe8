//! The router's counters: its `/stats` document (the `myriad.router.stats` request,
//! gateways' heartbeat answers, the router's own admin listener): what it sent
//! the gateways, and what went wrong between shards and on the way.

use super::RouterRole;
use hub::Hub;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Since this router started: the batches it sent the gateways, publishes another
/// shard failed (`--router-shards`), and batches gateways lost on the way
/// (`super::replay`).
#[derive(Default)]
pub(super) struct Counters {
    /// [`ToGateway::Bundle`](crate::codec::ToGateway::Bundle)es sent (one NATS
    /// message each, but for a huge one's parts): against the deliveries the
    /// gateways received, how many recipients one message carries.
    pub(super) batches_to_gateways: AtomicU64,
    /// Answered with an error: a shard did not count its followers in time.
    pub(super) forwards_uncounted: AtomicU64,
    /// Ordered batches delivered without some sender's part.
    pub(super) ordered_incomplete: AtomicU64,
    /// Gateways' requests to send batches again, the batches sent again, and the
    /// requests that reached past what was kept (the gateway told its connections
    /// to resume).
    pub(super) replays: AtomicU64,
    pub(super) batches_replayed: AtomicU64,
    pub(super) replays_missed: AtomicU64,
}

impl RouterRole {
    /// The router's `/stats` document for its own admin listener (`serve --role router
    /// --admin`): the same counters as the `myriad.router.stats` request.
    pub fn stats_fn(&self) -> Arc<dyn Fn() -> serde_json::Value + Send + Sync> {
        let (hub, known) = (self.hub.clone(), self.known_count.clone());
        let (shard, counters) = (self.shards.index, self.counters.clone());
        Arc::new(move || stats_doc(&hub, known.load(Ordering::Relaxed), shard, &counters))
    }

    /// The router's counters and the gateways it knows.
    pub(super) fn stats(&self) -> serde_json::Value {
        stats_doc(
            &self.hub,
            self.gateways.by_id.len(),
            self.shards.index,
            &self.counters,
        )
    }
}

/// The hub's counters, this process's pid, the gateways known, what was sent them
/// and what went wrong.
fn stats_doc(hub: &Hub, gateways: usize, shard: u16, counters: &Counters) -> serde_json::Value {
    let mut doc = hub.stats_json();
    if let Some(doc) = doc.as_object_mut() {
        let uncounted = counters.forwards_uncounted.load(Ordering::Relaxed);
        let incomplete = counters.ordered_incomplete.load(Ordering::Relaxed);
        doc.insert("shard_forwards_uncounted".into(), uncounted.into());
        doc.insert("ordered_batches_incomplete".into(), incomplete.into());
        for (key, n) in [
            ("batches_to_gateways", &counters.batches_to_gateways),
            ("replays", &counters.replays),
            ("batches_replayed", &counters.batches_replayed),
            ("replays_missed", &counters.replays_missed),
        ] {
            doc.insert(key.into(), n.load(Ordering::Relaxed).into());
        }
        doc.insert("router_pid".into(), std::process::id().into());
        doc.insert("router_shard".into(), shard.into());
        doc.insert("gateways".into(), gateways.into());
        doc.insert("index_bytes".into(), hub.index_bytes().into());
    }
    doc
}
