//! `router`: presence (user → connections), the subscription index (subject →
//! subscribers), fan-out planning and per-user history rings.
//!
//! It is pure data structures: no IO, no threads, no sockets, no clock. Time is a
//! parameter (`now`; expiry by age runs only in [`Router::handle_tick`], on the caller's clock)
//! and deliveries are handed to a caller-supplied closure as [`Delivery`]
//! (connection, sequence number, epoch), so the caller decides how they reach
//! sockets.
//!
//! Layout:
//! - [`router`]: [`Router`], the façade the caller drives (`handle_*` inputs), one
//!   publish path: [`Router::handle_publish`] with whom it reaches as data
//!   ([`Reach`]).
//! - [`publish`]: one publish's fan-out, user by user: sequence number, history,
//!   deliveries.
//! - [`presence`]: the compact per-user state (connections + optional history ring);
//!   O(1) login/logout however many connections a user has.
//! - [`history`]: the bounded ring of recent messages per user (SPEC B6), with its
//!   epoch (issued per router, see `Epochs`) and byte count.
//! - [`budget`]: the bound on all rings together (offline users' rings first,
//!   longest offline first, then the oldest of the ring being written).
//! - [`index`]: [`SubscriptionIndex`], CSR stripes (~16k edges each), each with a small
//!   delta for live changes that it folds back on its own.
//! - [`users`]: [`users::UserMap`], the dense presence table (user → state).
//! - [`channels`]: named channels: subscribed connections, members and one
//!   history ring per channel.
//! - `router::friends`: friends online: `online`/`offline` of the users a user
//!   follows, pushed to their friends companion once per tick, bounded.
//! - `router::online`: presence queries — who is in a channel ([`Presence`]), is a
//!   user online, which of the subjects a user follows are online.
//! - [`hash`]: a keyed, fast hasher for `u64` ids.
//!
//! Glossary: a *subject* is a u64 id (a user is a subject, so is a room); a
//! *subscription* is an edge subscriber → subject; a *publish* to S reaches every
//! connection of S and of every subscriber of S; a *delivery* is one message to one
//! connection.

pub mod budget;
pub mod channels;
pub mod hash;
pub mod history;
pub mod index;
pub mod presence;
pub mod publish;
pub mod router;
pub mod users;

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

pub use channels::mirror::Mirror;
pub use channels::{EventKind, PresenceConfig, PresenceEvent, Refusal};
pub use index::{IndexBuilder, SubscriptionIndex};
pub use publish::Reach;
pub use router::friends::{
    FriendsConfig, FriendsStats, DEFAULT_FRIENDS_MAX_FANOUT, MAX_CHANGES_PER_MESSAGE,
    MAX_MESSAGES_PER_TICK,
};
pub use router::online::{Member, Presence, PresenceCopy, PresenceOf};
pub use router::Router;

/// A user id; a user is a subject.
pub type UserId = u64;
/// A subject id (a user or a room).
pub type SubjectId = u64;

/// A connection as the router sees it: the gateway event loop holding it and that
/// loop's token for it (slab index + generation). Opaque to the router.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct ConnRef {
    pub loop_id: u16,
    pub token: u32,
}

/// One published message; shared (`Arc`) by every delivery and every history ring.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// The subject published to; 0 for a channel's message.
    pub subject: SubjectId,
    /// The channel published to, if it went to a channel by name (then its
    /// numbers are the channel's, see [`channels`]).
    pub channel: Option<Box<str>>,
    pub payload: bytes::Bytes,
}

impl Message {
    /// A message to `subject` (a user and their followers).
    pub fn to_subject(subject: SubjectId, payload: bytes::Bytes) -> Message {
        Message {
            subject,
            channel: None,
            payload,
        }
    }

    /// A message to channel `name`.
    pub fn to_channel(name: &str, payload: bytes::Bytes) -> Message {
        Message {
            subject: 0,
            channel: Some(name.into()),
            payload,
        }
    }
}

/// Default number of messages kept per user (SPEC B6).
pub const DEFAULT_HISTORY: usize = 64;
/// Default time a user's history outlives their last connection.
pub const DEFAULT_HISTORY_TTL: Duration = Duration::from_secs(60);
/// Default bound on one user's history in charged bytes (payload + 16 B per
/// message): what one long-poll reply or resume can carry at most.
pub const DEFAULT_HISTORY_BYTES: usize = 1 << 20;
/// Default bound on all users' history together, in charged bytes. A broadcast's
/// payload is shared in memory but charged once per recipient, so this is an
/// upper bound on the memory history holds.
pub const DEFAULT_HISTORY_TOTAL_BYTES: usize = 512 << 20;
/// Default bound on one user's channel subscriptions, all their connections
/// together: 16 connections (tabs, devices) at the default 64 channels each.
pub const DEFAULT_MAX_SUBSCRIPTIONS_PER_USER: u32 = 1024;
/// The highest `max_subscriptions_per_user`: a user's count is kept in 16 bits
/// (`channels/per_user.rs`: 2 bytes a user subscribed, where presence's budget is
/// 16 B a membership).
pub const MAX_SUBSCRIPTIONS_PER_USER: u32 = u16::MAX as u32;
/// Default bound on the users one presence list answer names.
pub const DEFAULT_MAX_PRESENCE_MEMBERS: usize = 1000;

/// Router settings.
#[derive(Clone, Debug)]
pub struct RouterConfig {
    /// Messages kept per user (0 keeps only the sequence number).
    pub history: usize,
    /// How long a user's history outlives their last connection.
    pub history_ttl: Duration,
    /// Charged bytes kept per user (`--history-bytes`); capped at `u32::MAX`.
    pub history_bytes: usize,
    /// Charged bytes kept for all users together; the oldest messages go first.
    pub history_total_bytes: usize,
    /// Seeds the epochs of history rings. Give each router start a different seed
    /// (the default is random per process) so a restarted server is detectable.
    pub epoch_seed: u64,
    /// Collect every history change as a [`history::Journal`] for a durable copy
    /// (`--history-store`); off, the router keeps nothing extra.
    pub journal: bool,
    /// Channel subscriptions one user's connections may hold together
    /// (`--max-subscriptions-per-user`); a join past it is refused.
    pub max_subscriptions_per_user: u32,
    /// Membership events of named channels (`--presence-grace`,
    /// `--presence-off-prefix`); off by default (see [`Router::take_presence_events`]).
    pub presence: PresenceConfig,
    /// Users one presence list names at most (`--max-presence-members`); the
    /// counts beside it stay exact.
    pub max_presence_members: usize,
    /// Friends online events (`--friends-max-fanout`), with the presence grace.
    pub friends: FriendsConfig,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            history: DEFAULT_HISTORY,
            history_ttl: DEFAULT_HISTORY_TTL,
            history_bytes: DEFAULT_HISTORY_BYTES,
            history_total_bytes: DEFAULT_HISTORY_TOTAL_BYTES,
            epoch_seed: random_seed(),
            journal: false,
            max_subscriptions_per_user: DEFAULT_MAX_SUBSCRIPTIONS_PER_USER,
            presence: PresenceConfig::default(),
            max_presence_members: DEFAULT_MAX_PRESENCE_MEMBERS,
            friends: FriendsConfig::default(),
        }
    }
}

/// A per-call random u64 without IO: std's `RandomState` is seeded by the OS once
/// per process and perturbed per instance.
pub fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0x0065_706f_6368_u64)
}

/// One message to one connection: the recipient user's sequence number and the
/// epoch of their history (an SSE id is `<epoch>-<seq>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub conn: ConnRef,
    pub seq: u64,
    pub epoch: u32,
}

/// Exact reach of one publish.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PublishCounts {
    /// Connections the message was handed to.
    pub connections: u32,
    /// Distinct users with at least one connection handed the message.
    pub users: u32,
}

/// Result of [`Router::history_read`]: what a resuming client gets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRead {
    /// `(seq, message)` to send, oldest first: those after the client's position
    /// when it is recoverable, else everything still kept.
    pub messages: Vec<(u64, Arc<Message>)>,
    /// The user's current sequence number (0 if the router holds no state for
    /// them). Answer with this, not the client's `since`: a client ahead of it
    /// (state lost) must move back to the router's numbers.
    pub last: u64,
    /// True when `messages` is not everything the client missed: messages were
    /// dropped from the ring, the client's epoch is not the current one (restart,
    /// or history dropped after its ttl), or its `since` is ahead of `last`.
    pub gap: bool,
    /// The current epoch of the user's history; `None` while they have none.
    pub epoch: Option<u32>,
}

impl HistoryRead {
    /// Centrifugo's word for `!gap`: the client's position was recovered in full.
    pub fn recovered(&self) -> bool {
        !self.gap
    }
}

/// Counters for `/stats` and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouterStats {
    pub users_online: u64,
    pub connections: u64,
    pub subscriptions: u64,
    pub messages_in: u64,
    pub deliveries: u64,
    pub users_with_history: u64,
    /// Charged bytes of all history rings.
    pub history_bytes: u64,
    /// Messages kept in all history rings.
    pub history_messages: u64,
    /// Messages evicted to keep all rings within `history_total_bytes`.
    pub history_evicted: u64,
    /// Offline users' rings dropped (before their ttl) for that bound.
    pub history_rings_evicted: u64,
    /// Named channels held (with a subscriber or kept history).
    pub channels: u64,
    /// Connection subscriptions to named channels.
    pub channel_subscriptions: u64,
}
