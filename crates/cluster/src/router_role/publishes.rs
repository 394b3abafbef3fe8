//! A gateway's run of consecutive publishes, with durable history: one commit for
//! the whole run ([`hub::Hub::publish_each`]) instead of one store round trip per
//! publish — the router role handles one message at a time on its runtime thread,
//! so without this its groups would hold a single publish each.

use super::RouterRole;
use crate::codec::{CallRequest, GatewayId, GatewayItem, WireCall, WireReply};
use crate::timing::unix_ns;
use bus::{Reply, Request};
use bytes::Bytes;

/// A call this path takes: a single publish (a batch has one commit already).
pub(super) fn is_publish(call: &WireCall) -> bool {
    matches!(call.request, CallRequest::Bus(Request::Publish { .. }))
}

impl RouterRole {
    /// Publishes `run` (calls [`is_publish`] accepted) in order and queues, for
    /// `gateway`, every message's deliveries and then each call's reply. One
    /// router only: shards take runs of publishes in `forward`.
    pub(super) fn publish_run(&mut self, gateway: GatewayId, run: Vec<WireCall>) {
        let mut answers = Vec::with_capacity(run.len());
        let mut items = Vec::with_capacity(run.len());
        for call in run {
            if let CallRequest::Bus(Request::Publish { subject, payload }) = call.request {
                answers.push((call.loop_id, call.token, call.part));
                items.push((subject, payload));
            }
        }
        let replies = self.publish_committed(items);
        for ((loop_id, token, part), reply) in answers.into_iter().zip(replies) {
            let reply = WireReply {
                loop_id,
                token,
                part,
                reply,
            };
            self.push_item(gateway, GatewayItem::Reply(reply), 32);
        }
    }

    /// Publishes `items` in order with one durable commit, queues their deliveries
    /// for the gateways and returns each item's reply.
    pub(super) fn publish_committed(&mut self, items: Vec<(u64, Bytes)>) -> Vec<Reply> {
        let published_ns = unix_ns();
        let mut batches = Vec::new();
        let hub = self.hub.clone();
        let (counts, stored) =
            hub.publish_each(items, &mut |loop_id, batch| batches.push((loop_id, batch)));
        self.queue_deliveries(batches, published_ns);
        let messages = 1;
        counts
            .into_iter()
            .map(|c| {
                let reply = Reply::Published {
                    messages,
                    connections: c.connections.into(),
                    users: c.users.into(),
                };
                match &stored {
                    Err(why) => reply.not_stored(why),
                    Ok(()) => reply,
                }
            })
            .collect()
    }
}
