//! Routing: which endpoint a parsed [`RequestHead`] asks for. Pure, no state.
//!
//! This module does not check auth, bodies or limits; it only maps method + path
//! (+ the transport hints of the head) to a [`Route`] or a [`RouteError`].
//!
//! Path rules: ids are canonical u64 decimals (`0`, `42`; not `01`, `-1`, `+1`, empty,
//! or past `u64::MAX`), answered 400 otherwise. A trailing slash is a different
//! path (404), except that `/sub/` is `/sub/<empty id>` (400).
//!
//! `HEAD` is answered 405 on every route, with `Allow` naming the real methods:
//! the streaming routes have no meaningful head-only answer, and none of the API
//! clients need it. This keeps "no body after a HEAD" out of the gateway entirely.

use crate::head::{Method, RequestHead};
use crate::query::{parse_parallel, parse_query, QueryError};
use crate::since::{canonical_u64, Since};

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
    Subscribe {
        user: u64,
        transport: Transport,
        since: Option<Since>,
        token: Option<String>,
    },
    /// `GET /poll/<id>?since=<seq>` (and `?token=`).
    Poll {
        user: u64,
        since: Option<Since>,
        token: Option<String>,
    },
    /// `POST /pub/<id>`.
    Publish { subject: u64 },
    /// `POST /pub` (NDJSON body); `?parallel=1`: the items are independent, so a
    /// server on several router shards need not keep their order across shards.
    PublishBatch { parallel: bool },
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
            // Only this module builds the variant, always with one of the constants.
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

const GET: &str = "GET";
const POST: &str = "POST";
const PUT_DELETE: &str = "PUT, DELETE";

/// Maps a head to its endpoint.
pub fn route(head: &RequestHead) -> Result<Route, RouteError> {
    let rest = head.path.strip_prefix('/').ok_or(RouteError::NotFound)?;
    let mut segs = rest.split('/');
    // `split` always yields at least one item.
    let first = segs.next().unwrap_or_default();
    let second = segs.next();
    let third = segs.next();
    if segs.next().is_some() {
        return Err(RouteError::NotFound);
    }
    let m = head.method;
    match (first, second, third) {
        ("sub" | "test", Some(id), None) => {
            need(m, Method::Get, GET)?;
            let user = parse_id(id)?;
            let transport = if head.websocket.is_some() {
                Transport::WebSocket
            } else if head.accept_event_stream {
                Transport::Sse
            } else {
                Transport::Stream
            };
            subscribe(head, user, transport)
        }
        ("sse", Some(id), None) => {
            need(m, Method::Get, GET)?;
            let user = parse_id(id)?;
            subscribe(head, user, Transport::Sse)
        }
        ("ws", Some(id), None) => {
            need(m, Method::Get, GET)?;
            let user = parse_id(id)?;
            if head.websocket.is_none() {
                return Err(RouteError::UpgradeRequired);
            }
            subscribe(head, user, Transport::WebSocket)
        }
        ("poll", Some(id), None) => {
            need(m, Method::Get, GET)?;
            let user = parse_id(id)?;
            let q = parse_query(head.query.as_deref())?;
            Ok(Route::Poll {
                user,
                since: q.since,
                token: q.token,
            })
        }
        ("pub", None, None) => {
            need(m, Method::Post, POST)?;
            let parallel = parse_parallel(head.query.as_deref())?;
            Ok(Route::PublishBatch { parallel })
        }
        ("pub", Some(id), None) => {
            need(m, Method::Post, POST)?;
            Ok(Route::Publish {
                subject: parse_id(id)?,
            })
        }
        ("subscriptions", None, None) => {
            need(m, Method::Post, POST)?;
            Ok(Route::SubscriptionsBulk)
        }
        ("subscriptions", Some(id), None) => {
            need(m, Method::Get, GET)?;
            Ok(Route::Subscriptions {
                subscriber: parse_id(id)?,
            })
        }
        ("subscriptions", Some(a), Some(b)) => {
            let put = match m {
                Method::Put => true,
                Method::Delete => false,
                _ => return Err(RouteError::MethodNotAllowed { allow: PUT_DELETE }),
            };
            let (subscriber, subject) = (parse_id(a)?, parse_id(b)?);
            Ok(if put {
                Route::SubscriptionPut {
                    subscriber,
                    subject,
                }
            } else {
                Route::SubscriptionDelete {
                    subscriber,
                    subject,
                }
            })
        }
        ("subscribers", Some(id), None) => {
            need(m, Method::Get, GET)?;
            Ok(Route::Subscribers {
                subject: parse_id(id)?,
            })
        }
        ("stats", None, None) => {
            need(m, Method::Get, GET)?;
            Ok(Route::Stats)
        }
        ("healthz", None, None) => {
            need(m, Method::Get, GET)?;
            Ok(Route::Health)
        }
        _ => Err(RouteError::NotFound),
    }
}

fn need(got: Method, want: Method, allow: &'static str) -> Result<(), RouteError> {
    if got == want {
        Ok(())
    } else {
        Err(RouteError::MethodNotAllowed { allow })
    }
}

fn subscribe(head: &RequestHead, user: u64, transport: Transport) -> Result<Route, RouteError> {
    let q = parse_query(head.query.as_deref())?;
    let since = match (transport, head.last_event_id) {
        (Transport::Sse, Some(id)) => Some(id),
        _ => q.since,
    };
    Ok(Route::Subscribe {
        user,
        transport,
        since,
        token: q.token,
    })
}

fn parse_id(s: &str) -> Result<u64, RouteError> {
    canonical_u64(s).ok_or(RouteError::BadId)
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
