//! The endpoints a request head can ask for ([`Route`] and its parts) and why a head
//! asks for none ([`RouteError`], with its status and headers): the vocabulary that
//! [`crate::route`] maps heads to and the connection core acts on. Types only.

use crate::query::QueryError;
use crate::since::Since;

/// How a subscription is delivered.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Transport {
    /// HTTP/1.1 chunked streaming (A1).
    Stream,
    /// Server-Sent Events (A2).
    Sse,
    /// WebSocket (A4).
    WebSocket,
}

/// An endpoint of the gateway.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Route {
    /// `GET /sub/<id>`, `/test/<id>`, `/sse/<id>`, `/ws/<id>`, with optional
    /// `?since=` and `?token=`. For SSE, `since` is `Last-Event-ID` when the request
    /// has one (a browser's automatic reconnect sends the newest id but keeps the
    /// URL, with its older `since`), else `?since=`.
    /// Without an id (`/sse?channel=a`), the connection has no user: only its
    /// channels. `channels`: each `channel=` in order with its part of the
    /// composite `since` (`since` is then the user's part).
    Subscribe {
        user: Option<u64>,
        transport: Transport,
        since: Option<Since>,
        token: Option<String>,
        channels: Vec<(String, Option<Since>)>,
        /// A WebSocket in framed mode (`channel=` or `framed=1`).
        framed: bool,
        /// `session=<name>`: what `POST /subscribe` and `/unsubscribe` on the same
        /// HTTP/2 connection call this stream. With one, the stream may start with
        /// no user and no channel, and an SSE `Last-Event-ID` may carry more parts
        /// than the URL names (channels subscribed later): the extra ones are
        /// dropped.
        session: Option<String>,
    },
    /// `GET /poll/<id>?since=<seq>` (and `?token=`, `channel=`), or `/poll?channel=…`.
    Poll {
        user: Option<u64>,
        since: Option<Since>,
        token: Option<String>,
        channels: Vec<(String, Option<Since>)>,
    },
    /// `POST /pub/<id>`. `token`: `?token=<jwt>`, a client's own token (a client
    /// publish over HTTP, for pages that cannot set `Authorization`).
    Publish { subject: u64, token: Option<String> },
    /// `POST /pub/<channel>`: a name that is not all digits; `token` as above.
    PublishChannel {
        channel: String,
        token: Option<String>,
    },
    /// `GET /history/<channel>?since=<epoch>-<seq>&limit=<n>`.
    ChannelHistory {
        channel: String,
        since: Option<Since>,
        limit: u32,
    },
    /// `GET /presence/<channel>` (the users present), `/presence/<channel>/stats`
    /// (`stats`: the counts alone); a numeric name is a subject: is that user
    /// online.
    Presence { of: Present, stats: bool },
    /// `GET /online/<user>`: which of the subjects `user` follows are online.
    Online { user: u64 },
    /// `POST /pub` (NDJSON body); `?parallel=1`: the items are independent, so a
    /// server on several router shards need not keep their order across shards;
    /// `token` as for `Publish`.
    PublishBatch {
        parallel: bool,
        token: Option<String>,
    },
    /// `PUT /subscriptions/<subscriber>/<subject>`.
    SubscriptionPut { subscriber: u64, subject: u64 },
    /// `DELETE /subscriptions/<subscriber>/<subject>`.
    SubscriptionDelete { subscriber: u64, subject: u64 },
    /// `POST /subscriptions` ("A B" lines).
    SubscriptionsBulk,
    /// `GET /subscribers/<subject>`.
    Subscribers { subject: u64 },
    /// `GET /subscriptions/<subscriber>`.
    Subscriptions { subscriber: u64 },
    /// `GET /stats`.
    Stats,
    /// `GET /healthz`.
    Health,
    /// `POST /subscribe` or `POST /unsubscribe`: another stream of the same HTTP/2
    /// connection joins or leaves a channel.
    Control(StreamControl),
    /// `GET /app/<key>?protocol=7` with a WebSocket upgrade: a Pusher Channels client
    /// (SPEC J1, [`crate::pusher`]). `key` is as sent (the core looks it up);
    /// `protocol` is `None` when absent or not a number.
    Pusher { key: String, protocol: Option<u32> },
    /// `/apps/<id>/…`: Pusher's HTTP API ([`PusherCall`]), signed in the query
    /// (checked with the body, `auth::PusherApp`). `path` and `query` are as sent:
    /// the signature covers them.
    PusherApi {
        app: String,
        call: PusherCall,
        path: String,
        query: String,
    },
}

/// Which call of Pusher's HTTP API a request makes.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum PusherCall {
    /// `POST /apps/<id>/events`.
    Events,
    /// `POST /apps/<id>/batch_events`.
    BatchEvents,
    /// `GET /apps/<id>/channels/<name>`.
    Channel(String),
    /// `GET /apps/<id>/channels/<name>/users`.
    Users(String),
    /// `GET /apps/<id>/channels`: the occupied channels (`filter_by_prefix`, `info`).
    Channels,
    /// `POST /apps/<id>/users/<user id>/terminate_connections`: the user id as sent.
    TerminateUser(String),
}

/// Whose presence `GET /presence/<name>` asks for.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Present {
    /// A channel (a name that is not all digits).
    Channel(String),
    /// A numeric subject (all digits: a canonical u64, else 400).
    Subject(u64),
}

/// `POST /subscribe?session=<name>&channel=<C>[&since=<epoch>-<seq>]` or `POST
/// /unsubscribe?session=<name>&channel=<C>`: the stream whose request said
/// `session=<name>` joins or leaves C. `channel` is percent-decoded but not yet
/// checked and `since` is as sent: the stream checks both as a framed WebSocket's
/// control frame, so that the refusals read the same.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct StreamControl {
    pub session: String,
    pub channel: String,
    pub since: Option<String>,
    /// True for `/subscribe`, false for `/unsubscribe`.
    pub subscribe: bool,
    /// `presence=1` on a subscribe: also the channel's join/leave pushes.
    pub presence: bool,
}

/// Why no route matched; see [`RouteError::status`] and [`RouteError::headers`].
#[derive(thiserror::Error, Clone, Copy, PartialEq, Eq, Debug)]
pub enum RouteError {
    #[error("not found")]
    NotFound,
    /// The path exists; `allow` is the value for the `Allow` header.
    #[error("method not allowed (allowed: {allow})")]
    MethodNotAllowed { allow: &'static str },
    /// An id in the path, or the `since` sequence number, is not a canonical u64.
    #[error("invalid id or sequence number (want a decimal u64 without leading zeros)")]
    BadId,
    /// `/ws/<id>` without a valid WebSocket upgrade.
    #[error("WebSocket upgrade required")]
    UpgradeRequired,
    /// A subscription query parameter is malformed or repeated.
    #[error("invalid query: {0}")]
    BadQuery(&'static str),
}

impl From<QueryError> for RouteError {
    fn from(e: QueryError) -> RouteError {
        match e {
            QueryError::BadSince => RouteError::BadId,
            QueryError::Bad(why) => RouteError::BadQuery(why),
        }
    }
}

impl RouteError {
    /// The HTTP status to answer with.
    pub fn status(&self) -> u16 {
        match self {
            RouteError::NotFound => 404,
            RouteError::MethodNotAllowed { .. } => 405,
            RouteError::BadId | RouteError::BadQuery(_) => 400,
            RouteError::UpgradeRequired => 426,
        }
    }

    /// Headers the response must carry (RFC 9110 15.5.6 `Allow` for 405,
    /// 15.5.22 `Upgrade` for 426).
    pub fn headers(&self) -> &'static [(&'static str, &'static str)] {
        match self {
            RouteError::MethodNotAllowed { allow: GET } => &[("Allow", GET)],
            RouteError::MethodNotAllowed { allow: POST } => &[("Allow", POST)],
            RouteError::MethodNotAllowed { allow: PUT_DELETE } => &[("Allow", PUT_DELETE)],
            // Only `route` builds the variant, always with one of the constants.
            RouteError::MethodNotAllowed { .. } => &[],
            RouteError::UpgradeRequired => &[
                ("Upgrade", "websocket"),
                ("Connection", "Upgrade"),
                ("Sec-WebSocket-Version", "13"),
            ],
            RouteError::NotFound | RouteError::BadId | RouteError::BadQuery(_) => &[],
        }
    }
}

/// The `Allow` values a 405 names (this crate builds the variant with these only).
pub(crate) const GET: &str = "GET";
pub(crate) const POST: &str = "POST";
pub(crate) const PUT_DELETE: &str = "PUT, DELETE";
