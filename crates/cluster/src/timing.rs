//! The clock and the timeouts that both sides of a cluster count on: the router's
//! tick and how long it waits for other shards (which a gateway and the publish
//! port wait a little longer than), how often a gateway beats and when the router
//! forgets a silent one. Kept here so that neither side takes them from the other.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Now in ns since the Unix epoch (what crosses processes for latency).
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// How long the subject's shard waits for the other shards' counts of one call.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(2);

/// How often the router forgets silent gateways and answers publishes that waited
/// [`FORWARD_TIMEOUT`] for other shards' counts.
pub const TICK: Duration = Duration::from_secs(1);

/// Between a gateway's heartbeats; the router forgets a gateway silent for
/// [`GATEWAY_TIMEOUT`].
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// A gateway silent this long (three missed heartbeats) while the others were heard
/// is forgotten.
pub const GATEWAY_TIMEOUT: Duration = Duration::from_secs(3);
/// Between two of the router's silence checks (one per [`TICK`]) at most this long,
/// or the router's loop was stalled (a durable history write waiting out a JetStream
/// leader's death, a starved CPU): every gateway's heartbeats of the stall wait in its
/// inbox, read one at a time, so the first one read would make the others look
/// [`GATEWAY_TIMEOUT`] behind. After a stall silence counts from the check.
pub const STALL: Duration = Duration::from_secs(2);
/// A gateway silent this long is forgotten even when no other gateway was heard
/// either (the last gateway died; or the router itself was behind for that long).
pub const GATEWAY_TIMEOUT_ALONE: Duration = Duration::from_secs(30);
