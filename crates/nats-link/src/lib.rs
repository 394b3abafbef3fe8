//! `nats-link`: how a myriad process reaches NATS, and nothing of what it says there.
//!
//! Layout:
//! - [`config`]: `--nats` and the `--nats-*` credential and TLS flags ([`NatsAuthArgs`]),
//!   resolved into a [`NatsConfig`] (secrets from files or the environment, the URL
//!   shown redacted).
//! - [`link`]: one NATS connection on a small runtime thread ([`Link`]).
//! - [`publish_subject`]: the subject a back-end publishes on, `myriad.pub.<subject>`.
//!
//! Not here: the bus over NATS, its codec and the rest of myriad's subjects (`cluster`).
//!
//! Why its own crate: the load tool (`msggen --nats`) publishes as a back-end would,
//! with the same flags as `serve`; through this crate it links the NATS client and
//! tokio, not `cluster` with the router, the store and the database drivers behind it.

pub mod config;
pub mod link;

pub use config::{NatsAuthArgs, NatsConfig};
pub use link::{Link, DEFAULT_NATS};

/// What the subject of a back-end's publish starts with (SPEC C4).
pub const PUBLISH_PREFIX: &str = "myriad.pub.";

/// The subject a back-end publishes to for `subject` (SPEC C4); a request there gets
/// the JSON of `POST /pub/<subject>`.
pub fn publish_subject(subject: u64) -> String {
    format!("{PUBLISH_PREFIX}{subject}")
}
