//! Named channels: subjects a client chooses by name, many per connection (beside
//! the user it is logged in as). Per channel the router keeps the connections
//! subscribed, the users among them with their connection counts (exact `users` in
//! a publish's answer, and the membership presence reads), and one history ring
//! with its epoch: one copy of a message however many subscribers it has.
//!
//! A channel exists while it has a subscriber or kept history: a publish to a
//! channel nobody holds is kept (a page can load it with a history read, then
//! subscribe from there), and a channel left without subscribers is forgotten
//! `history_ttl` after its last one left or its last publish, whichever is later.
//!
//! Keyed by the name itself, so two names never share anything in memory. Two
//! places need a number for a name, and use [`key`]: which router shard owns the
//! channel, and the key of its rows in a durable history log (its messages carry
//! the name, which a restore checks, so a key two names share costs one of them
//! its durable history at a restart, reported as a gap, never a delivery). Rules
//! for names are the wire's (`wire::channel`); the router takes any string.
//!
//! A user's subscriptions across channels are counted (`per_user`) and a join
//! past `RouterConfig::max_subscriptions_per_user` is refused ([`Refusal`]).
//! Connections without a user are bounded per connection only (by the gateway).

/// A channel's number: FNV-1a of its name, the same in every process and version
/// that share a wire format or a history log.
pub fn key(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use crate::budget::HistoryTotals;
use crate::hash::IdHashBuilder;
use crate::history::{Epochs, Journal, Ring};
use crate::{ConnRef, Delivery, HistoryRead, Message, PublishCounts, UserId};
use blocks::Blocks;
pub use by_prefix::{Occupied, MAX_LISTED};
use membership::Membership;
pub use membership::{EventKind, PresenceConfig, PresenceEvent, DEFAULT_PRESENCE_GRACE};
use per_user::PerUser;
use serde::{Deserialize, Serialize};
use subscribers::Subscribers;

mod blocks;
mod by_prefix;
mod kept;
mod membership;
pub mod mirror;
mod per_user;
mod subscribers;

/// Why a join of one channel was refused (the connection keeps its other streams).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// The connection's user holds `max_subscriptions_per_user` channel
    /// subscriptions already (on this router: with router shards, on this shard).
    UserLimit,
}

impl Refusal {
    /// What the client is told.
    pub fn text(self) -> &'static str {
        match self {
            Refusal::UserLimit => {
                "too many channel subscriptions for this user (--max-subscriptions-per-user)"
            }
        }
    }
}

/// One channel's state.
#[derive(Debug)]
struct Channel {
    /// The subscribed connections, each with its user: who a publish reaches and
    /// who is present.
    subs: Subscribers,
    /// Users gone from the members still announced for their grace (see
    /// [`membership`]); the channel is not forgotten while there are any.
    leaving: u32,
    /// Its ring's epoch, fixed when the channel is made.
    epoch: u32,
    /// Its idle period's mark while it has no subscriber (0: it has some): the
    /// entry of the idle queue ([`kept::Idle`]) with this mark is the one its ttl
    /// runs from.
    /// Four bytes where an `Option<Instant>` took 16: with the mirrors apart, a
    /// slot of the channels' map is 64 bytes, not 80 (3,000 rooms: 4 B a
    /// connection of 15,000).
    idle: u32,
    /// Its history, made at its first message: a channel nobody has published to
    /// keeps 8 bytes for it, not a ring's 64 (3,000 quiet rooms in a map at
    /// three-quarters load: 15 B a connection of 15,000 in one room each).
    ring: Option<Box<Ring>>,
}

impl Channel {
    fn new(epoch: u32) -> Channel {
        Channel {
            subs: Subscribers::default(),
            leaving: 0,
            epoch,
            idle: 0,
            ring: None,
        }
    }

    /// Its ring, made now if it has none.
    fn ring_mut(&mut self) -> &mut Ring {
        let epoch = self.epoch;
        self.ring.get_or_insert_with(|| Box::new(Ring::new(epoch)))
    }

    /// What its ring gives `f` (an empty ring of its epoch while it has none).
    fn read_ring<R>(&self, f: impl FnOnce(&Ring) -> R) -> R {
        match &self.ring {
            Some(ring) => f(ring),
            None => f(&Ring::new(self.epoch)),
        }
    }
}

/// Who is in a channel: its members (user, subscribed connections; in no order,
/// and only when asked for), how many they are, and all its subscribed
/// connections (those without a user too).
#[derive(Debug, Default)]
pub struct Present {
    pub members: Vec<(UserId, u32)>,
    pub users: usize,
    pub connections: usize,
}

/// A channel's position: its ring's epoch and newest sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Position {
    pub epoch: u32,
    pub seq: u64,
}

/// Every channel of one router.
#[derive(Debug, Default)]
pub struct Channels {
    /// Keyed by the name, shared (`Arc`) with the queues that name a channel (idle,
    /// users in their grace, events): a mass leave allocates no copy of a name.
    map: HashMap<Arc<str>, Channel>,
    /// Channels that may have outlived their ttl ([`kept::Idle`]).
    idle: kept::Idle,
    /// The members of channels whose list was asked, mirrored for reads without
    /// the router lock ([`mirror`]): few channels, so apart from the map.
    mirrors: HashMap<Arc<str>, Arc<mirror::Mirror>>,
    subscriptions: u64,
    /// Each user's subscriptions across channels (what the per-user limit reads).
    per_user: PerUser,
    /// Membership changes as events, with the grace.
    membership: Membership,
    /// Users with a connection on their friends companion
    /// (`wire::channel::friends_channel`): whom a friend's `online`/`offline` is
    /// pushed to. A login checks its followers here, one lookup each.
    watchers: HashSet<UserId, IdHashBuilder>,
    /// Where small channels keep their subscribers.
    blocks: Blocks,
}

/// What a publish keeps its message within: the per-ring bounds (the router's
/// config), the totals of all rings, and where new rings' epochs come from.
pub(crate) struct Keep<'a> {
    pub capacity: usize,
    pub max_bytes: usize,
    pub totals: &'a mut HistoryTotals,
    pub epochs: &'a mut Epochs,
    /// Where a durable copy's changes go (`None`: not wanted).
    pub journal: Option<&'a mut Vec<Journal>>,
}

impl<'a> Keep<'a> {
    /// Within `config`'s per-ring bounds (`history`, `history_bytes`).
    pub(crate) fn within(
        config: &crate::RouterConfig,
        totals: &'a mut HistoryTotals,
        epochs: &'a mut Epochs,
        journal: Option<&'a mut Vec<Journal>>,
    ) -> Keep<'a> {
        Keep {
            capacity: config.history,
            max_bytes: config.history_bytes,
            totals,
            epochs,
            journal,
        }
    }
}

impl Channels {
    /// Subscribes `conn` (of `user`, if it has one) to `name` and reads what a
    /// client at `since` (`(epoch, seq)`; `None`: from now) missed, in one step:
    /// nothing is lost or repeated between the read and the deliveries that follow.
    /// Subscribing twice is harmless. A user holding `limit` subscriptions already
    /// is refused a new one (and nothing is created for it).
    pub(crate) fn join(
        &mut self,
        name: impl AsRef<str> + Into<Arc<str>>,
        conn: ConnRef,
        user: Option<UserId>,
        since: Option<(Option<u32>, u64)>,
        limit: u32,
        epochs: &mut Epochs,
    ) -> Result<HistoryRead, Refusal> {
        // Only a user at the limit pays for the scan: joining twice is not refused.
        let at_limit = user.is_some_and(|u| self.per_user.of(u) >= limit);
        if at_limit
            && !self
                .map
                .get(name.as_ref())
                .is_some_and(|c| c.subs.contains(&self.blocks, conn))
        {
            return Err(Refusal::UserLimit);
        }
        let (name, channel) = Self::entry(&mut self.map, name, epochs);
        channel.idle = 0;
        if let Some(n) = channel.subs.insert(&mut self.blocks, conn, user) {
            self.subscriptions += 1;
            if channel.subs.len() == 1 {
                if let Some(u) = wire::channel::friends_of(&name) {
                    self.watchers.insert(u);
                }
            }
            if let Some(user) = user {
                if n == 1 {
                    self.membership.first_join(&name, channel, user);
                }
                self.per_user.add(user, 1);
            }
            if let Some(m) = self.mirrors.get(&name) {
                m.set(user, n, channel.subs.len());
            }
        }
        Ok(channel.read_ring(|ring| kept::read(ring, since, usize::MAX)))
    }

    /// Whether `user` has a connection on their friends companion.
    pub fn watches_friends(&self, user: UserId) -> bool {
        self.watchers.contains(&user)
    }

    /// Whether anyone has a connection on their friends companion.
    pub fn has_friends_watchers(&self) -> bool {
        !self.watchers.is_empty()
    }

    /// Unsubscribes `conn` from `name` (as the user it joined as); true if it was
    /// subscribed.
    pub(crate) fn leave(&mut self, name: &str, conn: ConnRef, now: Instant) -> bool {
        let Some(name) = self.name_of(name) else {
            return false;
        };
        let channel = self.map.get_mut(&name).expect("named above");
        let Some((user, left)) = channel.subs.remove(&mut self.blocks, conn) else {
            return false;
        };
        self.subscriptions -= 1;
        if let Some(user) = user {
            if left == 0 {
                self.membership.last_leave(&name, channel, user, now);
            }
            self.per_user.sub(user, 1);
        }
        if let Some(m) = self.mirrors.get(&name) {
            m.set(user, left, channel.subs.len());
        }
        if channel.subs.is_empty() {
            if let Some(u) = wire::channel::friends_of(&name) {
                self.watchers.remove(&u);
            }
            self.idle.start(channel, name, now);
        }
        true
    }

    /// Unsubscribes every connection `gone` says is gone (a gateway process that
    /// died), from every channel; returns how many subscriptions went. O(all
    /// subscriptions): rare, never per message. A gateway that dies cannot say
    /// which user held which connection: each channel's entries say (the users
    /// table cannot, with router shards), and each gone connection's user loses
    /// one connection here and in their count across channels.
    pub(crate) fn leave_where(&mut self, gone: &impl Fn(ConnRef) -> bool, now: Instant) -> u64 {
        let mut removed = 0;
        for (name, channel) in self.map.iter_mut() {
            let per_user = &mut self.per_user;
            // Users whose last connection here went (announced after the grace).
            let mut left = Vec::new();
            let went = channel
                .subs
                .remove_where(&mut self.blocks, gone, &mut |user, n| {
                    if let Some(user) = user {
                        per_user.sub(user, 1);
                        if n == 0 {
                            left.push(user);
                        }
                    }
                });
            if went == 0 {
                continue;
            }
            if let Some(m) = self.mirrors.get(name) {
                m.reset(channel.subs.members(&self.blocks), channel.subs.len());
            }
            removed += went;
            for user in left {
                self.membership.last_leave(name, channel, user, now);
            }
            if channel.subs.is_empty() {
                self.idle.start(channel, name.clone(), now);
                if let Some(u) = wire::channel::friends_of(name) {
                    self.watchers.remove(&u);
                }
            }
        }
        self.subscriptions -= removed;
        removed
    }

    /// Publishes `msg` to channel `name`: its next number, kept in its ring, one
    /// delivery per subscribed connection. Returns the exact reach and the
    /// message's position.
    pub(crate) fn publish(
        &mut self,
        name: &str,
        msg: &Arc<Message>,
        keep: Keep<'_>,
        now: Instant,
        deliver: &mut impl FnMut(Delivery),
    ) -> (PublishCounts, Position) {
        let fresh = !self.map.contains_key(name);
        let (held, channel) = Self::entry(&mut self.map, name, keep.epochs);
        let ring = channel.ring_mut();
        let pushed = ring.push(msg, keep.capacity, keep.max_bytes);
        keep.totals.record(&pushed);
        if pushed.stored {
            keep.totals.trim(ring);
        }
        let position = Position {
            epoch: ring.epoch(),
            seq: pushed.seq,
        };
        if let Some(journal) = keep.journal {
            journal.push(match pushed.stored {
                true => Journal::Kept {
                    user: key(name),
                    epoch: position.epoch,
                    seq: position.seq,
                    msg: Arc::clone(msg),
                },
                false => Journal::Forgot(key(name)),
            });
        }
        if channel.subs.is_empty() && (fresh || channel.idle != 0) {
            // Kept for a page that reads it later; its ttl starts again.
            self.idle.start(channel, held, now);
        }
        channel.subs.for_each(&self.blocks, |conn| {
            deliver(Delivery {
                conn,
                seq: position.seq,
                epoch: position.epoch,
            })
        });
        let counts = PublishCounts {
            connections: channel.subs.len() as u32,
            users: channel.subs.users() as u32,
        };
        (counts, position)
    }

    /// Subscribed connections of `name` (for tests and presence).
    pub fn connections(&self, name: &str) -> usize {
        self.map.get(name).map_or(0, |c| c.subs.len())
    }

    /// Channel subscriptions `user`'s connections hold, all channels together.
    pub fn subscriptions_of(&self, user: UserId) -> u32 {
        self.per_user.of(user)
    }

    /// Users holding a channel subscription.
    pub fn subscribed_users(&self) -> usize {
        self.per_user.len()
    }

    /// Users with a subscribed connection in `name`, with their connection counts.
    pub fn members(&self, name: &str) -> Vec<(UserId, u32)> {
        let mut out = self
            .map
            .get(name)
            .map(|c| c.subs.members(&self.blocks))
            .unwrap_or_default();
        out.sort_unstable();
        out
    }

    /// Channel `name`'s presence (see [`Present`]); `None` while it does not
    /// exist. What presence queries read (`Router::presence`).
    pub fn presence_of(&self, name: &str, list: bool) -> Option<Present> {
        self.map.get(name).map(|c| Present {
            members: match list {
                true => c.subs.members(&self.blocks),
                false => Vec::new(),
            },
            users: c.subs.users(),
            connections: c.subs.len(),
        })
    }

    /// Channels held now.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Connection subscriptions across all channels.
    pub fn subscriptions(&self) -> u64 {
        self.subscriptions
    }

    /// Heap bytes held (an estimate): names, subscribers, rings and the per-user
    /// counts.
    pub fn heap_bytes(&self) -> usize {
        let slot = std::mem::size_of::<(Arc<str>, Channel)>() + 1;
        self.map.capacity() * slot
            + self
                .map
                .iter()
                .map(|(name, c)| {
                    name.len()
                        + 16
                        + c.subs.heap_bytes()
                        + c.ring
                            .as_ref()
                            .map_or(0, |r| std::mem::size_of::<Ring>() + r.heap_bytes())
                })
                .sum::<usize>()
            + self.idle.heap_bytes()
            + self.mirrors.capacity() * (std::mem::size_of::<(Arc<str>, Arc<mirror::Mirror>)>() + 1)
            + self.mirrors.values().map(|m| m.heap_bytes()).sum::<usize>()
            + self.per_user.heap_bytes()
            + self.membership.heap_bytes()
            + self.watchers.capacity() * (std::mem::size_of::<UserId>() + 1)
            + self.blocks.heap_bytes()
    }

    /// The map's own name for channel `name` (a count more on it, no copy).
    fn name_of(&self, name: &str) -> Option<Arc<str>> {
        self.map.get_key_value(name).map(|(k, _)| k.clone())
    }

    /// Channel `name`, made now if it did not exist, with the map's name for it.
    /// A new channel keeps the name it is given: a join from a gateway of this
    /// process gives the gateway's own (one allocation per name for both).
    fn entry<'m>(
        map: &'m mut HashMap<Arc<str>, Channel>,
        name: impl AsRef<str> + Into<Arc<str>>,
        epochs: &mut Epochs,
    ) -> (Arc<str>, &'m mut Channel) {
        let name = match map.get_key_value(name.as_ref()) {
            Some((k, _)) => k.clone(),
            None => {
                let k: Arc<str> = name.into();
                map.insert(k.clone(), Channel::new(epochs.next()));
                k
            }
        };
        let channel = map.get_mut(&name).expect("inserted above");
        (name, channel)
    }
}

#[cfg(test)]
mod membership_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod user_limit_tests;
