//! Publishing with `--router-shards K > 1`: the follower index divided by subject.
//!
//! Shard `s % K` holds subject `s`'s follower list (only its subjects' edges). A
//! publish to `s` comes to that shard only (from a gateway or a back-end); it
//! computes `{s} ∪ followers(s)`, reaches the users it owns itself and hands every
//! other shard the users that shard owns as one [`ToShard::Forward`] per shard per
//! message it handled (never one per recipient), on `myriad.router.<shard>.forward`.
//! The receiving shard numbers and delivers to them — each user's sequence numbers
//! and history stay with the shard owning the user, so a user's messages keep one
//! numbering, in order, whatever subject's shard they came through — and answers
//! with its counts ([`ToShard::Counted`]). The publish is answered once every shard
//! it forwarded to has counted (`super::waiting`): pending state, so the router's one
//! task goes on handling messages in arrival order meanwhile.

use super::waiting::ReplyTo;
use super::RouterRole;
use crate::backend_answer::answer_json;
use crate::codec::{
    self, CallRequest, ForwardItem, GatewayId, GatewayItem, ShardCount, ToShard, WireCall,
    WireReply,
};
use crate::subjects;
use crate::timing::unix_ns;
use bus::{Reply, Request};
use bytes::Bytes;
use hub::{Item, Publish, Reach};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// Users per forwarded item: at ≤ 10 B each, 32 Ki stay well under NATS's 1 MiB
/// max_payload with the payload (a larger part of one publish goes as more items).
const MAX_FORWARD_USERS: usize = 1 << 15;

/// A shard's forwarded items are sent once they weigh this much.
const FORWARD_BYTES: usize = 256 << 10;

/// One publish call: where its answer goes and its messages `(subject, payload)`.
pub(super) struct PublishCall {
    pub(super) to: ReplyTo,
    pub(super) items: Vec<(u64, Bytes)>,
}

/// Whether `call` is a publish (single or batch): what [`PublishCall::of_gateway`] takes.
pub(super) fn is_any_publish(call: &WireCall) -> bool {
    matches!(
        call.request,
        CallRequest::Bus(Request::Publish { .. } | Request::PublishBatch { .. })
    )
}

impl PublishCall {
    /// A gateway's call accepted by [`is_any_publish`].
    pub(super) fn of_gateway(gateway: GatewayId, call: WireCall) -> PublishCall {
        let to = ReplyTo::Gateway {
            gateway,
            loop_id: call.loop_id,
            token: call.token,
            part: call.part,
        };
        let items = match call.request {
            CallRequest::Bus(Request::Publish { subject, payload }) => vec![(subject, payload)],
            CallRequest::Bus(Request::PublishBatch { items, .. }) => items,
            _ => Vec::new(),
        };
        PublishCall { to, items }
    }
}

/// Forwarded items not sent yet, per shard, with their rough weight.
pub(super) type Outbox = Vec<(Vec<ForwardItem>, usize)>;

/// A part of one publish's followers for another shard.
struct Part {
    call: usize,
    shard: u16,
    subject: u64,
    payload: Bytes,
    users: Vec<u64>,
}

impl RouterRole {
    /// Publishes `calls` in order as the subjects' shard: its own followers reached
    /// at once (one durable commit for the run), the others forwarded; each call
    /// answered now when nothing was forwarded, else once the shards counted.
    pub(super) fn publish_sharded(&mut self, calls: Vec<PublishCall>) {
        let published_ns = unix_ns();
        let me = self.shards.index;
        let mut local = Vec::new();
        let mut call_of_local = Vec::new();
        let mut parts: Vec<Part> = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            for (subject, payload) in &call.items {
                let mut by_shard: Vec<Vec<u64>> = vec![Vec::new(); usize::from(self.shards.count)];
                for user in self.hub.recipients(*subject) {
                    by_shard[usize::from(self.shards.owner(user))].push(user);
                }
                let own = std::mem::take(&mut by_shard[usize::from(me)]);
                for (shard, users) in by_shard.into_iter().enumerate() {
                    if !users.is_empty() {
                        parts.push(Part {
                            call: i,
                            shard: shard as u16,
                            subject: *subject,
                            payload: payload.clone(),
                            users,
                        });
                    }
                }
                local.push(Item {
                    subject: *subject,
                    channel: None,
                    payload: payload.clone(),
                    reach: Reach::Users {
                        users: own,
                        counted: true,
                    },
                });
                call_of_local.push(i);
            }
        }
        let published = self.publish_and_queue(Publish { items: local }, published_ns);
        let mut sums = vec![(0u64, 0u64); calls.len()];
        for (c, &i) in published.counts.iter().zip(&call_of_local) {
            sums[i].0 += u64::from(c.connections);
            sums[i].1 += u64::from(c.users);
        }
        let not_stored = published.stored.err().map(|why| why.to_string());
        let now = Instant::now();
        let mut parts = parts.into_iter().peekable();
        for (i, call) in calls.into_iter().enumerate() {
            let messages = call.items.len() as u64;
            let mut mine = Vec::new();
            while let Some(part) = parts.next_if(|p| p.call == i) {
                mine.push(part);
            }
            let (connections, users) = sums[i];
            if mine.is_empty() {
                let answer = Reply::of_publish(messages, connections, users, not_stored.clone());
                self.answer(call.to, answer);
                continue;
            }
            let owed: Vec<(u16, u32)> = mine
                .iter()
                .map(|p| (p.shard, p.users.len().div_ceil(MAX_FORWARD_USERS) as u32))
                .collect();
            let own = (me, connections, users);
            let id = self
                .waiting
                .start(call.to, messages, own, not_stored.clone(), &owed, now);
            for part in mine {
                for users in part.users.chunks(MAX_FORWARD_USERS) {
                    let item = ForwardItem {
                        call: id,
                        subject: part.subject,
                        payload: part.payload.clone(),
                        published_ns,
                        users: users.to_vec(),
                    };
                    self.forward(part.shard, item);
                }
            }
        }
    }

    /// A message from another shard: followers to reach, counts of ours, or its
    /// part of an ordered batch (`super::in_order`).
    pub(super) fn handle_shard(&mut self, msg: ToShard) {
        match msg {
            ToShard::Forward { from, items } => self.reach_forwarded(from, items),
            ToShard::Counted { from, counts } => {
                for count in counts {
                    if let Some((to, answer)) = self.waiting.count(from, count) {
                        self.answer(to, answer);
                    }
                }
            }
            ToShard::InOrder {
                from,
                gateway,
                number,
                items,
            } => self.in_order_part(from, (gateway, number), items),
            ToShard::Friends { items, .. } => {
                let mut batches = Vec::new();
                self.hub
                    .friends_from_shard(items, &mut |loop_id, mail| batches.push((loop_id, mail)));
                if !batches.is_empty() {
                    self.queue_deliveries(batches, crate::timing::unix_ns());
                }
            }
            ToShard::Fragment(part) => {
                let whole = self.shard_parts.add(part);
                match whole.map(|bytes| codec::decode_to_shard(&bytes)) {
                    Some(Ok(msg)) => self.handle_shard(msg),
                    Some(Err(e)) => tracing::warn!(error = %e, "dropped a forward in parts"),
                    None => {}
                }
            }
        }
    }

    /// Numbers and delivers forwarded publishes to the users listed (this shard's),
    /// then counts them back to `from` — after the deliveries, so the publisher's
    /// answer never overtakes them.
    fn reach_forwarded(&mut self, from: u16, items: Vec<ForwardItem>) {
        let published_ns = items.first().map_or(0, |i| i.published_ns);
        let calls: Vec<u64> = items.iter().map(|i| i.call).collect();
        let items = items
            .into_iter()
            .map(|i| Item {
                subject: i.subject,
                channel: None,
                payload: i.payload,
                reach: Reach::Users {
                    users: i.users,
                    counted: false,
                },
            })
            .collect();
        let published = self.publish_and_queue(Publish { items }, published_ns);
        self.flush_all();
        let error = published.stored.err().map(|why| why.to_string());
        let counts = calls
            .into_iter()
            .zip(published.counts)
            .map(|(call, c)| ShardCount {
                call,
                connections: c.connections.into(),
                users: c.users.into(),
                error: error.clone(),
            })
            .collect();
        let msg = ToShard::Counted {
            from: self.shards.index,
            counts,
        };
        self.out
            .push((subjects::forward(from), codec::encode_to_shard(&msg)));
    }

    /// Answers calls that waited too long for another shard's counts.
    pub(super) fn expire_waiting(&mut self, now: Instant) {
        for (to, answer) in self.waiting.expire(now) {
            self.counters.forwards_uncounted.fetch_add(1, Relaxed);
            self.answer(to, answer);
        }
    }

    /// Sends a publish's answer where it goes.
    pub(super) fn answer(&mut self, to: ReplyTo, answer: Reply) {
        match to {
            ReplyTo::Gateway {
                gateway,
                loop_id,
                token,
                part,
            } => {
                let reply = WireReply {
                    loop_id,
                    token,
                    part,
                    reply: answer,
                };
                self.push_item(gateway, GatewayItem::Reply(reply), 32);
            }
            ReplyTo::Backend(inbox) => {
                let json = answer_json(&answer);
                self.out.push((inbox, Bytes::from(json)));
            }
            ReplyTo::Nobody => {}
        }
    }

    /// Adds `item` to what `shard` is owed; sends it at [`FORWARD_BYTES`].
    fn forward(&mut self, shard: u16, item: ForwardItem) {
        let weight = 32 + item.payload.len() + 5 * item.users.len();
        let (items, bytes) = &mut self.forwards[usize::from(shard)];
        items.push(item);
        *bytes += weight;
        if *bytes >= FORWARD_BYTES {
            self.send_forwards(shard);
        }
    }

    /// Queues what `shard` is owed as one message.
    pub(super) fn send_forwards(&mut self, shard: u16) {
        let (items, bytes) = &mut self.forwards[usize::from(shard)];
        if items.is_empty() {
            return;
        }
        *bytes = 0;
        let msg = ToShard::Forward {
            from: self.shards.index,
            items: std::mem::take(items),
        };
        self.out
            .push((subjects::forward(shard), codec::encode_to_shard(&msg)));
    }

    /// Queues one message for every shard that is owed forwarded items.
    pub(super) fn flush_forwards(&mut self) {
        for shard in 0..self.shards.count {
            self.send_forwards(shard);
        }
    }
}
