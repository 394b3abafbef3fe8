//! The router's drain (SIGTERM, `--drain` seconds at most), as a gateway drains:
//! it stops taking new publishes — the publish port answers 503 + `Retry-After`,
//! a back-end's `myriad.pub.<subject>` request and a gateway's publish call get
//! `unavailable`, which gateways answer 503 + `Retry-After` — finishes what it had
//! taken (the port's requests already read, publishes waiting for other shards'
//! counts or parts), flushes NATS and ends, so the process exits 0. Calls that are
//! not publishes (logins, reads, subscription changes) are still answered until
//! then: the gateways draining beside it still log their clients out.
//!
//! Not here: the signal itself (the binary turns SIGTERM into [`RouterRole::stop_handle`]).

use super::waiting::ReplyTo;
use super::RouterRole;
use crate::codec::{GatewayId, GatewayItem, WireCall, WireReply};
use bus::Reply;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a draining router looks whether it is done (nothing wakes it when
/// the port's last connection closes).
pub(super) const DRAIN_CHECK: Duration = Duration::from_millis(20);

/// What a publish taken after the drain began is answered.
pub(super) const DRAINING: &str = "the router is draining (SIGTERM); retry";

impl RouterRole {
    /// Notified once (SIGTERM): the router drains and [`RouterRole::run`] returns.
    pub fn stop_handle(&self) -> Arc<tokio::sync::Notify> {
        self.stop.clone()
    }

    /// At most this long between the stop and the end (`--drain`).
    pub fn with_drain(mut self, drain: Duration) -> RouterRole {
        self.drain = drain;
        self
    }

    pub(super) fn start_drain(&mut self, now: Instant) {
        tracing::info!(
            drain_ms = self.drain.as_millis() as u64,
            "draining: new publishes refused, finishing what was taken"
        );
        self.draining = Some(now + self.drain);
        if let Some(port) = &self.port_drain {
            port.start();
        }
    }

    pub(super) fn is_draining(&self) -> bool {
        self.draining.is_some()
    }

    /// Whether a draining router may end now: everything it took is answered, or
    /// the drain time is up.
    pub(super) fn drained(&self, now: Instant) -> bool {
        let Some(until) = self.draining else {
            return false;
        };
        let open = self.port_drain.as_ref().map_or(0, |p| p.open_connections());
        let done = open == 0 && self.waiting.is_empty() && self.in_order.is_empty();
        if !done && now >= until {
            tracing::warn!(
                port_connections = open,
                "drain time is up with work in flight; stopping anyway"
            );
        }
        done || now >= until
    }

    /// A draining router's answer to a gateway's publish calls: each is refused, the
    /// others kept in order.
    pub(super) fn refuse_publishes(
        &mut self,
        gateway: GatewayId,
        calls: Vec<WireCall>,
    ) -> Vec<WireCall> {
        let (refused, kept): (Vec<_>, Vec<_>) =
            calls.into_iter().partition(super::forward::is_any_publish);
        for call in refused {
            let reply = WireReply {
                loop_id: call.loop_id,
                token: call.token,
                part: call.part,
                reply: Reply::Unavailable(DRAINING.into()),
            };
            self.push_item(gateway, GatewayItem::Reply(reply), 32);
        }
        kept
    }

    /// A back-end's publish taken while draining: refused by the subject's shard.
    pub(super) fn refuse_backend(&mut self, subject: u64, to: ReplyTo) {
        if self.shards.count == 1 || self.shards.owns(subject) {
            self.answer(to, Reply::Unavailable(DRAINING.into()));
        }
    }
}
