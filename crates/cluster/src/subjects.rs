//! The NATS subjects of a myriad cluster (one place, so ops can read them).
//!
//! | subject | who sends | what |
//! |---|---|---|
//! | `myriad.router` | gateways | [`crate::codec::ToRouter`]: batches of calls, heartbeats, presence |
//! | `myriad.gw.<id>` | the router | [`crate::codec::ToGateway`] for one gateway (`<id>`: 16 hex digits) |
//! | `myriad.gateways` | the router | [`crate::codec::ToGateway::Resync`] to every gateway (router start) |
//! | `myriad.pub.<subject>` | back-ends | a publish: payload = the message; a request gets `{"connections":n,"users":u}` |

use crate::codec::GatewayId;

pub const ROUTER: &str = "myriad.router";
pub const GATEWAYS: &str = "myriad.gateways";
pub const PUBLISH_PREFIX: &str = "myriad.pub.";
/// What the router subscribes to for back-end publishes.
pub const PUBLISH_ALL: &str = "myriad.pub.*";

/// The subject of one gateway.
pub fn gateway(id: GatewayId) -> String {
    format!("myriad.gw.{id:016x}")
}

/// The subject a back-end publishes to for `subject` (SPEC C4).
pub fn publish(subject: u64) -> String {
    format!("{PUBLISH_PREFIX}{subject}")
}
