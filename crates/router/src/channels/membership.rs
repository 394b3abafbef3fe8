//! Membership changes of named channels, as events (docs/protocol.md "Presence
//! events"): a user's first connection in a channel (`member_added`), their last
//! one leaving (`member_removed`), the first user arriving in a channel nobody was
//! announced in (`channel_occupied`) and the last announced one going
//! (`channel_vacated`). One event per user, never per connection.
//!
//! A user whose last connection leaves stays announced for the grace period
//! ([`PresenceConfig::grace`]): back within it (a reload, a reconnect through
//! another gateway) nothing is announced at all. The grace is checked by
//! [`Membership::expire`] from the router's tick, on the caller's clock. Only
//! users in their grace cost memory here: a channel counts them (`leaving`) so the
//! common first join looks nothing up.

use super::{Channel, Channels};
use crate::UserId;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default grace before a user whose last connection left is announced gone.
pub const DEFAULT_PRESENCE_GRACE: Duration = Duration::from_secs(5);

/// What changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    MemberAdded,
    MemberRemoved,
    ChannelOccupied,
    ChannelVacated,
}

impl EventKind {
    /// The event's name in payloads and NATS subjects.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::MemberAdded => "member_added",
            EventKind::MemberRemoved => "member_removed",
            EventKind::ChannelOccupied => "channel_occupied",
            EventKind::ChannelVacated => "channel_vacated",
        }
    }
}

/// One membership change of one channel (`user`: for `member_*` only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresenceEvent {
    pub kind: EventKind,
    /// The router's own name of the channel, shared (serialized as a string).
    pub channel: Arc<str>,
    pub user: Option<UserId>,
}

/// Which channels announce their membership, and the grace.
#[derive(Clone, Debug)]
pub struct PresenceConfig {
    /// Off, no event is made (and nothing kept for the grace).
    pub enabled: bool,
    /// How long a user whose last connection left is still announced.
    pub grace: Duration,
    /// Channels whose names start with one of these announce nothing
    /// (`--presence-off-prefix`: huge channels).
    pub off_prefixes: Vec<String>,
}

impl Default for PresenceConfig {
    fn default() -> Self {
        PresenceConfig {
            enabled: false,
            grace: DEFAULT_PRESENCE_GRACE,
            off_prefixes: Vec::new(),
        }
    }
}

/// Users in their grace and the events not yet taken.
#[derive(Debug, Default)]
pub(crate) struct Membership {
    pub(crate) config: PresenceConfig,
    /// (channel, user) in their grace → when their last connection left.
    leaving: HashMap<(Arc<str>, UserId), Instant>,
    /// The same, oldest first (entries of users back since are stale).
    queue: VecDeque<(Instant, Arc<str>, UserId)>,
    events: Vec<PresenceEvent>,
}

impl Membership {
    /// Whether `name` announces its membership: presence is on, it is not a
    /// presence or friends companion (whose subscribers are watchers, not
    /// members) and no
    /// off prefix names it.
    fn watched(&self, name: &str) -> bool {
        self.config.enabled
            && wire::channel::presence_of(name).is_none()
            && wire::channel::friends_of(name).is_none()
            && !self.config.off_prefixes.iter().any(|p| name.starts_with(p))
    }

    /// `user`'s first connection joined `channel` (already counted in its members).
    pub(super) fn first_join(&mut self, name: &Arc<str>, channel: &mut Channel, user: UserId) {
        if !self.watched(name) {
            return;
        }
        if channel.leaving > 0 && self.leaving.remove(&(name.clone(), user)).is_some() {
            // Back within the grace: never announced as gone.
            channel.leaving -= 1;
            return;
        }
        if channel.subs.users() == 1 && channel.leaving == 0 {
            self.push(EventKind::ChannelOccupied, name, None);
        }
        self.push(EventKind::MemberAdded, name, Some(user));
    }

    /// `user`'s last connection left `channel` (already gone from its members).
    pub(super) fn last_leave(
        &mut self,
        name: &Arc<str>,
        channel: &mut Channel,
        user: UserId,
        now: Instant,
    ) {
        if !self.watched(name) {
            return;
        }
        if self.config.grace.is_zero() {
            self.gone(name, channel, user);
            return;
        }
        channel.leaving += 1;
        self.leaving.insert((name.clone(), user), now);
        self.queue.push_back((now, name.clone(), user));
    }

    /// Announces users whose grace ran out. Returns the channels left with no
    /// connection once their last user in grace went (their idle ttl may start).
    pub(super) fn expire(
        &mut self,
        now: Instant,
        map: &mut HashMap<Arc<str>, Channel>,
    ) -> Vec<Arc<str>> {
        let mut emptied = Vec::new();
        while let Some((at, _, _)) = self.queue.front() {
            if now.saturating_duration_since(*at) < self.config.grace {
                break;
            }
            let (at, name, user) = self.queue.pop_front().expect("checked above");
            let key = (name, user);
            // Stale: the user came back (and maybe left again, a newer entry).
            if self.leaving.get(&key) != Some(&at) {
                continue;
            }
            self.leaving.remove(&key);
            let (name, user) = key;
            // A channel with users in grace is never expired, so it is there.
            if let Some(channel) = map.get_mut(&name) {
                channel.leaving -= 1;
                self.gone(&name, channel, user);
                if channel.leaving == 0 && channel.subs.is_empty() {
                    emptied.push(name);
                }
            }
        }
        emptied
    }

    /// Announces `user` gone from `channel` (and the channel vacated when nobody
    /// announced is left).
    fn gone(&mut self, name: &Arc<str>, channel: &Channel, user: UserId) {
        self.push(EventKind::MemberRemoved, name, Some(user));
        if channel.subs.users() == 0 && channel.leaving == 0 {
            self.push(EventKind::ChannelVacated, name, None);
        }
    }

    fn push(&mut self, kind: EventKind, name: &Arc<str>, user: Option<UserId>) {
        self.events.push(PresenceEvent {
            kind,
            channel: name.clone(),
            user,
        });
    }

    /// The events made since the last call, in order.
    pub(super) fn take(&mut self) -> Vec<PresenceEvent> {
        std::mem::take(&mut self.events)
    }

    /// Heap bytes held (an estimate).
    pub(super) fn heap_bytes(&self) -> usize {
        self.leaving.capacity() * (std::mem::size_of::<((Arc<str>, UserId), Instant)>() + 1)
            + self.queue.capacity() * std::mem::size_of::<(Instant, Arc<str>, UserId)>()
    }
}

impl Channels {
    /// Announces users whose grace ran out (see [`Membership`]); a channel they
    /// leave without a connection starts its idle ttl again from `now`.
    pub(crate) fn expire_grace(&mut self, now: Instant) {
        for name in self.membership.expire(now, &mut self.map) {
            if let Some(channel) = self.map.get(&name) {
                self.idle.again(channel, name, now);
            }
        }
    }

    /// Users in their grace in some channel: announced, not yet gone (their
    /// presence info is kept for the `member_removed` that will name them).
    pub(crate) fn users_in_grace(&self) -> std::collections::HashSet<UserId> {
        self.membership.leaving.keys().map(|(_, u)| *u).collect()
    }

    /// Which channels announce their membership, and the grace.
    pub(crate) fn set_presence(&mut self, config: PresenceConfig) {
        self.membership.config = config;
    }

    /// The membership changes made since the last call, in order.
    pub(crate) fn take_events(&mut self) -> Vec<PresenceEvent> {
        self.membership.take()
    }
}
