//! The NATS subjects of a myriad cluster (one place, so ops can read them).
//!
//! | subject | who sends | what |
//! |---|---|---|
//! | `myriad.router` | gateways | [`crate::codec::ToRouter`]: batches of calls, heartbeats, presence |
//! | `myriad.gw.<id>` | the router | [`crate::codec::ToGateway`] for one gateway (`<id>`: 16 hex digits); over max_payload in [`crate::codec::Fragment`]s |
//! | `myriad.gateways` | the router | [`crate::codec::ToGateway::Resync`] to every gateway (router start) |
//! | `myriad.router.stats` | anyone (request) | the router's counters as JSON, with `gateways` (known gateways) |
//! | `myriad.pub.<subject>` | back-ends | a publish: payload = the message; a request gets `{"connections":n,"users":u}` (from the subject's router shard, every shard's counts summed) |
//! | `myriad.pub.<channel>` | back-ends | a publish to a named channel (its dots are NATS tokens: `myriad.pub.>`); answered by the channel's shard |
//! | `myriad.presence.<channel>` | the router (the channel's shard) | a membership event of the channel as JSON (docs/protocol.md "Presence events"); `myriad.presence` for a name that is no NATS subject (an empty token: `a..b`, a leading or trailing dot) |
//! | `myriad.router.<i>` | gateways | the same, to router shard `i` of several (`--router-shards`) |
//! | `myriad.router.<i>.forward` | router shards | [`crate::codec::ToShard`]: a publish's followers shard `i` owns, and its counts back; friends online messages for its users; over max_payload in [`crate::codec::Fragment`]s |
//! | `myriad.history.<user>` | the router (`--history-store jetstream`) | a user's kept messages in the stream `MYRIAD_HISTORY` ([`crate::jet_history`]), through the `$JS.API` requests |
//! | `myriad.inbox.<id>` | NATS (replies) | answers to myriad's own requests (JetStream, a router shard's publishes): [`nats_link::config::MYRIAD_INBOX`], apart from back-ends' `_INBOX.>` |
//!
//! Which NATS user may publish or subscribe to which: `deploy/nats-authorization.conf`.

use crate::codec::GatewayId;

pub const ROUTER: &str = "myriad.router";
pub const GATEWAYS: &str = "myriad.gateways";
pub const STATS: &str = "myriad.router.stats";
/// A back-end's publish subject (`myriad.pub.<subject>`) is defined with the NATS
/// connection, which `msggen --nats` uses without this crate.
pub use nats_link::{publish_subject as publish, PUBLISH_PREFIX};
/// What the router subscribes to for back-end publishes.
pub const PUBLISH_ALL: &str = "myriad.pub.>";

/// The subject router shard `shard` of `count` listens on (`myriad.router` when
/// there is one router).
pub fn router(shard: u16, count: u16) -> String {
    if count <= 1 {
        ROUTER.to_string()
    } else {
        format!("{ROUTER}.{shard}")
    }
}

/// Where router shard `shard` takes forwarded followers and their counts.
pub fn forward(shard: u16) -> String {
    format!("{ROUTER}.{shard}.forward")
}

/// Whether `subject` is a shard's [`forward`] subject.
pub fn is_forward(subject: &str) -> bool {
    subject.starts_with(ROUTER) && subject.ends_with(".forward")
}

/// What membership events' subjects start with.
pub const PRESENCE: &str = "myriad.presence";

/// Where channel `name`'s membership events go: `myriad.presence.<name>`, or
/// `myriad.presence` when its dots would make an empty token.
pub fn presence(name: &str) -> String {
    match name.split('.').any(str::is_empty) {
        true => PRESENCE.to_string(),
        false => format!("{PRESENCE}.{name}"),
    }
}

/// What every gateway's own subject starts with.
pub const GATEWAY_PREFIX: &str = "myriad.gw.";

/// The subject of one gateway.
pub fn gateway(id: GatewayId) -> String {
    format!("{GATEWAY_PREFIX}{id:016x}")
}
