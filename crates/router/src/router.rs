//! [`Router`]: presence + subscription index + history, driven by `handle_*`
//! inputs: logins, publishes ([`Router::handle_publish`]; one user's part of a
//! fan-out is in `publish`), history reads, subscriptions, expiry (only from
//! [`Router::handle_tick`], the caller's clock) and accounting.
//!
//! Resume (SPEC B6): every history read says the user's current epoch and last
//! sequence number and whether the client's `(epoch, since)` could be served
//! without loss ([`HistoryRead::gap`]); the rules are in `crate::history`, the
//! reads in `history` here.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use crate::budget::HistoryTotals;
use crate::channels::{Channels, Keep, Position, Refusal};
use crate::history::{Epochs, Journal, Ring};
use crate::presence::Overflow;
use crate::publish::{Fanout, Reach};
use crate::users::UserMap;
use crate::{
    ConnRef, Delivery, HistoryRead, Message, PublishCounts, RouterConfig, RouterStats, SubjectId,
    SubscriptionIndex, UserId,
};

/// `compact()` shrinks a map whose capacity exceeds this many times its length.
pub const SHRINK_SLACK: usize = 4;

/// Presence, subscriptions and history of one router.
pub struct Router {
    config: RouterConfig,
    index: SubscriptionIndex,
    /// Users with a connection or with live history; nobody else has an entry.
    users: UserMap,
    /// Connection lists of users with more than one connection.
    overflow: Overflow,
    /// (went offline at, user) in logout order; checked lazily by `handle_tick`.
    expiry: VecDeque<(Instant, UserId)>,
    /// Totals of all rings, and their bound.
    totals: HistoryTotals,
    epochs: Epochs,
    /// Named channels: their subscribers, members and history.
    channels: Channels,
    /// Presence info of users who have one (`online`).
    infos: online::Infos,
    /// Some channel has a presence mirror (`channels::mirror`): the tick drops
    /// those no list read for a while.
    mirrored: bool,
    /// Friends online: users in their grace, changes not yet pushed.
    friends: friends::Friends,
    /// History changes not yet taken by [`Router::take_journal`] (empty unless
    /// `config.journal`).
    journal: Vec<Journal>,
    users_online: u64,
    connections: u64,
    messages_in: u64,
    deliveries: u64,
    users_with_history: u64,
}

impl Router {
    pub fn new(config: RouterConfig, index: SubscriptionIndex) -> Router {
        let mut channels = Channels::default();
        channels.set_presence(config.presence.clone());
        Router {
            totals: HistoryTotals::new(config.history_total_bytes),
            epochs: Epochs {
                seed: config.epoch_seed,
                issued: 0,
            },
            config,
            index,
            users: UserMap::default(),
            overflow: Overflow::default(),
            expiry: VecDeque::new(),
            channels,
            infos: online::Infos::default(),
            mirrored: false,
            friends: friends::Friends::default(),
            journal: Vec::new(),
            users_online: 0,
            connections: 0,
            messages_in: 0,
            deliveries: 0,
            users_with_history: 0,
        }
    }

    /// A connection of `user` opened. Logging the same `conn` twice is a no-op; a
    /// connection is logged in as one user at a time. O(1).
    pub fn handle_login(&mut self, user: UserId, conn: ConnRef) {
        let friends_on = self.friends_on();
        let mut state = self.users.get_or_default(user);
        let was_offline = state.conns().is_empty();
        if !state.conns_mut().add(conn, &mut self.overflow) {
            return;
        }
        self.connections += 1;
        if was_offline {
            self.users_online += 1;
            if friends_on {
                self.friends.online(user);
            }
            if let Some(ring) = state.ring_mut() {
                ring.offline_since = None;
            }
        }
    }

    /// A connection of `user` closed. The user's history is kept for
    /// `history_ttl` after their last connection goes.
    pub fn handle_logout(&mut self, user: UserId, conn: ConnRef, now: Instant) {
        self.logout(user, conn, now, false);
    }

    /// [`Router::handle_logout`]; with `keep_empty`, a user left with no connection
    /// and no history yet gets an empty history for the ttl instead of being
    /// forgotten, so what is published while their clients come back is kept.
    fn logout(&mut self, user: UserId, conn: ConnRef, now: Instant, keep_empty: bool) {
        let friends_on = self.friends_on();
        let Some(mut state) = self.users.get_mut(user) else {
            return;
        };
        if !state.conns_mut().remove(conn, &mut self.overflow) {
            return;
        }
        self.connections -= 1;
        if !state.conns().is_empty() {
            return;
        }
        self.users_online -= 1;
        if friends_on {
            self.friends.offline(user, now, self.config.presence.grace);
        }
        if keep_empty && state.ring().is_none() && !self.config.history_ttl.is_zero() {
            state.set_ring(Box::new(Ring::new(self.epochs.next())));
            self.users_with_history += 1;
        }
        match state.ring_mut() {
            Some(ring) if !self.config.history_ttl.is_zero() => {
                ring.offline_since = Some(now);
                self.expiry.push_back((now, user));
            }
            _ => self.forget(user),
        }
    }

    /// Logs out every connection `gone` says is gone (a router forgetting a whole
    /// gateway process); returns how many. O(users): rare, never per message. Their
    /// clients did not leave, their process died: they come back through another
    /// gateway, so a user left offline keeps (or gets) a history for the ttl and
    /// resumes from it — even one who had no message yet.
    pub fn logout_where(&mut self, gone: impl Fn(ConnRef) -> bool, now: Instant) -> u64 {
        let mut out = Vec::new();
        for (user, state) in self.users.iter() {
            state.conns.for_each(&self.overflow, |c| {
                if gone(c) {
                    out.push((user, c));
                }
            });
        }
        if !self.channels.is_empty() {
            self.channels.leave_where(&gone, now);
        }
        for &(user, conn) in &out {
            self.logout(user, conn, now, true);
        }
        out.len() as u64
    }

    /// Subscribes `conn` (logged in as `user`, if it is) to channel `name` and
    /// reads what a client at `since` missed, in one step (see
    /// [`Channels`](crate::channels::Channels)); refused when `user` holds
    /// `max_subscriptions_per_user` channel subscriptions already.
    pub fn handle_join(
        &mut self,
        name: impl AsRef<str> + Into<Arc<str>>,
        conn: ConnRef,
        user: Option<UserId>,
        since: Option<(Option<u32>, u64)>,
    ) -> Result<HistoryRead, Refusal> {
        let limit = self.config.max_subscriptions_per_user;
        self.channels
            .join(name, conn, user, since, limit, &mut self.epochs)
    }

    /// Unsubscribes `conn` from channel `name` (as the user it joined as); true if
    /// it was subscribed.
    pub fn handle_leave(&mut self, name: &str, conn: ConnRef, now: Instant) -> bool {
        self.channels.leave(name, conn, now)
    }

    /// What channel `name` keeps after `since` (`None`: its newest), at most `limit`.
    pub fn channel_history(
        &self,
        name: &str,
        since: Option<(Option<u32>, u64)>,
        limit: usize,
    ) -> HistoryRead {
        self.channels.history(name, since, limit)
    }

    /// Puts back a durable history of channel `name` read at start (see
    /// [`Router::restore`], the same for a user).
    pub fn restore_channel(
        &mut self,
        name: &str,
        epoch: u32,
        first: u64,
        msgs: impl IntoIterator<Item = Arc<Message>>,
        now: Instant,
    ) -> usize {
        let keep = Keep::within(&self.config, &mut self.totals, &mut self.epochs, None);
        self.channels.restore(name, (epoch, first), msgs, keep, now)
    }

    /// The named channels (read-only: positions, members, counts).
    pub fn channels(&self) -> &Channels {
        &self.channels
    }

    /// Publishes `msg` at `now` to whom `reach` says, handing `deliver` each
    /// delivery as its user is reached (the rules are in [`crate::publish`]);
    /// returns the exact reach. The index row is walked in place: nothing is
    /// allocated per delivery, and a caller groups deliveries as it likes (per
    /// gateway loop) while the router is still borrowed.
    pub fn handle_publish(
        &mut self,
        msg: &Arc<Message>,
        reach: &Reach,
        now: Instant,
        deliver: &mut impl FnMut(Delivery),
    ) -> PublishCounts {
        self.messages_in += u64::from(reach.counted());
        if let (Reach::Channel, Some(name)) = (reach, msg.channel.as_deref()) {
            let journal = self.config.journal.then_some(&mut self.journal);
            let keep = Keep::within(&self.config, &mut self.totals, &mut self.epochs, journal);
            let (counts, _): (PublishCounts, Position) =
                self.channels.publish(name, msg, keep, now, deliver);
            self.deliveries += u64::from(counts.connections);
            return counts;
        }
        let mut fan = Fanout {
            users: &mut self.users,
            overflow: &self.overflow,
            totals: &mut self.totals,
            offline: &mut self.expiry,
            epochs: &mut self.epochs,
            journal: if self.config.journal {
                Some(&mut self.journal)
            } else {
                None
            },
            msg,
            capacity: self.config.history,
            max_bytes: self.config.history_bytes,
            ttl: self.config.history_ttl,
            now,
            counts: PublishCounts::default(),
            new_rings: 0,
            dropped_rings: 0,
            cost: crate::history::charge(msg),
            deliveries: 0,
        };
        match reach {
            Reach::Followers => {
                let subject = msg.subject;
                fan.reach(subject, deliver);
                self.index.for_each_subscriber(subject, |u| {
                    // A user who follows themself was reached above.
                    if u != subject {
                        fan.reach(u, deliver);
                    }
                });
            }
            Reach::Users { users, .. } => {
                for &u in users {
                    fan.reach(u, deliver);
                }
            }
            // A channel's message without a channel name reaches nobody.
            Reach::Channel => {}
        }
        let Fanout {
            counts,
            new_rings,
            dropped_rings,
            deliveries,
            ..
        } = fan;
        self.users_with_history = self.users_with_history + new_rings - dropped_rings;
        self.deliveries += deliveries;
        counts
    }

    /// `{subject} ∪ subscribers(subject)`, the subject first, each user once: whom
    /// a publish to `subject` reaches, as a list (what a router shard divides among
    /// the shards owning those users).
    pub fn recipients(&self, subject: SubjectId) -> Vec<UserId> {
        let mut all = Vec::with_capacity(self.index.degree(subject) + 1);
        all.push(subject);
        self.index.for_each_subscriber(subject, |u| {
            if u != subject {
                all.push(u);
            }
        });
        all
    }

    /// Adds `subscriber` → `subject` to the index; true if new.
    pub fn subscribe(&mut self, subscriber: UserId, subject: SubjectId) -> bool {
        self.index.insert(subscriber, subject)
    }

    /// Removes `subscriber` → `subject` from the index; true if it existed.
    pub fn unsubscribe(&mut self, subscriber: UserId, subject: SubjectId) -> bool {
        self.index.remove(subscriber, subject)
    }

    /// Subscribers of `subject`, sorted.
    pub fn subscribers(&self, subject: SubjectId) -> Vec<UserId> {
        self.index.subscribers(subject)
    }

    pub fn index(&self) -> &SubscriptionIndex {
        &self.index
    }

    /// Online connections of `user` (empty if offline).
    pub fn connections_of(&self, user: UserId) -> Vec<ConnRef> {
        let mut out = Vec::new();
        if let Some(s) = self.users.get(user) {
            s.conns.for_each(&self.overflow, |c| out.push(c));
        }
        out
    }

    /// Drops the history of users offline for `history_ttl` or longer.
    pub fn handle_tick(&mut self, now: Instant) {
        let ttl = self.config.history_ttl;
        let journal = self.config.journal.then_some(&mut self.journal);
        // Before the grace expires: a user leaving now keeps their info until the
        // caller pushes their `member_removed` (`push_presence`).
        self.infos.forget_absent(&self.channels);
        if self.mirrored {
            self.mirrored = self.channels.drop_unread_mirrors(now) > 0;
        }
        self.channels.expire_grace(now);
        self.friends.expire(now, self.config.presence.grace);
        self.channels.expire(now, ttl, &mut self.totals, journal);
        while let Some(&(at, user)) = self.expiry.front() {
            if now.saturating_duration_since(at) < ttl {
                break;
            }
            self.expiry.pop_front();
            // The entry may be stale: the user came back, or left again later (a
            // newer entry then covers them).
            let expired = self.users.get(user).is_some_and(|s| {
                s.conns.is_empty()
                    && s.ring
                        .and_then(|r| r.offline_since)
                        .is_some_and(|t| now.saturating_duration_since(t) >= ttl)
            });
            if expired {
                self.forget(user);
            }
        }
    }

    pub fn stats(&self) -> RouterStats {
        RouterStats {
            users_online: self.users_online,
            connections: self.connections,
            subscriptions: self.index.edge_count(),
            messages_in: self.messages_in,
            deliveries: self.deliveries,
            users_with_history: self.users_with_history,
            history_bytes: self.totals.bytes as u64,
            history_messages: self.totals.messages,
            history_evicted: self.totals.evicted,
            history_rings_evicted: self.totals.rings_evicted,
            channels: self.channels.len() as u64,
            channel_subscriptions: self.channels.subscriptions(),
        }
    }

    /// Heap bytes held by presence and history (not the index), an estimate:
    /// the presence table, every ring, the overflow lists and the expiry queue.
    pub fn presence_bytes(&self) -> usize {
        let slots = self.users.heap_bytes();
        let rings: usize = self.users.rings().map(Ring::heap_bytes).sum();
        slots
            + rings
            + self.overflow.heap_bytes()
            + self.expiry.capacity() * std::mem::size_of::<(Instant, UserId)>()
            + self.channels.heap_bytes()
            + self.infos.heap_bytes()
            + self.friends.heap_bytes()
    }

    /// Gives memory back after a mass disconnect: shrinks maps that are mostly empty.
    pub fn compact(&mut self) {
        self.users.shrink();
        if self.expiry.capacity() > SHRINK_SLACK * self.expiry.len().max(16) {
            self.expiry.shrink_to_fit();
        }
        self.overflow.shrink();
    }
}

pub mod friends;
mod history;
pub mod online;
mod presence;
#[cfg(test)]
mod tests;
