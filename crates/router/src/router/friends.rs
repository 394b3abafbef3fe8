//! Friends online (docs/protocol.md "Friends online"): a user who opted in (a
//! connection on their friends companion, `wire::channel::friends_channel`) is
//! told when a user they follow comes online (first connection) or goes offline
//! (last connection, after the presence grace: back within it, nothing).
//!
//! What a login costs is bounded so a login storm stays cheap:
//! - a change is only recorded (one `Vec` push); nothing is delivered at login;
//! - on the router's tick (once a second) each change walks its user's followers
//!   in the index, one lookup each in the set of opted-in users, and reaches at
//!   most [`FriendsConfig::max_fanout`] of them (the rest are counted as dropped);
//! - all the changes a recipient got in one tick leave as one message (the last
//!   change of each user wins), at most [`MAX_CHANGES_PER_MESSAGE`] users in it
//!   (more: the message says `"cut":true`, the client asks `GET /online/<user>`);
//! - a tick publishes at most [`MAX_MESSAGES_PER_TICK`] messages, oldest
//!   recipients first: the others keep their changes for the next tick (where
//!   more may join them, in the same one message).
//!
//! So messages per second are at most [`MAX_MESSAGES_PER_TICK`] and the router
//! lock is held for a bounded time, whatever the login rate; the changes waiting
//! are bounded by the opted-in users × [`MAX_CHANGES_PER_MESSAGE`].
//!
//! With router shards (`--router-shards`) a change is seen by its user's shard,
//! which holds the user's followers, and a friends companion belongs to its own
//! user's shard (`cluster::Shards::owner_of_channel`), which alone knows whether
//! that follower opted in. So a follower another shard owns is a recipient like
//! any other here, but its message is not published: it waits in
//! [`Router::take_friends_for_shards`] for the router role to send to the
//! follower's shard, which publishes it to the companion if someone is on it
//! ([`Router::push_friends_from_shard`]), else drops it. Such a shard cannot see
//! whether anyone watches, so every login's followers are walked, and followers on
//! other shards count against the tick's bound whether they opted in or not.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Router;
use crate::channels::Keep;
use crate::hash::IdHashBuilder;
use crate::{Delivery, Message, UserId};

/// Default bound on the opted-in followers one change reaches.
pub const DEFAULT_FRIENDS_MAX_FANOUT: usize = 1000;

/// Most users one recipient's message names.
pub const MAX_CHANGES_PER_MESSAGE: usize = 256;

/// Most friends messages one tick publishes: what bounds the time a login storm
/// holds the router lock (≈ 4 µs of router time a message, measured: ~80 ms a tick).
pub const MAX_MESSAGES_PER_TICK: usize = 20_000;

/// Friends online events.
#[derive(Clone, Debug)]
pub struct FriendsConfig {
    /// Opted-in followers one change reaches at most (`--friends-max-fanout`);
    /// 0 turns friends events off (nothing is recorded).
    pub max_fanout: usize,
    /// This router's shard and how many there are (`--router-shards`; 0 of 1
    /// alone): a follower `f` is this router's when `f % shards == shard`.
    pub shard: u16,
    pub shards: u16,
}

impl FriendsConfig {
    /// Whether `user`'s friends companion is on this router.
    fn owns(&self, user: UserId) -> bool {
        self.shards <= 1 || user % u64::from(self.shards) == u64::from(self.shard)
    }
}

impl Default for FriendsConfig {
    fn default() -> Self {
        FriendsConfig {
            max_fanout: DEFAULT_FRIENDS_MAX_FANOUT,
            shard: 0,
            shards: 1,
        }
    }
}

/// What friends events cost and dropped, since start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FriendsStats {
    /// Online/offline changes recorded (after the grace).
    pub changes: u64,
    /// Messages published to friends companions (one per recipient per tick).
    pub messages: u64,
    /// (change, follower) pairs not delivered: past `max_fanout`.
    pub dropped_fanout: u64,
    /// (change, recipient) pairs not named: past [`MAX_CHANGES_PER_MESSAGE`].
    pub dropped_cut: u64,
    /// Recipients whose changes waited for a later tick (past
    /// [`MAX_MESSAGES_PER_TICK`]), counted once per tick they waited.
    pub deferred: u64,
}

/// Users in their grace and the changes not yet pushed.
#[derive(Debug, Default)]
pub(super) struct Friends {
    /// User whose last connection left → when (still announced online).
    leaving: HashMap<UserId, Instant, IdHashBuilder>,
    /// The same, oldest first (entries of users back since are stale).
    queue: VecDeque<(Instant, UserId)>,
    /// (user, online) since the last push, in order.
    changes: Vec<(UserId, bool)>,
    /// Recipient → their changes not yet published, in order (at most
    /// 2 × [`MAX_CHANGES_PER_MESSAGE`]: older ones are dropped and counted).
    pending: HashMap<UserId, Vec<(UserId, bool)>, IdHashBuilder>,
    /// Recipients in `pending`, oldest first.
    waiting: VecDeque<UserId>,
    /// Messages for followers other shards own: (follower, payload), in order.
    for_shards: Vec<(UserId, String)>,
    pub(super) stats: FriendsStats,
}

impl Friends {
    /// `user`'s first connection arrived.
    pub(super) fn online(&mut self, user: UserId) {
        if self.leaving.remove(&user).is_none() {
            self.record(user, true);
        }
    }

    /// `user`'s last connection left at `now`.
    pub(super) fn offline(&mut self, user: UserId, now: Instant, grace: Duration) {
        if grace.is_zero() {
            self.record(user, false);
            return;
        }
        self.leaving.insert(user, now);
        self.queue.push_back((now, user));
    }

    /// Records the users whose grace ran out as offline.
    pub(super) fn expire(&mut self, now: Instant, grace: Duration) {
        while let Some(&(at, user)) = self.queue.front() {
            if now.saturating_duration_since(at) < grace {
                break;
            }
            self.queue.pop_front();
            // Stale: the user came back (and maybe left again, a newer entry).
            if self.leaving.get(&user) == Some(&at) {
                self.leaving.remove(&user);
                self.record(user, false);
            }
        }
    }

    fn record(&mut self, user: UserId, online: bool) {
        self.changes.push((user, online));
        self.stats.changes += 1;
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.leaving.capacity() * (std::mem::size_of::<(UserId, Instant)>() + 1)
            + self.queue.capacity() * std::mem::size_of::<(Instant, UserId)>()
            + self.changes.capacity() * std::mem::size_of::<(UserId, bool)>()
            + self.pending.capacity() * (std::mem::size_of::<(UserId, Vec<()>)>() + 1)
            + self
                .pending
                .values()
                .map(|v| v.capacity() * 16)
                .sum::<usize>()
            + self.waiting.capacity() * std::mem::size_of::<UserId>()
            + self.for_shards.capacity() * std::mem::size_of::<(UserId, String)>()
    }
}

impl Router {
    /// Whether a login or logout is recorded: friends events are on and someone
    /// watches (nothing is kept while nobody opted in; with router shards another
    /// shard's watchers cannot be seen, so always).
    pub(super) fn friends_on(&self) -> bool {
        self.config.friends.max_fanout > 0 && self.anyone_may_watch()
    }

    fn anyone_may_watch(&self) -> bool {
        self.config.friends.shards > 1 || self.channels.has_friends_watchers()
    }

    /// Publishes the changes recorded since the last call to the friends
    /// companions of the opted-in followers (see the module doc): one message per
    /// recipient, `{"online":[…],"offline":[…]}`, each with its deliveries.
    /// The caller calls it after every [`Router::handle_tick`] (the changes of
    /// one tick leave together: that is the coalescing).
    pub fn push_friends(&mut self, now: Instant) -> Vec<(Arc<Message>, Vec<Delivery>)> {
        let changes = std::mem::take(&mut self.friends.changes);
        if !self.anyone_may_watch() {
            self.friends.pending.clear();
            self.friends.waiting.clear();
            return Vec::new();
        }
        let max_fanout = self.config.friends.max_fanout;
        let config = &self.config.friends;
        let mut dropped = 0u64;
        let mut cut = 0u64;
        let Friends {
            pending, waiting, ..
        } = &mut self.friends;
        for (user, online) in changes {
            let mut reached = 0usize;
            let channels = &self.channels;
            self.index.for_each_subscriber(user, |f| {
                if f == user || (config.owns(f) && !channels.watches_friends(f)) {
                    return;
                }
                if reached >= max_fanout {
                    dropped += 1;
                    return;
                }
                reached += 1;
                let list = pending.entry(f).or_insert_with(|| {
                    waiting.push_back(f);
                    Vec::new()
                });
                // A recipient whose changes pile up while waiting: the oldest go
                // (the message says it is cut).
                if list.len() >= 2 * MAX_CHANGES_PER_MESSAGE {
                    list.remove(0);
                    cut += 1;
                }
                list.push((user, online));
            });
        }
        self.friends.stats.dropped_fanout += dropped;
        self.friends.stats.dropped_cut += cut;
        let ready = self.friends.waiting.len().min(MAX_MESSAGES_PER_TICK);
        self.friends.stats.deferred += (self.friends.waiting.len() - ready) as u64;
        let mut out = Vec::with_capacity(ready);
        for _ in 0..ready {
            let recipient = self.friends.waiting.pop_front().expect("counted above");
            let Some(list) = self.friends.pending.remove(&recipient) else {
                continue;
            };
            let local = self.config.friends.owns(recipient);
            // Opted out while waiting: nothing to publish to.
            if local && !self.channels.watches_friends(recipient) {
                continue;
            }
            let (payload, cut) = payload(&list);
            self.friends.stats.dropped_cut += cut as u64;
            if !local {
                self.friends.for_shards.push((recipient, payload));
                continue;
            }
            out.push(self.publish_friends(recipient, payload, now));
        }
        out
    }

    /// Makes this router shard `shard` of `shards` for friends events (see the
    /// module doc); 0 of 1 alone.
    pub fn set_friends_shard(&mut self, shard: u16, shards: u16) {
        self.config.friends.shard = shard;
        self.config.friends.shards = shards.max(1);
    }

    /// The messages the last [`Router::push_friends`] made for followers other
    /// shards own: (follower, payload), for the router role to send to each
    /// follower's shard.
    pub fn take_friends_for_shards(&mut self) -> Vec<(UserId, String)> {
        std::mem::take(&mut self.friends.for_shards)
    }

    /// Another shard's friends message for `recipient`, one of this router's
    /// users: published to their companion if they opted in (else dropped).
    pub fn push_friends_from_shard(
        &mut self,
        recipient: UserId,
        payload: String,
        now: Instant,
    ) -> Option<(Arc<Message>, Vec<Delivery>)> {
        self.channels
            .watches_friends(recipient)
            .then(|| self.publish_friends(recipient, payload, now))
    }

    /// Publishes `payload` to `recipient`'s friends companion.
    fn publish_friends(
        &mut self,
        recipient: UserId,
        payload: String,
        now: Instant,
    ) -> (Arc<Message>, Vec<Delivery>) {
        let name = wire::channel::friends_channel(recipient);
        let msg = Arc::new(Message::to_channel(&name, payload.into()));
        let keep = Keep::within(&self.config, &mut self.totals, &mut self.epochs, None);
        let mut deliveries = Vec::new();
        let (counts, _) = self
            .channels
            .publish(&name, &msg, keep, now, &mut |d| deliveries.push(d));
        self.deliveries += u64::from(counts.connections);
        self.friends.stats.messages += 1;
        (msg, deliveries)
    }

    /// What friends events cost and dropped, since start.
    pub fn friends_stats(&self) -> FriendsStats {
        self.friends.stats
    }
}

/// One recipient's message: the last change of each user wins; at most
/// [`MAX_CHANGES_PER_MESSAGE`] users (the newest changes kept), and how many were
/// left out.
fn payload(list: &[(UserId, bool)]) -> (String, usize) {
    // Last change per user, in the order of those last changes: walked from the
    // newest, each user kept once.
    let mut seen: std::collections::HashSet<UserId, IdHashBuilder> = Default::default();
    let mut last: Vec<(UserId, bool)> = Vec::with_capacity(list.len());
    for &(user, online) in list.iter().rev() {
        if seen.insert(user) {
            last.push((user, online));
        }
    }
    last.reverse();
    let cut = last.len().saturating_sub(MAX_CHANGES_PER_MESSAGE);
    let kept = &last[cut..];
    let mut json = String::from("{\"online\":[");
    write_ids(&mut json, kept.iter().filter(|c| c.1).map(|c| c.0));
    json.push_str("],\"offline\":[");
    write_ids(&mut json, kept.iter().filter(|c| !c.1).map(|c| c.0));
    json.push(']');
    if cut > 0 {
        json.push_str(",\"cut\":true");
    }
    json.push('}');
    (json, cut)
}

fn write_ids(json: &mut String, ids: impl Iterator<Item = UserId>) {
    for (i, id) in ids.enumerate() {
        if i > 0 {
            json.push(',');
        }
        // Writing to a String cannot fail.
        let _ = write!(json, "{id}");
    }
}

#[cfg(test)]
mod tests;
