//! What one core call reads besides the connection: the loop's settings
//! ([`Config`]), the clock ([`Cx::now`], in wheel ticks), the loop's side table of
//! credentials, and where its output goes ([`Outbox`]).
//!
//! Not here: the connection's own state (`Connection`) or any IO.

use super::{Access, Credentials, Outbox};
use crate::config::{SlowPolicy, WsHeartbeat};
use std::sync::Arc;

/// Time in timing-wheel ticks since the event loop started (see `wheel::TICK_MS`).
pub type Tick = u32;

/// Settings every connection of a loop reads, with durations in ticks (≥ 1).
#[derive(Clone, Debug)]
pub struct Config {
    pub heartbeat: Tick,
    pub ws_heartbeat: WsHeartbeat,
    /// Heartbeats fall due on multiples of this many ticks (`--heartbeat-grid`).
    pub heartbeat_grid: Tick,
    pub head_timeout: Tick,
    pub keepalive_timeout: Tick,
    pub poll_timeout: Tick,
    /// How long a closing connection may take to read our last bytes.
    pub linger: Tick,
    pub max_message: usize,
    pub max_batch: usize,
    pub max_queued: usize,
    pub slow_policy: SlowPolicy,
    /// SSE `retry:` advice to clients, in milliseconds.
    pub sse_retry_ms: u32,
    pub limits: wire::Limits,
    /// Tokens and keys accepted (C5).
    pub access: Arc<Access>,
    /// Unix time (milliseconds) at tick 0 (of the current wrap of the tick counter,
    /// kept by the loop), so token `exp`/`nbf` are checked against the
    /// wall clock while the core still only reads ticks.
    pub unix_start_ms: u64,
}

/// What one core call reads besides the connection, and where its output goes.
pub struct Cx<'a> {
    /// The current time, in ticks.
    pub now: Tick,
    pub config: &'a Config,
    /// Output bytes of this connection the socket has not taken yet.
    pub queued: usize,
    pub out: &'a mut Outbox,
    /// The loop's side table of token expiries and failed authentications.
    pub credentials: &'a mut Credentials,
    /// This connection's key in `credentials` (the loop's connection token).
    pub key: u32,
}

impl Cx<'_> {
    /// The Unix time (whole seconds) at the current tick.
    pub(super) fn unix_now(&self) -> u64 {
        (self.config.unix_start_ms + u64::from(self.now) * crate::wheel::TICK_MS) / 1000
    }
}
