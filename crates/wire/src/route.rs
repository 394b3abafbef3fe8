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

use crate::channel::{friends_channel, presence_channel};
use crate::head::{Method, RequestHead};
use crate::query::parse_history_query;
use crate::query::{parse_control_query, parse_parallel, parse_publish_token, parse_query};
use crate::since::{canonical_u64, Since};

use crate::endpoints::{
    Present, PusherCall, Route, RouteError, StreamControl, Transport, GET, POST, PUT_DELETE,
};

/// Maps a head to its endpoint.
pub fn route(head: &RequestHead) -> Result<Route, RouteError> {
    let rest = head.path.strip_prefix('/').ok_or(RouteError::NotFound)?;
    let mut segs = rest.split('/');
    // `split` always yields at least one item.
    let first = segs.next().unwrap_or_default();
    let second = segs.next();
    let third = segs.next();
    let fourth = segs.next();
    if let ("apps", Some(app), Some("channels"), Some(name)) = (first, second, third, fourth) {
        need(head.method, Method::Get, GET)?;
        let name = channel_in_path(name)?;
        let call = match (segs.next(), segs.next()) {
            (None, _) => PusherCall::Channel(name),
            (Some("users"), None) => PusherCall::Users(name),
            _ => return Err(RouteError::NotFound),
        };
        return Ok(pusher_api(head, app, call));
    }
    if let ("apps", Some(app), Some("users"), Some(user)) = (first, second, third, fourth) {
        if (segs.next(), segs.next()) != (Some("terminate_connections"), None) || user.is_empty() {
            return Err(RouteError::NotFound);
        }
        need(head.method, Method::Post, POST)?;
        return Ok(pusher_api(
            head,
            app,
            PusherCall::TerminateUser(user.to_string()),
        ));
    }
    if fourth.is_some() {
        return Err(RouteError::NotFound);
    }
    let m = head.method;
    match (first, second, third) {
        ("sub" | "test", id, None) => {
            need(m, Method::Get, GET)?;
            let user = parse_user(id)?;
            let transport = if head.websocket.is_some() {
                Transport::WebSocket
            } else if head.accept_event_stream {
                Transport::Sse
            } else {
                Transport::Stream
            };
            subscribe(head, user, transport)
        }
        ("sse", id, None) => {
            need(m, Method::Get, GET)?;
            let user = parse_user(id)?;
            subscribe(head, user, Transport::Sse)
        }
        ("ws", id, None) => {
            need(m, Method::Get, GET)?;
            let user = parse_user(id)?;
            if head.websocket.is_none() {
                return Err(RouteError::UpgradeRequired);
            }
            subscribe(head, user, Transport::WebSocket)
        }
        ("poll", id, None) => {
            need(m, Method::Get, GET)?;
            let user = parse_user(id)?;
            let q = parse_query(head.query.as_deref())?;
            if q.presence || q.friends {
                return Err(RouteError::BadQuery(
                    "presence= and friends= are for streaming subscriptions (SSE, WebSocket, chunked), not a long-poll",
                ));
            }
            let (since, channels) = streams(user, q.since, q.channels, false)?;
            Ok(Route::Poll {
                user,
                since,
                token: q.token,
                channels,
            })
        }
        ("pub", None, None) => {
            need(m, Method::Post, POST)?;
            let parallel = parse_parallel(head.query.as_deref())?;
            let token = parse_publish_token(head.query.as_deref())?;
            Ok(Route::PublishBatch { parallel, token })
        }
        ("pub", Some(id), None) => {
            need(m, Method::Post, POST)?;
            let token = parse_publish_token(head.query.as_deref())?;
            if canonical_u64(id).is_some() || id.bytes().all(|b| b.is_ascii_digit()) {
                return Ok(Route::Publish {
                    subject: parse_id(id)?,
                    token,
                });
            }
            Ok(Route::PublishChannel {
                channel: channel_in_path(id)?,
                token,
            })
        }
        ("history", Some(name), None) => {
            need(m, Method::Get, GET)?;
            let channel = channel_in_path(name)?;
            let (since, limit) = parse_history_query(head.query.as_deref())?;
            Ok(Route::ChannelHistory {
                channel,
                since,
                limit,
            })
        }
        ("presence", Some(name), stats @ (None | Some("stats"))) => {
            need(m, Method::Get, GET)?;
            let of = if name.bytes().all(|b| b.is_ascii_digit()) {
                Present::Subject(parse_id(name)?)
            } else {
                Present::Channel(channel_in_path(name)?)
            };
            Ok(Route::Presence {
                of,
                stats: stats.is_some(),
            })
        }
        ("online", Some(id), None) => {
            need(m, Method::Get, GET)?;
            Ok(Route::Online {
                user: parse_id(id)?,
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
        ("app", Some(key), None) => {
            need(m, Method::Get, GET)?;
            if head.websocket.is_none() {
                return Err(RouteError::UpgradeRequired);
            }
            Ok(Route::Pusher {
                key: key.to_string(),
                protocol: crate::pusher::protocol_of(head.query.as_deref()),
            })
        }
        ("apps", Some(app), Some("channels")) => {
            need(m, Method::Get, GET)?;
            Ok(pusher_api(head, app, PusherCall::Channels))
        }
        ("apps", Some(app), Some(what @ ("events" | "batch_events"))) => {
            need(m, Method::Post, POST)?;
            let call = match what {
                "events" => PusherCall::Events,
                _ => PusherCall::BatchEvents,
            };
            Ok(pusher_api(head, app, call))
        }
        ("subscribe" | "unsubscribe", None, None) => {
            need(m, Method::Post, POST)?;
            let subscribe = first == "subscribe";
            let q = parse_control_query(head.query.as_deref(), subscribe)?;
            Ok(Route::Control(StreamControl {
                session: q.session,
                channel: q.channel,
                since: q.since,
                subscribe,
                presence: q.presence,
            }))
        }
        _ => Err(RouteError::NotFound),
    }
}

fn pusher_api(head: &RequestHead, app: &str, call: PusherCall) -> Route {
    Route::PusherApi {
        app: app.to_string(),
        call,
        path: head.path.clone(),
        query: head.query.clone().unwrap_or_default(),
    }
}

fn need(got: Method, want: Method, allow: &'static str) -> Result<(), RouteError> {
    if got == want {
        Ok(())
    } else {
        Err(RouteError::MethodNotAllowed { allow })
    }
}

fn subscribe(
    head: &RequestHead,
    user: Option<u64>,
    transport: Transport,
) -> Result<Route, RouteError> {
    let mut q = parse_query(head.query.as_deref())?;
    // `presence=1`: each channel's presence companion is a stream too, after the
    // channels (its part of a composite id too; a `since` without those parts
    // starts them from now).
    let companions = match q.presence {
        true => q.channels.len(),
        false => 0,
    } + usize::from(q.friends);
    if q.presence {
        let named: Vec<String> = q.channels.iter().map(|c| presence_channel(c)).collect();
        q.channels.extend(named);
    }
    // `friends=1`: the user's friends companion, last (it needs the user's id).
    if q.friends {
        let Some(user) = user else {
            return Err(RouteError::BadQuery(
                "friends=1 needs the user's id in the path",
            ));
        };
        q.channels.push(friends_channel(user));
    }
    if q.session.is_some() && transport == Transport::WebSocket {
        return Err(RouteError::BadQuery(
            "session= names an SSE or chunked stream on HTTP/2; a WebSocket subscribes \
             with control frames (framed=1)",
        ));
    }
    let streams_named = usize::from(user.is_some()) + q.channels.len();
    let since = match (transport, &head.last_event_id) {
        // Channels a session's stream joined later follow the URL's in its ids: a
        // browser reconnecting with the URL resumes the URL's streams.
        (Transport::Sse, Some(id)) if q.session.is_some() && id.len() > streams_named => {
            Some(id[..streams_named].to_vec())
        }
        (Transport::Sse, Some(id)) => Some(id.clone()),
        _ => q.since,
    };
    let since = since.map(|mut parts| {
        if companions > 0 && parts.len() + companions == streams_named {
            parts.resize(streams_named, None);
        }
        parts
    });
    let framed = q.framed || !q.channels.is_empty();
    // A framed WebSocket may start with no stream at all and subscribe later, and so
    // may a session's stream.
    let open = (framed && transport == Transport::WebSocket) || q.session.is_some();
    let (since, channels) = streams(user, since, q.channels, open)?;
    Ok(Route::Subscribe {
        user,
        transport,
        since,
        token: q.token,
        channels,
        framed,
        session: q.session,
    })
}

/// The connection's streams — its user's (with an id) then each channel's — each
/// with its part of the composite `since`; a connection needs a user or a channel
/// (a framed WebSocket, `may_be_empty`, may subscribe to its first one later).
#[allow(clippy::type_complexity)]
fn streams(
    user: Option<u64>,
    since: Option<Vec<Option<Since>>>,
    channels: Vec<String>,
    may_be_empty: bool,
) -> Result<(Option<Since>, Vec<(String, Option<Since>)>), RouteError> {
    if user.is_none() && channels.is_empty() && !may_be_empty {
        return Err(RouteError::BadQuery(
            "a subscription without an id in the path names at least one channel=",
        ));
    }
    let streams = usize::from(user.is_some()) + channels.len();
    let mut parts = match since {
        None => vec![None; streams],
        Some(parts) if parts.len() == streams => parts,
        Some(_) => {
            return Err(RouteError::BadQuery(
                "since has not one position per stream (the user's, then each channel's, \
                 joined by _)",
            ))
        }
    }
    .into_iter();
    let user_since = if user.is_some() {
        parts.next().flatten()
    } else {
        None
    };
    Ok((user_since, channels.into_iter().zip(parts).collect()))
}

fn parse_id(s: &str) -> Result<u64, RouteError> {
    canonical_u64(s).ok_or(RouteError::BadId)
}

/// A subscription path's id: `None` without one (`/sse?channel=…`).
fn parse_user(s: Option<&str>) -> Result<Option<u64>, RouteError> {
    s.map(parse_id).transpose()
}

/// A channel name in a path, percent-decoded and checked.
fn channel_in_path(s: &str) -> Result<String, RouteError> {
    let name = crate::query::percent_decode(s).ok_or(RouteError::BadQuery(
        "the channel is not valid percent-encoded UTF-8",
    ))?;
    crate::channel::check_name(&name).map_err(RouteError::BadQuery)?;
    Ok(name)
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
