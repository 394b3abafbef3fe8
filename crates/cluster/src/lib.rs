//! `cluster`: the bus over NATS — gateways and the router in separate processes
//! and hosts acting as one myriad (SPEC C4, E2, E3; DESIGN "processes and machines").
//!
//! A gateway process runs its loops with a [`NatsBus`] instead of `hub::LocalBus`;
//! the router process runs [`RouterRole`]: the same `hub::Hub` answering the
//! gateways' bundles over NATS. Nothing is sent per recipient or per connection:
//! requests cross in one bundle per gateway wake-up, deliveries as one message per
//! gateway per publish carrying that gateway's recipients.
//!
//! Words, one per thing (for the glossary): a **bundle** is one NATS message carrying
//! many items ([`codec::ToRouter::Bundle`]: a gateway's calls of one wake-up;
//! [`codec::ToGateway::Bundle`]: the router's replies and deliveries for one gateway,
//! numbered); a **batch** is only a publish batch (`POST /pub`,
//! `bus::Request::PublishBatch`); a **delivery** is one message for a loop's
//! connections (`bus::Mail`) or, over NATS, for a gateway's
//! ([`codec::GatewayMail`]); a **call** is one connection's request to the router
//! ([`codec::WireCall`]), and a **part** one router shard's share of a call divided
//! among shards; a **fragment** is a piece of an encoded message over NATS's
//! max_payload ([`codec::Fragment`], [`fragment`]); a **seat** is a gateway's number
//! at the router, packed with its loop into a loop id ([`loop_id`]); a **lane** is
//! the numbering of one router shard's bundles to one gateway.
//!
//! Trust: nothing arriving on myriad's subjects is authenticated by myriad; the NATS
//! server is the boundary. Each process connects with the credentials and TLS of the
//! `--nats-*` flags (`nats_link::config`; secrets from files or the environment, never
//! argv, never shown), and `deploy/nats-authorization.conf` gives each role a NATS
//! user allowed only the [`subjects`] it uses (docs/security.md "NATS trust boundary").
//!
//! Layout, in three layers: two sides that never import each other, over what both
//! share. A module imports only from its own side and from the shared layer, so no
//! file of this crate imports one that imports it back.
//!
//! | layer | module | what |
//! |---|---|---|
//! | gateway side | [`nats_bus`] | the gateway's link ([`GatewayLink`], [`NatsBus`]) |
//! | gateway side | [`shard_calls`] | the gateway's calls divided among router shards ([`shards`]), and their replies gathered |
//! | router side | [`router_role`] | the router ([`RouterRole`]), drained on SIGTERM like a gateway (new publishes refused, what it took finished, NATS flushed) |
//! | router side | [`publish_port`] | `--publish-listen`, back-ends' HTTP publishes straight to the router |
//! | shared | [`codec`] | the versioned binary messages and their encoding (postcard): the bus's own types inside the wire's envelopes |
//! | shared | [`fragment`] | router → gateway messages over NATS's max_payload, in fragments |
//! | shared | [`backend_answer`] | the JSON a back-end's publish over NATS is answered with |
//! | shared | [`subjects`] | the NATS subjects |
//! | shared | [`loop_id`] | (gateway seat, loop) packed into the router's loop id, defined once |
//! | shared | [`timing`] | the clock and the timeouts and ticks both sides count on |
//! | shared | [`shards`] | which router shard owns a user or a subject |
//! | below | `nats_link` (crate) | one NATS connection on a small runtime thread ([`Link`]), `--nats` and the `--nats-*` credential and TLS flags resolved ([`NatsConfig`]); shared with the load tool |
//! | router side | [`jet_history`] | `--history-store jetstream`, durable history in a JetStream stream |
//! | above both | [`role`] | `--role` and `--nats`, the flags of `myriad serve` that pick the side |

pub mod backend_answer;
pub mod codec;
pub mod fragment;
pub mod jet_history;
pub mod loop_id;
pub mod nats_bus;
pub mod publish_port;
pub mod role;
pub mod router_role;
pub mod shard_calls;
pub mod shards;
pub mod subjects;
pub mod timing;

pub use nats_bus::{GatewayLink, NatsBus};
pub use nats_link::{Link, NatsAuthArgs, NatsConfig, DEFAULT_NATS};
pub use publish_port::{PortConfig, PublishPort};
pub use role::{ClusterArgs, Role};
pub use router_role::RouterRole;
pub use shards::Shards;
