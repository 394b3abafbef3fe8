//! `router`: presence (user → connections), the subscription index (subject →
//! subscribers), fan-out planning and per-user history rings.
//!
//! It is pure data structures: no IO, no threads, no sockets, no clock. Time is a
//! parameter (`now`) and deliveries are handed to a caller-supplied closure as
//! `(ConnRef, seq)` pairs, so the gateway decides how bytes reach sockets.
//!
//! Layout:
//! - [`router`]: [`Router`], the façade the gateway drives (`handle_*` inputs).
//! - [`presence`]: the compact per-user state (connections + optional history ring).
//! - [`history`]: the bounded ring of recent messages per user (SPEC B6).
//! - [`index`]: [`SubscriptionIndex`], CSR shards (~16k edges each), each with a small
//!   delta for live changes that it folds back on its own.
//! - [`hash`]: a keyed, fast hasher for `u64` ids.
//!
//! Glossary: a *subject* is a u64 id (a user is a subject, so is a room); a
//! *subscription* is an edge subscriber → subject; a *publish* to S reaches every
//! connection of S and of every subscriber of S; a *delivery* is one message to one
//! connection.

pub mod hash;
pub mod history;
pub mod index;
pub mod presence;
pub mod router;

use std::sync::Arc;
use std::time::Duration;

pub use index::{IndexBuilder, SubscriptionIndex};
pub use router::Router;

/// A user id; a user is a subject.
pub type UserId = u64;
/// A subject id (a user or a room).
pub type SubjectId = u64;

/// A connection as the router sees it: the gateway event loop holding it and that
/// loop's token for it (slab index + generation). Opaque to the router.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ConnRef {
    pub loop_id: u16,
    pub token: u32,
}

/// One published message; shared (`Arc`) by every delivery and every history ring.
#[derive(Debug)]
pub struct Message {
    pub subject: SubjectId,
    pub payload: bytes::Bytes,
}

/// Default number of messages kept per user (SPEC B6).
pub const DEFAULT_HISTORY: usize = 64;
/// Default time a user's history outlives their last connection.
pub const DEFAULT_HISTORY_TTL: Duration = Duration::from_secs(60);

/// Router settings.
#[derive(Clone, Debug)]
pub struct RouterConfig {
    /// Messages kept per user (0 keeps only the sequence number).
    pub history: usize,
    /// How long a user's history outlives their last connection.
    pub history_ttl: Duration,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            history: DEFAULT_HISTORY,
            history_ttl: DEFAULT_HISTORY_TTL,
        }
    }
}

/// Exact reach of one publish.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PublishCounts {
    /// Connections the message was handed to.
    pub connections: u32,
    /// Distinct users with at least one connection handed the message.
    pub users: u32,
}

/// Result of [`Router::history_since`].
#[derive(Clone, Debug, Default)]
pub struct HistoryRead {
    /// `(seq, message)` with `seq > since`, oldest first.
    pub messages: Vec<(u64, Arc<Message>)>,
    /// The user's current sequence number (0 if the router holds no state for them).
    pub last: u64,
    /// True when messages after `since` were lost: dropped from the ring, or the
    /// user's state was forgotten (`since > last`).
    pub gap: bool,
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
}
