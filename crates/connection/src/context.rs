//! What one core call reads besides the connection: the loop's settings
//! ([`Config`], with its policies [`WsHeartbeat`] and [`SlowPolicy`]), the clock ([`Cx::now`], in wheel ticks), the loop's side table of
//! credentials, and where its output goes ([`Outbox`]).
//!
//! Not here: the connection's own state (`Connection`), any IO, or the flags these
//! settings come from (`crate::config` builds a [`Config`] from them).

use super::{Access, Credentials, Outbox};
use crate::clock::Tick;
use std::sync::Arc;

/// What a WebSocket heartbeat is (SPEC A5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WsHeartbeat {
    /// An unsolicited pong (RFC 6455 5.5.3), a one-way heartbeat: the client owes no
    /// answer. It keeps proxies and NAT mappings open and finds a dead peer through TCP
    /// exactly as a ping does, since the server does nothing with pongs. Measured: a
    /// WebSocket beat costs the machine about half what a ping costs
    /// (docs/decisions/websocket-heartbeat-pong.md), the client's pong and the server's read of it gone.
    Pong,
    /// A ping (RFC 6455 5.5.2): every client answers with a pong the server reads and drops.
    Ping,
}

/// What to do with a connection whose queued output exceeds `max_queued` (SPEC D4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlowPolicy {
    /// Close the connection: the client reconnects and resumes from history.
    Disconnect,
    /// Skip deliveries until the socket drains; the sequence gap shows the loss.
    Drop,
}

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
    /// Most named channels one connection holds (`--max-channels-per-connection`).
    pub max_channels: usize,
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
        (self.config.unix_start_ms + u64::from(self.now) * crate::clock::TICK_MS) / 1000
    }
}
