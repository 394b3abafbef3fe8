//! `cluster`: the bus over NATS — gateways and the router in separate processes
//! and hosts acting as one myriad (SPEC C4, E2, E3; DESIGN "processes and machines").
//!
//! A gateway process runs its loops with a [`NatsBus`] instead of `hub::LocalBus`;
//! the router process runs [`RouterRole`]: the same `hub::Hub` answering the
//! gateways' batches over NATS. Nothing is sent per recipient or per connection:
//! requests cross in batches per gateway wake-up, deliveries as one message per
//! gateway per publish carrying that gateway's recipients.
//!
//! Trust: nothing arriving on myriad's subjects is authenticated by myriad; the NATS
//! server is the boundary. Each process connects with the credentials and TLS of the
//! `--nats-*` flags (`nats_link::config`; secrets from files or the environment, never
//! argv, never shown), and `deploy/nats-authorization.conf` gives each role a NATS
//! user allowed only the [`subjects`] it uses (docs/security.md "NATS trust boundary").
//!
//! Layout:
//! - [`codec`]: the versioned binary messages and their encoding (postcard).
//! - [`convert`]: between the bus seam's types and the wire's.
//! - [`fragment`]: router → gateway messages over NATS's max_payload, in parts.
//! - [`subjects`]: the NATS subjects.
//! - [`nats_bus`]: the gateway side ([`GatewayLink`], [`NatsBus`]).
//! - [`shard_calls`]: the gateway's calls divided among router shards, and their
//!   replies gathered.
//! - [`router_role`]: the router side ([`RouterRole`]), drained on SIGTERM like a
//!   gateway (new publishes refused, what it took finished, NATS flushed).
//! - [`publish_port`]: `--publish-listen`, back-ends' HTTP publishes straight to the
//!   router.
//! - [`role`]: `--role` and `--nats`, the flags of `myriad serve` that pick the side.
//! - [`jet_history`]: `--history-store jetstream`, durable history in a JetStream stream.

pub mod codec;
pub mod convert;
pub mod fragment;
pub mod jet_history;
pub mod nats_bus;
pub mod publish_port;
pub mod role;
pub mod router_role;
pub mod shard_calls;
pub mod subjects;

pub use nats_bus::{GatewayLink, NatsBus};
pub use nats_link::{Link, NatsAuthArgs, NatsConfig, DEFAULT_NATS};
pub use publish_port::{PortConfig, PublishPort};
pub use role::{ClusterArgs, Role};
pub use router_role::RouterRole;

/// Router shards (`--router-shards`): shard `index` of `count` owns user `u` when
/// `u % count == index` (presence, sequence numbers, history) and subject `s` when
/// `s % count == index` (its follower list and its publishes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shards {
    pub index: u16,
    pub count: u16,
}

impl Default for Shards {
    fn default() -> Shards {
        Shards { index: 0, count: 1 }
    }
}

impl Shards {
    /// The shard owning user (or subject) `u`.
    pub fn owner(self, u: u64) -> u16 {
        (u % u64::from(self.count)) as u16
    }

    /// Whether this router owns `u`.
    pub fn owns(self, u: u64) -> bool {
        self.owner(u) == self.index
    }
}
