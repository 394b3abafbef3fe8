//! The subject's shard's publishes waiting for other shards' counts
//! (`--router-shards`): pending state, never a blocked task. A call is answered
//! once every shard it forwarded followers to has counted them — the sum of every
//! shard's counts (each user counted once, by the shard that owns it), `NotStored`
//! when any shard's durable write failed — or, after [`FORWARD_TIMEOUT`], with an
//! error saying which shards answered and what they delivered: never a silent
//! partial count.

use crate::codec::{GatewayId, ShardCount};
use crate::timing::FORWARD_TIMEOUT;
use bus::Reply;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// Where a publish's answer goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyTo {
    /// A gateway's connection.
    Gateway {
        gateway: GatewayId,
        loop_id: u16,
        token: u32,
        /// The call's [`crate::codec::WireCall::part`], echoed.
        part: Option<u64>,
    },
    /// A back-end's NATS request (its reply inbox).
    Backend(String),
    /// A back-end's publish without a reply subject.
    Nobody,
}

/// One call's counts so far.
struct Call {
    to: ReplyTo,
    since: Instant,
    messages: u64,
    /// Shard → (connections, users) it reached, this shard included.
    counted: BTreeMap<u16, (u64, u64)>,
    /// Shard → forwarded items it has not counted yet.
    owed: BTreeMap<u16, u32>,
    /// A shard's failed durable write (the first).
    not_stored: Option<String>,
}

/// The calls waiting, by the number this shard gave them.
#[derive(Default)]
pub struct Waiting {
    next: u64,
    calls: HashMap<u64, Call>,
}

impl Waiting {
    /// No publish waits for another shard's counts.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Registers a call that reached `own` = (shard, connections, users) on this
    /// shard and forwarded `owed` = [(shard, items)]; returns its number for the items.
    pub fn start(
        &mut self,
        to: ReplyTo,
        messages: u64,
        (me, connections, users): (u16, u64, u64),
        not_stored: Option<String>,
        owed: &[(u16, u32)],
        now: Instant,
    ) -> u64 {
        self.next += 1;
        let mut call = Call {
            to,
            since: now,
            messages,
            counted: BTreeMap::from([(me, (connections, users))]),
            owed: BTreeMap::new(),
            not_stored,
        };
        for &(shard, items) in owed {
            *call.owed.entry(shard).or_default() += items;
        }
        self.calls.insert(self.next, call);
        self.next
    }

    /// Shard `from`'s count of one forwarded item; the answer when it was the last
    /// one owed. Counts of a call no longer waiting (answered after the timeout)
    /// are dropped.
    pub fn count(&mut self, from: u16, c: ShardCount) -> Option<(ReplyTo, Reply)> {
        let call = self.calls.get_mut(&c.call)?;
        let Some(owed) = call.owed.get_mut(&from) else {
            tracing::warn!(
                from,
                call = c.call,
                "a count from a shard not asked: dropped"
            );
            return None;
        };
        *owed -= 1;
        if *owed == 0 {
            call.owed.remove(&from);
        }
        let sum = call.counted.entry(from).or_default();
        sum.0 += c.connections;
        sum.1 += c.users;
        if let (None, Some(e)) = (&call.not_stored, c.error) {
            call.not_stored = Some(e);
        }
        if !call.owed.is_empty() {
            return None;
        }
        let call = self.calls.remove(&c.call).expect("present above");
        let (connections, users) = call
            .counted
            .values()
            .fold((0, 0), |(c, u), &(dc, du)| (c + dc, u + du));
        let answer = match call.not_stored {
            None => Reply::Published {
                messages: call.messages,
                connections,
                users,
            },
            Some(error) => Reply::NotStored {
                messages: call.messages,
                connections,
                users,
                error,
            },
        };
        Some((call.to, answer))
    }

    /// Calls waiting [`FORWARD_TIMEOUT`] or longer, answered with an error.
    pub fn expire(&mut self, now: Instant) -> Vec<(ReplyTo, Reply)> {
        let late: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, c)| now.saturating_duration_since(c.since) >= FORWARD_TIMEOUT)
            .map(|(&id, _)| id)
            .collect();
        late.into_iter()
            .filter_map(|id| self.calls.remove(&id))
            .map(|call| {
                let missing: Vec<String> = call.owed.keys().map(u16::to_string).collect();
                let answered: Vec<String> = call
                    .counted
                    .iter()
                    .map(|(shard, (c, u))| format!("shard {shard}: {c} connections of {u} users"))
                    .collect();
                let why = format!(
                    "router shard {} did not count its followers within {} s; \
                     delivered by the shards that answered: {}",
                    missing.join(", "),
                    FORWARD_TIMEOUT.as_secs(),
                    answered.join("; ")
                );
                (call.to, Reply::TimedOut(why))
            })
            .collect()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.calls.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(call: u64, connections: u64, users: u64) -> ShardCount {
        ShardCount {
            call,
            connections,
            users,
            error: None,
        }
    }

    #[test]
    fn a_call_is_answered_with_the_sum_once_every_shard_counted() {
        let t = Instant::now();
        let mut w = Waiting::default();
        let to = ReplyTo::Backend("inbox".into());
        let id = w.start(to.clone(), 1, (0, 3, 2), None, &[(1, 2), (2, 1)], t);
        assert_eq!(w.count(1, count(id, 1, 1)), None);
        assert_eq!(w.count(2, count(id, 4, 3)), None);
        let (back, answer) = w.count(1, count(id, 2, 2)).unwrap();
        assert_eq!(back, to);
        assert_eq!(
            answer,
            Reply::Published {
                messages: 1,
                connections: 10,
                users: 8
            }
        );
        assert_eq!(w.len(), 0);
        // A late or unknown count changes nothing.
        assert_eq!(w.count(1, count(id, 1, 1)), None);
    }

    #[test]
    fn a_failed_durable_write_on_any_shard_wins() {
        let t = Instant::now();
        let mut w = Waiting::default();
        let id = w.start(ReplyTo::Nobody, 2, (1, 1, 1), None, &[(0, 1)], t);
        let mut c = count(id, 5, 5);
        c.error = Some("disk full".into());
        assert_eq!(
            w.count(0, c).unwrap().1,
            Reply::NotStored {
                messages: 2,
                connections: 6,
                users: 6,
                error: "disk full".into()
            }
        );
    }

    #[test]
    fn a_shard_that_does_not_count_makes_the_answer_an_error_after_the_timeout() {
        let t = Instant::now();
        let mut w = Waiting::default();
        let id = w.start(ReplyTo::Nobody, 1, (0, 4, 2), None, &[(1, 1), (2, 1)], t);
        assert_eq!(w.count(2, count(id, 1, 1)), None);
        assert!(w.expire(t + FORWARD_TIMEOUT / 2).is_empty());
        let late = w.expire(t + FORWARD_TIMEOUT);
        assert_eq!(late.len(), 1);
        let Reply::TimedOut(why) = &late[0].1 else {
            panic!("{late:?}")
        };
        assert!(
            why.contains("router shard 1 did not count")
                && why.contains("shard 0: 4 connections of 2 users")
                && why.contains("shard 2: 1 connections of 1 users"),
            "{why}"
        );
        assert_eq!(w.len(), 0);
    }
}
