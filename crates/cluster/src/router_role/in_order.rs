//! A publish batch over several router shards, kept in the batch's order without a
//! round trip per run (`--router-shards K > 1`).
//!
//! The gateway sends every shard its part at once ([`CallRequest::PublishInOrder`]:
//! the items whose subject it owns, each with its place in the batch, and which
//! shards own items — the senders; an empty part to a shard that owns none). Each
//! sender looks up its items' followers and hands every other shard the followers
//! that shard owns as one [`ToShard::InOrder`], sent even when empty. A shard
//! delivers once it has its own part and every other sender's: the whole batch to
//! its own users in one go, in the batch's order, each user's messages numbered by
//! the shard that owns the user as ever. It answers the gateway with its own items
//! as `messages` and its own users' deliveries as counts; the gateway sums the K
//! answers. So a batch costs the same three crossings (to the shards, between them,
//! back) whatever its runs, where sending its runs in turn cost a round trip per
//! run: K calls and S × (K − 1) parts for S senders.
//!
//! A shard that does not hear every other sender within [`IN_ORDER_TIMEOUT`]
//! delivers what it has (nothing is held forever, nothing it holds is lost) and
//! answers with an error saying so: those items' order against the silent shard's
//! is not known.

use super::waiting::ReplyTo;
use super::RouterRole;
use crate::codec::{self, CallRequest, GatewayId, InOrderItem, ToShard, WireCall};
use crate::subjects;
use crate::timing::{unix_ns, FORWARD_TIMEOUT, TICK};
use bus::Reply;
use bytes::Bytes;
use hub::{Publish, Reach};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// How long a shard waits for the other shards' parts of an ordered batch: a
/// router tick less than [`FORWARD_TIMEOUT`], so that its answer (looked at every
/// [`TICK`]) reaches the gateway before the gateway gives up on it.
pub const IN_ORDER_TIMEOUT: Duration = FORWARD_TIMEOUT.saturating_sub(TICK);

/// One batch: the gateway that sent it and the call's gather number there.
type Key = (GatewayId, u64);

/// One item for this shard's users.
#[derive(Debug, PartialEq)]
pub(super) struct Item {
    /// Its place in the batch.
    at: u32,
    subject: u64,
    payload: Bytes,
    users: Vec<u64>,
    /// One of this shard's own items: the message counts as published here.
    counted: bool,
}

/// An ordered batch this shard has heard of.
struct Pending {
    since: Instant,
    published_ns: u64,
    /// The gateway's call to this shard: where the answer goes and how many of
    /// the batch's messages are this shard's. `None` until it came.
    call: Option<(ReplyTo, u64)>,
    /// The shards with items, each of which sends its part (from the call).
    senders: Vec<u16>,
    /// The other shards whose part came.
    heard: BTreeSet<u16>,
    items: Vec<Item>,
}

/// A batch to deliver now: its items for this shard's users in the batch's order.
#[derive(Debug, PartialEq)]
pub(super) struct Ready {
    pub(super) call: Option<(ReplyTo, u64)>,
    pub(super) published_ns: u64,
    pub(super) items: Vec<Item>,
    /// The other senders not heard (delivered without them after the timeout);
    /// when the call never came, every other shard not heard.
    pub(super) missing: Vec<u16>,
}

/// The ordered batches waiting for some shard's part: pending state, never a
/// blocked task.
pub(super) struct InOrder {
    me: u16,
    count: u16,
    batches: HashMap<Key, Pending>,
}

impl InOrder {
    pub(super) fn new(shards: crate::shards::Shards) -> InOrder {
        InOrder {
            me: shards.index,
            count: shards.count,
            batches: HashMap::new(),
        }
    }

    /// This shard's own part of batch `key` (the gateway's call: the answer goes
    /// `to`, `messages` of the batch are this shard's, `senders` send parts); the
    /// batch when it is complete.
    /// No batch waits for another shard's parts.
    pub(super) fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    pub(super) fn own(
        &mut self,
        key: Key,
        (to, messages, senders): (ReplyTo, u64, Vec<u16>),
        items: Vec<Item>,
        now: Instant,
    ) -> Option<Ready> {
        let pending = self.pending(key, now);
        pending.call = Some((to, messages));
        pending.senders = senders;
        pending.items.extend(items);
        self.ready_if_complete(key)
    }

    /// Shard `from`'s part of batch `key`; the batch when it is complete.
    pub(super) fn part(
        &mut self,
        key: Key,
        from: u16,
        items: Vec<InOrderItem>,
        now: Instant,
    ) -> Option<Ready> {
        let pending = self.pending(key, now);
        pending.heard.insert(from);
        pending.items.extend(items.into_iter().map(|i| Item {
            at: i.at,
            subject: i.subject,
            payload: i.payload,
            users: i.users,
            counted: false,
        }));
        self.ready_if_complete(key)
    }

    /// Batches waiting [`IN_ORDER_TIMEOUT`] or longer: to deliver as they are.
    pub(super) fn expire(&mut self, now: Instant) -> Vec<Ready> {
        let late: Vec<Key> = self
            .batches
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.since) >= IN_ORDER_TIMEOUT)
            .map(|(&key, _)| key)
            .collect();
        late.into_iter().filter_map(|key| self.take(key)).collect()
    }

    fn pending(&mut self, key: Key, now: Instant) -> &mut Pending {
        self.batches.entry(key).or_insert_with(|| Pending {
            since: now,
            published_ns: unix_ns(),
            call: None,
            senders: Vec::new(),
            heard: BTreeSet::new(),
            items: Vec::new(),
        })
    }

    fn ready_if_complete(&mut self, key: Key) -> Option<Ready> {
        let pending = self.batches.get(&key)?;
        let heard_all = pending
            .senders
            .iter()
            .all(|s| *s == self.me || pending.heard.contains(s));
        if pending.call.is_some() && heard_all {
            return self.take(key);
        }
        None
    }

    fn take(&mut self, key: Key) -> Option<Ready> {
        let mut pending = self.batches.remove(&key)?;
        // Stable: a place's items keep the order they came in.
        pending.items.sort_by_key(|i| i.at);
        let expected: Vec<u16> = match pending.call {
            Some(_) => pending.senders,
            None => (0..self.count).collect(),
        };
        let missing = expected
            .into_iter()
            .filter(|s| *s != self.me && !pending.heard.contains(s))
            .collect();
        Some(Ready {
            call: pending.call,
            published_ns: pending.published_ns,
            items: pending.items,
            missing,
        })
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.batches.len()
    }
}

impl RouterRole {
    /// A gateway's call with this shard's part of an ordered batch: its items'
    /// followers handed to their shards, its own users' kept until every other
    /// sender's part is in.
    pub(super) fn publish_in_order(&mut self, gateway: GatewayId, call: WireCall) {
        let (CallRequest::PublishInOrder { items, senders }, Some(part)) =
            (call.request, call.part)
        else {
            tracing::warn!("an ordered batch's part without its number: dropped");
            return;
        };
        let (me, count) = (self.shards.index, self.shards.count);
        let messages = items.len() as u64;
        let mut own = Vec::with_capacity(items.len());
        let mut others: Vec<Vec<InOrderItem>> = vec![Vec::new(); usize::from(count)];
        for (at, subject, payload) in items {
            let mut by_shard: Vec<Vec<u64>> = vec![Vec::new(); usize::from(count)];
            for user in self.hub.recipients(subject) {
                by_shard[usize::from(self.shards.owner(user))].push(user);
            }
            for (shard, users) in by_shard.into_iter().enumerate() {
                if shard == usize::from(me) {
                    let payload = payload.clone();
                    own.push(Item {
                        at,
                        subject,
                        payload,
                        users,
                        counted: true,
                    });
                } else if !users.is_empty() {
                    let payload = payload.clone();
                    others[shard].push(InOrderItem {
                        at,
                        subject,
                        payload,
                        users,
                    });
                }
            }
        }
        let (number, _) = codec::part_of(part);
        // A shard with items hands every other shard its part, even an empty one.
        let sends = senders.contains(&me);
        let parts = others.into_iter().enumerate().map(|(s, i)| (s as u16, i));
        for (shard, items) in parts.filter(|(s, _)| sends && *s != me) {
            // After what this shard already forwarded there.
            self.send_forwards(shard);
            let msg = ToShard::InOrder {
                from: me,
                gateway,
                number,
                items,
            };
            self.out
                .push((subjects::forward(shard), codec::encode_to_shard(&msg)));
        }
        let to = ReplyTo::Gateway {
            gateway,
            loop_id: call.loop_id,
            token: call.token,
            part: call.part,
        };
        let key = (gateway, number);
        let call = (to, messages, senders);
        let ready = self.in_order.own(key, call, own, Instant::now());
        if let Some(ready) = ready {
            self.deliver_in_order(ready);
        }
    }

    /// Another shard's part of an ordered batch.
    pub(super) fn in_order_part(&mut self, from: u16, key: Key, items: Vec<InOrderItem>) {
        if let Some(ready) = self.in_order.part(key, from, items, Instant::now()) {
            self.deliver_in_order(ready);
        }
    }

    /// Delivers the ordered batches that waited too long, as they are.
    pub(super) fn expire_in_order(&mut self, now: Instant) {
        for ready in self.in_order.expire(now) {
            self.deliver_in_order(ready);
        }
    }

    /// Numbers and delivers a batch's items to this shard's users in the batch's
    /// order (one durable commit), and answers the gateway's call when it came.
    fn deliver_in_order(&mut self, ready: Ready) {
        let items = ready
            .items
            .into_iter()
            .map(|i| hub::Item {
                subject: i.subject,
                channel: None,
                payload: i.payload,
                reach: Reach::Users {
                    users: i.users,
                    counted: i.counted,
                },
            })
            .collect();
        let published = self.publish_and_queue(Publish { items }, ready.published_ns);
        if !ready.missing.is_empty() {
            self.counters.ordered_incomplete.fetch_add(1, Relaxed);
        }
        let Some((to, messages)) = ready.call else {
            return;
        };
        let (connections, users) = published.counts.iter().fold((0, 0), |(c, u), n| {
            (c + u64::from(n.connections), u + u64::from(n.users))
        });
        let answer = if ready.missing.is_empty() {
            let not_stored = published.stored.err().map(|why| why.to_string());
            Reply::of_publish(messages, connections, users, not_stored)
        } else {
            let missing: Vec<String> = ready.missing.iter().map(u16::to_string).collect();
            Reply::TimedOut(format!(
                "router shard {} sent no part of the batch within {} s: shard {} delivered \
                 its {messages} messages and what the others sent to {connections} \
                 connections of {users} users, in an order not known against the missing \
                 part's",
                missing.join(", "),
                IN_ORDER_TIMEOUT.as_secs(),
                self.shards.index,
            ))
        };
        self.answer(to, answer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shards::Shards;

    fn item(at: u32, subject: u64, users: &[u64], counted: bool) -> Item {
        Item {
            at,
            subject,
            payload: Bytes::from(format!("m{at}")),
            users: users.to_vec(),
            counted,
        }
    }

    fn part(at: u32, subject: u64, users: &[u64]) -> InOrderItem {
        InOrderItem {
            at,
            subject,
            payload: Bytes::from(format!("m{at}")),
            users: users.to_vec(),
        }
    }

    /// Shard 1 of 3: its own part and both others' parts, in any order; ready only
    /// with all three, its items in the batch's order.
    #[test]
    fn a_batch_is_ready_once_its_own_part_and_every_other_senders_part_came() {
        let t = Instant::now();
        let mut b = InOrder::new(Shards { index: 1, count: 3 });
        let key = (7, 40);
        assert_eq!(b.part(key, 2, vec![part(3, 5, &[4])], t), None);
        let own = vec![item(1, 1, &[1, 4], true), item(4, 4, &[], true)];
        let call = (ReplyTo::Nobody, 2, vec![0, 1, 2]);
        assert_eq!(b.own(key, call, own, t), None);
        // Another batch of the same gateway is kept apart.
        assert_eq!(b.part((7, 41), 0, Vec::new(), t), None);
        let ready = b.part(key, 0, vec![part(0, 3, &[1]), part(2, 6, &[7])], t);
        let ready = ready.expect("all three parts in");
        assert_eq!(ready.call, Some((ReplyTo::Nobody, 2)));
        assert!(ready.missing.is_empty());
        let order: Vec<(u32, bool)> = ready.items.iter().map(|i| (i.at, i.counted)).collect();
        assert_eq!(
            order,
            [(0, false), (1, true), (2, false), (3, false), (4, true)]
        );
        assert_eq!(b.len(), 1);
        // A shard without items of a batch waits for the senders only.
        let call = (ReplyTo::Nobody, 0, vec![0, 2]);
        assert_eq!(b.own((9, 1), call, Vec::new(), t), None);
        assert_eq!(b.part((9, 1), 2, Vec::new(), t), None);
        let ready = b
            .part((9, 1), 0, vec![part(0, 3, &[1])], t)
            .expect("both senders");
        assert_eq!(ready.items, [item(0, 3, &[1], false)]);
    }

    /// A silent shard: after the timeout the batch is delivered as it is, saying
    /// whom it missed; a part without the gateway's call (the call was lost) too.
    #[test]
    fn a_batch_a_shard_never_completes_is_delivered_after_the_timeout() {
        let t = Instant::now();
        let mut b = InOrder::new(Shards { index: 0, count: 3 });
        let to = ReplyTo::Backend("inbox".into());
        let call = (to.clone(), 1, vec![0, 1, 2]);
        assert_eq!(b.own((7, 1), call, vec![item(0, 3, &[3], true)], t), None);
        assert_eq!(b.part((7, 1), 2, Vec::new(), t), None);
        let later = t + Duration::from_millis(100);
        assert_eq!(b.part((8, 1), 1, vec![part(1, 1, &[3])], later), None);
        assert!(b.expire(t + IN_ORDER_TIMEOUT / 2).is_empty());
        let first = b.expire(t + IN_ORDER_TIMEOUT);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].call, Some((to, 1)));
        assert_eq!(first[0].missing, [1]);
        assert_eq!(first[0].items, [item(0, 3, &[3], true)]);
        let second = b.expire(later + IN_ORDER_TIMEOUT);
        assert_eq!(
            (second[0].call.as_ref(), &second[0].missing[..]),
            (None, &[2][..])
        );
        assert_eq!(b.len(), 0);
    }
}
