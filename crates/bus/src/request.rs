//! What a gateway asks of the router side, and what it gets back. Both are plain
//! data with serde derives: they cross NATS as they are (`cluster::codec`).

use bytes::Bytes;
use router::{HistoryRead, Presence, PresenceOf, Refusal};
use serde::{Deserialize, Serialize};

/// A request from one connection (see [`crate::Bus::call`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The connection is now `user`'s (SPEC B1). With `since`, the reply carries the
    /// user's history after it, read in the same step as the login (SPEC B6); without,
    /// just the user's current sequence number. Logging in twice is harmless.
    /// `epoch` is the client's epoch for `since` when it knows one (`<epoch>-<seq>`).
    Login {
        user: u64,
        since: Option<u64>,
        epoch: Option<u32>,
    },
    /// The connection no longer belongs to `user` (it closed or changed user).
    Logout { user: u64 },
    /// Subscribes the connection to named channels, each read from its own position
    /// in the same step (nothing missed, nothing twice); with `login`, logs it in as
    /// `user` first, as `Login` does (since/epoch are then the user's). `user` is
    /// the connection's user (counted among the channels' members), if it has one.
    /// `info`: the user's presence info (the token's `info` claim, compact JSON),
    /// shown beside them in presence lists. The reply is [`Reply::Joined`].
    Join {
        user: Option<u64>,
        login: bool,
        since: Option<u64>,
        epoch: Option<u32>,
        channels: Vec<ChannelJoin>,
        info: Option<String>,
    },
    /// Unsubscribes the connection from `channels` (the router knows the user
    /// each subscription joined as).
    Leave { channels: Vec<String> },
    /// One message to the connections subscribed to channel `channel`.
    PublishChannel { channel: String, payload: Bytes },
    /// Several channel messages (`POST /pub` lines naming channels), each in its
    /// channel's order; the reply sums their reach.
    PublishChannels { items: Vec<(String, Bytes)> },
    /// What channel `channel` keeps after `since` (`None`: its newest), at most
    /// `limit` messages.
    ChannelHistory {
        channel: String,
        since: Option<u64>,
        epoch: Option<u32>,
        limit: u32,
    },
    /// One message to `subject`'s connections and its subscribers' (SPEC B2, C1).
    Publish { subject: u64, payload: Bytes },
    /// Several publishes in order (SPEC C2); the reply sums their reach.
    /// `parallel` (`POST /pub?parallel=1`): the items are independent, so with
    /// router shards each shard's part goes at once and their order across shards
    /// is not kept (one process keeps it anyway: it costs nothing there).
    PublishBatch {
        items: Vec<(u64, Bytes)>,
        parallel: bool,
    },
    /// Adds (`add`) or removes durable edges `(subscriber, subject)` (SPEC B3).
    ChangeSubscriptions { edges: Vec<(u64, u64)>, add: bool },
    /// `user`'s history after `since`, without logging in.
    ReadHistory { user: u64, since: u64 },
    /// Subscribers of `subject`, sorted.
    Subscribers { subject: u64 },
    /// Subjects `subscriber` follows, sorted.
    Subscriptions { subscriber: u64 },
    /// Who is present in a channel, or whether a user is online (`of`): with
    /// `list`, the users with their connection counts (bounded), else the counts
    /// alone. The reply is [`Reply::Presence`].
    Presence { of: PresenceOf, list: bool },
    /// Which of the subjects `user` follows are online now ([`Reply::Online`]).
    Online { user: u64 },
    /// The occupied channels whose names start with `prefix` ([`Reply::Occupied`];
    /// Pusher's channel list). With router shards every shard answers its own.
    Occupied { prefix: String },
    /// The router's counters.
    Stats,
}

impl Request {
    /// What kind of call this is, for the caller to remember while it waits.
    pub fn call(&self) -> Call {
        match self {
            Request::Login { .. } => Call::Login,
            Request::Logout { .. } => Call::Logout,
            Request::Join { .. } => Call::Join,
            Request::Leave { .. } => Call::Leave,
            Request::PublishChannel { .. } => Call::Publish,
            Request::PublishChannels { .. } => Call::PublishBatch,
            Request::ChannelHistory { .. } => Call::ReadHistory,
            Request::Publish { .. } => Call::Publish,
            Request::PublishBatch { .. } => Call::PublishBatch,
            Request::ChangeSubscriptions { add: true, .. } => Call::Subscribe,
            Request::ChangeSubscriptions { add: false, .. } => Call::Unsubscribe,
            Request::ReadHistory { .. } => Call::ReadHistory,
            Request::Subscribers { .. } => Call::Subscribers,
            Request::Subscriptions { .. } => Call::Subscriptions,
            Request::Presence { list: true, .. } => Call::Presence,
            Request::Presence { list: false, .. } => Call::PresenceStats,
            Request::Online { .. } => Call::Online,
            Request::Occupied { .. } => Call::Occupied,
            Request::Stats => Call::Stats,
        }
    }
}

/// The kind of a [`Request`], one byte: what a connection waiting for a reply keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Login,
    Logout,
    Join,
    Leave,
    Publish,
    PublishBatch,
    Subscribe,
    Unsubscribe,
    ReadHistory,
    Subscribers,
    Subscriptions,
    Presence,
    PresenceStats,
    Online,
    Occupied,
    Stats,
}

impl Call {
    /// A call the router acts on (publishes, subscription changes): one left
    /// unanswered may still have been done, so it must not be repeated blindly.
    pub fn acts(self) -> bool {
        matches!(
            self,
            Call::Publish | Call::PublishBatch | Call::Subscribe | Call::Unsubscribe
        )
    }
}

/// One channel of a [`Request::Join`] and where its client resumes (as `Login`'s
/// `since` and `epoch`; no `since`: from now).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelJoin {
    /// Shared with the gateway's table of held names: a router in the same
    /// process keeps this allocation as its channel's name, not a copy.
    pub name: std::sync::Arc<str>,
    pub since: Option<u64>,
    pub epoch: Option<u32>,
}

/// The answer to a [`Request`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    /// `Login` and `ReadHistory`: messages after `since` (none without one), the
    /// user's current sequence number and whether some were lost.
    History(HistoryRead),
    /// `Logout`, `Leave`: nothing to say.
    Done,
    /// `Join`: the user's history read (with `login`), and each channel's by name
    /// (in the request's order from one router; router shards each answer theirs).
    /// A channel in `refused` was not joined, for the reason given; the others were.
    Joined {
        login: Option<HistoryRead>,
        channels: Vec<(String, HistoryRead)>,
        refused: Vec<(String, Refusal)>,
    },
    /// `Publish` / `PublishBatch`: messages accepted and their exact reach, summed.
    Published {
        messages: u64,
        connections: u64,
        users: u64,
    },
    /// `Publish` / `PublishBatch` with durable history whose write failed: the
    /// messages reached the counted connections, but a restart would not replay
    /// them. The client gets a 503 saying so (a retry delivers them again).
    NotStored {
        messages: u64,
        connections: u64,
        users: u64,
        error: String,
    },
    /// `ChangeSubscriptions`: edges in the request and how many changed (new when
    /// adding, existing when removing).
    Changed { edges: u64, changed: u64 },
    /// `Subscribers` / `Subscriptions`.
    Ids(Vec<u64>),
    /// `Presence`: what was asked and the answer.
    Presence { of: PresenceOf, presence: Presence },
    /// `Online`: the subjects `user` follows that are online, sorted.
    Online { user: u64, online: Vec<u64> },
    /// `Occupied`: the channels, sorted by name (each router at most
    /// `router::channels::MAX_LISTED`).
    Occupied(Vec<router::channels::Occupied>),
    /// `Stats`: counters as one JSON object (the router's, and whatever the
    /// answering side adds: a gateway answers `/stats` with its own counters too).
    /// Crosses NATS as JSON text (`json_text`).
    Stats(#[serde(with = "json_text")] serde_json::Value),
    /// The router side could not do it (the store failed, the broker is away): the
    /// client gets a 503 with this text and may retry.
    Unavailable(String),
    /// Part of the call was done and part went unanswered in time (a router shard
    /// silent while others published or changed their share): the text says what
    /// is known. The client gets a 504 without `Retry-After`, since retrying the
    /// whole call repeats the part that was done.
    TimedOut(String),
}

impl Reply {
    /// A publish's answer from its counts: `Published`, or `NotStored` when its
    /// durable history write failed (`not_stored`: why).
    pub fn of_publish(
        messages: u64,
        connections: u64,
        users: u64,
        not_stored: Option<String>,
    ) -> Reply {
        match not_stored {
            None => Reply::Published {
                messages,
                connections,
                users,
            },
            Some(error) => Reply::NotStored {
                messages,
                connections,
                users,
                error,
            },
        }
    }

    /// A publish's answer once its durable write failed: `Published` becomes
    /// `NotStored` with the same counts and `why`; any other reply is kept.
    pub fn not_stored(self, why: &str) -> Reply {
        match self {
            Reply::Published {
                messages,
                connections,
                users,
            } => Reply::NotStored {
                messages,
                connections,
                users,
                error: why.to_string(),
            },
            other => other,
        }
    }
}

/// A JSON document as its text: compact binary encodings cannot carry
/// `serde_json::Value` itself (it needs a self-describing format to read back).
/// Text that does not parse reads back as `null`, as a garbled document is no
/// reason to drop the reply it came with.
mod json_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(doc: &serde_json::Value, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&doc.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<serde_json::Value, D::Error> {
        let text = String::deserialize(d)?;
        Ok(serde_json::from_str(&text).unwrap_or(serde_json::Value::Null))
    }
}
