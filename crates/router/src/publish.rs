//! Publishing: resolving `{subject} ∪ subscribers(subject)` to online connections,
//! giving each reached user their next sequence number and keeping the message in
//! their history ring.
//!
//! A publish can run in bounded slices so the caller may release the router lock
//! between them (a subject with 200k subscribers must not hold the lock for the
//! whole fan-out): [`Router::begin_publish`] makes a [`PublishCursor`], and each
//! [`Router::step_publish`] reaches at most `budget` users.
//!
//! Semantics across slices:
//! - The recipient *users* are fixed at the first step (the publish's moment): an
//!   edge added later does not receive this message, an edge removed later still
//!   does (as if the publish had happened at once, before the change). Nobody is
//!   reached twice (a user subscribed to themself is reached once, as the subject).
//! - A user's *connections* are read when that user is reached: one that logged in
//!   before that moment receives, one that closed does not.
//! - Each user's deliveries carry increasing sequence numbers in the order they are
//!   handed out, so per-user order holds whatever the slicing. Two sliced publishes
//!   to the same subject may reach different users in different orders; a caller
//!   that needs every recipient to see one order per subject finishes one cursor
//!   before stepping the next for that subject (a per-subject queue).
//! - Counts are exact: each reached user counts once, with all its connections.
//!
//! A fan-out that fits in the first step's budget walks the index directly and
//! allocates nothing; a larger one first copies its recipient list (8 bytes per
//! subscriber), so later slices do not depend on the index staying unchanged.

use std::sync::Arc;
use std::time::{Duration, Instant};

use std::collections::VecDeque;

use crate::budget::HistoryTotals;
use crate::history::{Journal, Ring};
use crate::presence::Overflow;
use crate::router::Router;
use crate::users::UserMap;
use crate::{ConnRef, Delivery, Message, PublishCounts, SubjectId, UserId};

/// A publish in progress; see the module doc. Dropping an unfinished cursor simply
/// leaves the remaining users unreached (its counts say how far it got).
#[derive(Debug)]
pub struct PublishCursor {
    msg: Arc<Message>,
    now: Instant,
    /// Recipients still to reach (`None` before the first step).
    pending: Option<Vec<UserId>>,
    /// Next index into `pending`.
    next: usize,
    counts: PublishCounts,
    done: bool,
}

impl PublishCursor {
    /// Reach so far (exact once [`PublishCursor::is_done`]).
    pub fn counts(&self) -> PublishCounts {
        self.counts
    }

    /// The subject being published to.
    pub fn subject(&self) -> u64 {
        self.msg.subject
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Users not reached yet (0 before the first step).
    pub fn remaining(&self) -> usize {
        self.pending.as_ref().map_or(0, |p| p.len() - self.next)
    }
}

impl Router {
    /// Starts publishing `msg` at `now`; nothing is delivered until
    /// [`Router::step_publish`].
    pub fn begin_publish(&mut self, msg: Arc<Message>, now: Instant) -> PublishCursor {
        self.messages_in += 1;
        PublishCursor {
            msg,
            now,
            pending: None,
            next: 0,
            counts: PublishCounts::default(),
            done: false,
        }
    }

    /// Starts publishing `msg` to exactly `users` (each once, none twice) instead of
    /// the subject and its followers: a router shard's part of a publish whose
    /// followers the subject's shard computed (`--router-shards`). `counted`: this
    /// router counts it as a message in (the subject's shard does, the others not).
    pub fn begin_publish_to(
        &mut self,
        msg: Arc<Message>,
        users: Vec<UserId>,
        now: Instant,
        counted: bool,
    ) -> PublishCursor {
        self.messages_in += u64::from(counted);
        PublishCursor {
            msg,
            now,
            pending: Some(users),
            next: 0,
            counts: PublishCounts::default(),
            done: false,
        }
    }

    /// `{subject} ∪ subscribers(subject)`, the subject first, each user once: whom
    /// a publish to `subject` reaches, as a list (what a router shard divides among
    /// the shards owning those users).
    pub fn recipients(&self, subject: SubjectId) -> Vec<UserId> {
        let index = self.index();
        let mut all = Vec::with_capacity(index.degree(subject) + 1);
        all.push(subject);
        index.for_each_subscriber(subject, |u| {
            if u != subject {
                all.push(u);
            }
        });
        all
    }

    /// Reaches at most `budget` (≥ 1) more users of `cur`, handing each delivery to
    /// `deliver`; true when the publish is complete.
    pub fn step_publish(
        &mut self,
        cur: &mut PublishCursor,
        budget: usize,
        deliver: &mut impl FnMut(Delivery),
    ) -> bool {
        if cur.done {
            return true;
        }
        let budget = budget.max(1);
        let subject = cur.msg.subject;
        let (index, mut fan) = self.fanout(&cur.msg, cur.now);
        if cur.pending.is_none() {
            let degree = index.degree(subject);
            if degree < budget {
                // Small enough for one slice: walk the index, no copy.
                fan.reach(subject, deliver);
                index.for_each_subscriber(subject, |u| {
                    // A user who follows themself was reached above.
                    if u != subject {
                        fan.reach(u, deliver);
                    }
                });
                cur.counts = fan.counts;
                cur.done = true;
                let totals = fan.totals();
                self.finish(totals);
                return true;
            }
            let mut all = Vec::with_capacity(degree + 1);
            all.push(subject);
            index.for_each_subscriber(subject, |u| {
                if u != subject {
                    all.push(u);
                }
            });
            cur.pending = Some(all);
        }
        let pending = cur.pending.as_ref().expect("set above");
        let end = pending.len().min(cur.next + budget);
        fan.counts = cur.counts;
        for &u in &pending[cur.next..end] {
            fan.reach(u, deliver);
        }
        cur.next = end;
        cur.counts = fan.counts;
        let totals = fan.totals();
        if end == pending.len() {
            cur.done = true;
            cur.pending = None;
        }
        self.finish(totals);
        cur.done
    }

    /// Delivers `msg` to `{msg.subject} ∪ subscribers(msg.subject)` at once,
    /// handing `(connection, seq)` to `deliver`. The unsliced publish: the whole
    /// fan-out in one call, allocating nothing per delivery.
    pub fn handle_publish(
        &mut self,
        msg: Arc<Message>,
        now: Instant,
        deliver: &mut impl FnMut(ConnRef, u64),
    ) -> PublishCounts {
        let mut cur = self.begin_publish(msg, now);
        self.step_publish(&mut cur, usize::MAX, &mut |d: Delivery| {
            deliver(d.conn, d.seq)
        });
        cur.counts
    }

    /// Folds one step's totals into the router's counters.
    fn finish(&mut self, t: StepTotals) {
        self.users_with_history = self.users_with_history + t.new_rings - t.dropped_rings;
        self.deliveries += t.deliveries;
        if t.expired > 0 {
            // Offline users whose history outlived the ttl: let the tick drop them now.
            let now = t.now;
            self.handle_tick(now);
        }
    }
}

/// What one step changed, applied to the router after the fan-out's borrows end.
pub(crate) struct StepTotals {
    now: Instant,
    new_rings: u64,
    dropped_rings: u64,
    deliveries: u64,
    expired: u64,
}

/// Issues ring epochs: a mix of the router's seed and a counter, so rings created
/// by one router never share an epoch (until 2^32 of them), and nearby seeds (two
/// start times a second apart) do not give overlapping sequences of epochs.
#[derive(Debug)]
pub(crate) struct Epochs {
    pub seed: u64,
    pub issued: u64,
}

impl Epochs {
    pub fn next(&mut self) -> u32 {
        self.issued += 1;
        let mut x = self.seed ^ self.issued.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        // Murmur3's 64-bit finaliser.
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^= x >> 33;
        (x >> 32) as u32
    }
}

/// Per-step state, split from `Router` so the index can be borrowed while
/// presence and history are mutated.
pub(crate) struct Fanout<'a> {
    pub users: &'a mut UserMap,
    pub overflow: &'a Overflow,
    pub totals: &'a mut HistoryTotals,
    /// The router's expiry queue: offline users, longest offline first.
    pub offline: &'a mut VecDeque<(Instant, UserId)>,
    pub epochs: &'a mut Epochs,
    /// Where kept messages are recorded for a durable copy (`None`: not wanted).
    pub journal: Option<&'a mut Vec<Journal>>,
    pub msg: &'a Arc<Message>,
    pub capacity: usize,
    pub max_bytes: usize,
    pub ttl: Duration,
    pub now: Instant,
    pub counts: PublishCounts,
    pub new_rings: u64,
    /// Offline users' rings dropped for the total bound (users gone from the map).
    pub dropped_rings: u64,
    /// What the message costs in each ring that keeps it.
    pub cost: usize,
    pub deliveries: u64,
    pub expired: u64,
}

impl Fanout<'_> {
    /// Gives `user` the message's next sequence number, keeps it in their history
    /// and hands one delivery per connection to `deliver`.
    #[inline]
    pub fn reach(&mut self, user: UserId, deliver: &mut impl FnMut(Delivery)) {
        // Room for this message from offline rings first (before this user's
        // state is borrowed); rarely taken: only at the total bound.
        if self.totals.bytes + self.cost > self.totals.limit && !self.offline.is_empty() {
            self.dropped_rings +=
                self.totals
                    .drop_offline(user, self.cost, self.users, self.offline);
        }
        let Some(mut state) = self.users.get_mut(user) else {
            return;
        };
        let ring = match state.ring_mut() {
            Some(ring) => {
                if ring
                    .offline_since
                    .is_some_and(|t| self.now.saturating_duration_since(t) >= self.ttl)
                {
                    // History already outlived the user; the tick will drop it.
                    self.expired += 1;
                    return;
                }
                ring
            }
            None => {
                self.new_rings += 1;
                state.set_ring(Box::new(Ring::new(self.epochs.next())))
            }
        };
        let pushed = ring.push(self.msg, self.capacity, self.max_bytes);
        let epoch = ring.epoch();
        let seq = pushed.seq;
        self.totals.record(&pushed);
        if pushed.stored {
            self.totals.trim(ring);
        }
        if let Some(journal) = self.journal.as_deref_mut() {
            journal.push(if pushed.stored {
                Journal::Kept {
                    user,
                    epoch,
                    seq,
                    msg: Arc::clone(self.msg),
                }
            } else {
                Journal::Forgot(user)
            });
        }
        let conns = state.conns();
        let n = conns.len(self.overflow);
        if n > 0 {
            self.counts.users += 1;
            self.counts.connections += n as u32;
            self.deliveries += n as u64;
            conns.for_each(self.overflow, |conn| deliver(Delivery { conn, seq, epoch }));
        }
    }

    pub fn totals(&self) -> StepTotals {
        StepTotals {
            now: self.now,
            new_rings: self.new_rings,
            dropped_rings: self.dropped_rings,
            deliveries: self.deliveries,
            expired: self.expired,
        }
    }
}
