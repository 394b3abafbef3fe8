//! A gateway's run of consecutive publishes, with durable history: one commit for
//! the whole run ([`hub::Hub::publish_each`]) instead of one store round trip per
//! publish — the router role handles one message at a time on its runtime thread,
//! so without this its groups would hold a single publish each.

use super::RouterRole;
use crate::codec::{GatewayId, GatewayItem, WireCall, WireReply, WireRequest};
use crate::convert::reply_to_wire;
use crate::nats_bus::unix_ns;
use bus::Reply;

/// A call this path takes: a single publish (a batch has one commit already).
pub(super) fn is_publish(call: &WireCall) -> bool {
    matches!(call.request, WireRequest::Publish { .. })
}

impl RouterRole {
    /// Publishes `run` (calls [`is_publish`] accepted) in order and queues, for
    /// `gateway`, every message's deliveries and then each call's reply. One
    /// router only: shards take runs of publishes in `forward`.
    pub(super) fn publish_run(&mut self, gateway: GatewayId, run: Vec<WireCall>) {
        let published_ns = unix_ns();
        let mut answers = Vec::with_capacity(run.len());
        let mut items = Vec::with_capacity(run.len());
        for call in run {
            if let WireRequest::Publish { subject, payload } = call.request {
                answers.push((call.loop_id, call.token, call.part));
                items.push((subject, payload));
            }
        }
        let mut batches = Vec::new();
        let hub = self.hub.clone();
        let (counts, stored) =
            hub.publish_each(items, &mut |loop_id, batch| batches.push((loop_id, batch)));
        self.queue_batches(batches, published_ns);
        let messages = 1;
        for ((loop_id, token, part), c) in answers.into_iter().zip(counts) {
            let mut reply = Reply::Published {
                messages,
                connections: c.connections.into(),
                users: c.users.into(),
            };
            if let Err(why) = &stored {
                reply = reply.not_stored(why);
            }
            let reply = WireReply {
                loop_id,
                token,
                part,
                reply: reply_to_wire(reply),
            };
            self.push_item(gateway, GatewayItem::Reply(reply), 32);
        }
    }
}
