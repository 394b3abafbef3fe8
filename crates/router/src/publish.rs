//! One publish's fan-out: whom it reaches ([`Reach`]) and, for each user reached
//! ([`Fanout::reach`]), the next sequence number, the message kept in their
//! history ring and one delivery per online connection. [`Router::handle_publish`]
//! drives it over the index; this file does not know the router.
//!
//! Semantics of one publish:
//! - The recipients are read once, at the publish: `{subject} ∪ subscribers(subject)`
//!   from the index ([`Reach::Followers`]), or exactly the users given
//!   ([`Reach::Users`]). Nobody is reached twice (a user subscribed to themself is
//!   reached once, as the subject).
//! - Each reached user's deliveries carry that user's next sequence number and the
//!   epoch of their ring, so per-user order holds on every connection.
//! - Counts are exact: each reached user with a connection counts once, with all
//!   its connections.
//! - An offline user whose history outlived its ttl is forgotten when a publish
//!   reaches them, not revived: the caller's tick ([`Router::handle_tick`]) would
//!   forget them anyway, and a client coming back before it must be told of a new
//!   epoch, not resume a ring that lacks this message.
//!
//! [`Router::handle_publish`]: crate::Router::handle_publish
//! [`Router::handle_tick`]: crate::Router::handle_tick

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::budget::HistoryTotals;
use crate::history::{Epochs, Journal, Ring};
use crate::presence::Overflow;
use crate::users::UserMap;
use crate::{Delivery, Message, PublishCounts, UserId};

/// Whom a publish reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// `{subject} ∪ subscribers(subject)`, from this router's index; the message
    /// counts as one in.
    Followers,
    /// Exactly `users`, each listed once (`--router-shards`: the part of a
    /// publish's followers this shard owns). `counted`: the message counts as one
    /// in here (on the subject's shard; a shard reaching users forwarded to it
    /// does not).
    Users { users: Vec<UserId>, counted: bool },
    /// The connections subscribed to the message's channel (`Message::channel`),
    /// numbered in the channel's own sequence (`crate::channels`).
    Channel,
}

impl Reach {
    /// Whether the message counts as one in (`RouterStats::messages_in`).
    pub fn counted(&self) -> bool {
        match self {
            Reach::Followers | Reach::Channel => true,
            Reach::Users { counted, .. } => *counted,
        }
    }
}

/// One publish's state, split from `Router` so the index can be borrowed while
/// presence and history are mutated; the router folds the counters back in once
/// the fan-out is done.
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
    /// Rings dropped (users gone from the map): offline users' rings for the total
    /// bound, and rings that outlived their ttl.
    pub dropped_rings: u64,
    /// What the message costs in each ring that keeps it.
    pub cost: usize,
    pub deliveries: u64,
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
                    // History already outlived the user (see the module doc).
                    self.forget(user);
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

    /// Forgets offline `user` and their ring (what the tick does at the ttl).
    #[cold]
    fn forget(&mut self, user: UserId) {
        if self.totals.forget_user(user, self.users) {
            self.dropped_rings += 1;
            if let Some(journal) = self.journal.as_deref_mut() {
                journal.push(Journal::Forgot(user));
            }
        }
    }
}
