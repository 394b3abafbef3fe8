//! Pusher's HTTP API (docs/protocol.md "Pusher clients"): the request's signature
//! checked with its body (`auth::PusherApp::check_api_request`); then
//! `POST /apps/<id>/events` and `batch_events` make one channel publish per
//! channel, each payload the envelope a Pusher client reads as the event
//! (`wire::pusher::Published`), naming the `socket_id` to leave out, answered by
//! the publish reply like `POST /pub`; `GET /apps/<id>/channels/<name>` and
//! `…/users` ask the router for the channel's presence and answer in Pusher's
//! words ([`answer`]).

use super::{Connection, Cx, KEEP_ALIVE};
use bus::{Presence, PresenceOf, Request};
use bytes::Bytes;
use serde::Deserialize;
use wire::pusher::Published;
use wire::PusherCall;

/// Most channels one event names (Pusher's limit).
pub const MAX_CHANNELS_PER_EVENT: usize = 100;
/// Most events in one batch (Pusher's limit).
pub const MAX_BATCH: usize = 10;

#[derive(Deserialize)]
struct Event {
    name: String,
    data: String,
    #[serde(default)]
    channels: Option<Vec<String>>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    socket_id: Option<String>,
}

#[derive(Deserialize)]
struct Batch {
    batch: Vec<Event>,
}

/// A `GET` waiting for the router's presence answer: what to write of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ask {
    /// `/channels/<name>`: `occupied`, and the counts `info=` asked for.
    Channel {
        user_count: bool,
        subscription_count: bool,
    },
    /// `/channels/<name>/users`.
    Users,
    /// `/channels`: the occupied ones, with `user_count` if asked, named without
    /// the app's namespace (`namespaced`: the app has one; else names with `:`,
    /// other apps' and myriad's own, are left out).
    List { user_count: bool, namespaced: bool },
}

/// The bus request a signed API request makes, or the status and text to refuse it.
pub(super) fn request(
    conn: &mut Connection,
    cx: &Cx,
    (app, call): (&str, PusherCall),
    (path, query): (&str, &str),
    body: &[u8],
) -> Result<Request, (u16, String)> {
    let apps = &cx.config.access.pusher;
    let Some((index, the_app)) = apps.by_id(app) else {
        return Err((400, format!("unknown app {app}")));
    };
    let method = match call {
        PusherCall::Events | PusherCall::BatchEvents | PusherCall::TerminateUser(_) => "POST",
        PusherCall::Channel(_) | PusherCall::Users(_) | PusherCall::Channels => "GET",
    };
    the_app
        .check_api_request(method, path, query, body, cx.unix_now())
        .map_err(|e| (401, e.to_string()))?;
    let namespace = apps.namespace(index);
    let (batch, ask, name) = match call {
        PusherCall::Events => (false, None, None),
        PusherCall::BatchEvents => (true, None, None),
        PusherCall::TerminateUser(user) => {
            let channel = wire::pusher_user::user_channel(&namespace, auth::pusher_user_key(&user));
            let payload = Bytes::from_static(wire::pusher_user::TERMINATE);
            return Ok(Request::PublishChannels {
                items: vec![(channel, payload)],
            });
        }
        PusherCall::Channels => return list(conn, query, &namespace),
        PusherCall::Channel(name) => {
            let info = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("info="))
                .unwrap_or_default();
            let info = info.replace("%2C", ",").replace("%2c", ",");
            let has = |what: &str| info.split(',').any(|i| i == what);
            let ask = Ask::Channel {
                user_count: has("user_count"),
                subscription_count: has("subscription_count"),
            };
            (false, Some(ask), Some(name))
        }
        PusherCall::Users(name) => (false, Some(Ask::Users), Some(name)),
    };
    if let (Some(ask), Some(name)) = (ask, name) {
        let presence = name.starts_with("presence-");
        if !presence
            && (ask == Ask::Users
                || matches!(
                    ask,
                    Ask::Channel {
                        user_count: true,
                        ..
                    }
                ))
        {
            return Err((
                400,
                "users and user_count are for presence channels only".into(),
            ));
        }
        wire::pusher_user::check_name(&name).map_err(|why| (400, format!("{name}: {why}")))?;
        conn.pending().pusher_ask = Some(ask);
        let of = PresenceOf::Channel(wire::pusher_user::internal(&namespace, &name));
        return Ok(Request::Presence {
            of,
            list: ask == Ask::Users,
        });
    }
    let events = match batch {
        false => vec![serde_json::from_slice::<Event>(body).map_err(bad)?],
        true => serde_json::from_slice::<Batch>(body).map_err(bad)?.batch,
    };
    if events.len() > MAX_BATCH {
        return Err((413, format!("more than {MAX_BATCH} events in a batch")));
    }
    let mut items = Vec::new();
    for e in events {
        if e.name.len() > wire::pusher::MAX_EVENT_NAME {
            return Err((400, "event name longer than 200 bytes".into()));
        }
        if e.data.len() > cx.config.max_message {
            let max = cx.config.max_message;
            return Err((413, format!("data larger than {max} bytes (--max-message)")));
        }
        let channels = match (e.channels, e.channel) {
            (Some(c), None) => c,
            (None, Some(c)) => vec![c],
            _ => return Err((400, "name channels or channel, not both".into())),
        };
        if channels.is_empty() || channels.len() > MAX_CHANNELS_PER_EVENT {
            let why = format!("an event names 1 to {MAX_CHANNELS_PER_EVENT} channels");
            return Err((400, why));
        }
        let payload = Bytes::from(Published::envelope(
            &e.name,
            &e.data,
            e.socket_id.as_deref(),
        ));
        for c in channels {
            // `sendToUser`: the user's internal channel, shown as the SDK named it.
            if let Some(user) = c.strip_prefix(wire::pusher_user::SERVER_TO_USER) {
                let key = auth::pusher_user_key(user);
                let (name, socket) = (Some(c.as_str()), e.socket_id.as_deref());
                let to_user = Published::envelope_shown(&e.name, &e.data, socket, name);
                let channel = wire::pusher_user::user_channel(&namespace, key);
                items.push((channel, Bytes::from(to_user)));
                continue;
            }
            wire::pusher_user::check_name(&c).map_err(|why| (400, format!("{c}: {why}")))?;
            items.push((wire::pusher_user::internal(&namespace, &c), payload.clone()));
        }
    }
    Ok(Request::PublishChannels { items })
}

/// `GET /apps/<id>/channels[?filter_by_prefix=…][&info=user_count]`: asks every
/// router (shard) for the occupied channels of the prefix in the app's namespace.
/// `user_count` is for a `presence-` prefix only, as Pusher has it.
fn list(conn: &mut Connection, query: &str, namespace: &str) -> Result<Request, (u16, String)> {
    let param = |k: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
            .unwrap_or_default()
    };
    let prefix = param("filter_by_prefix");
    let info = param("info").replace("%2C", ",").replace("%2c", ",");
    let user_count = info.split(',').any(|i| i == "user_count");
    if user_count && !prefix.starts_with("presence-") {
        let why = "info=user_count needs filter_by_prefix=presence-";
        return Err((400, why.into()));
    }
    if prefix.contains(['%', '~', ':']) {
        return Err((400, "filter_by_prefix: a channel name's start".into()));
    }
    conn.pending().pusher_ask = Some(Ask::List {
        user_count,
        namespaced: !namespace.is_empty(),
    });
    let prefix = wire::pusher_user::internal(namespace, prefix);
    Ok(Request::Occupied { prefix })
}

/// The occupied channels a Pusher `GET /channels` waited for, in Pusher's words:
/// `{"channels":{"<name>":{}|{"user_count":n},…}}`. False when none waited.
pub(super) fn answer_list(conn: &mut Connection, cx: &mut Cx, list: &[bus::Occupied]) -> bool {
    let Some(Ask::List {
        user_count,
        namespaced,
    }) = conn.pending.as_ref().and_then(|p| p.pusher_ask)
    else {
        return false;
    };
    if let Some(p) = conn.pending.as_mut() {
        p.pusher_ask = None;
    }
    let mut channels = serde_json::Map::new();
    for c in list {
        if !namespaced && c.name.contains(wire::pusher_user::NAMESPACE_END) {
            continue;
        }
        let mut info = serde_json::json!({});
        if user_count {
            info["user_count"] = c.users.into();
        }
        channels.insert(wire::pusher_user::shown(&c.name).to_string(), info);
    }
    let body = serde_json::json!({ "channels": channels }).to_string();
    let keep = conn.has(KEEP_ALIVE);
    conn.respond(cx, keep, |out| {
        wire::write_response(out, 200, "application/json", body.as_bytes(), keep, &[])
    });
    true
}

fn bad(e: serde_json::Error) -> (u16, String) {
    (400, format!("bad event body: {e}"))
}

/// The router's presence of the channel a Pusher `GET` asked about, in Pusher's
/// words: `{"occupied":bool[,"user_count":n][,"subscription_count":n]}`, or
/// `{"users":[{"id":"<id>"},…]}`. False when no Pusher `GET` waited for it.
pub(super) fn answer(conn: &mut Connection, cx: &mut Cx, presence: &Presence) -> bool {
    let Some(ask) = conn.pending.as_mut().and_then(|p| p.pusher_ask.take()) else {
        return false;
    };
    let doc = match ask {
        Ask::List { .. } => return false,
        Ask::Channel {
            user_count,
            subscription_count,
        } => {
            let mut doc = serde_json::json!({ "occupied": presence.connections > 0 });
            if user_count {
                doc["user_count"] = presence.count.into();
            }
            if subscription_count {
                doc["subscription_count"] = presence.connections.into();
            }
            doc
        }
        Ask::Users => {
            let users: Vec<serde_json::Value> = presence
                .users
                .iter()
                .map(|m| serde_json::json!({ "id": wire::pusher_user::read_member(m.user, m.info.as_deref()).0 }))
                .collect();
            serde_json::json!({ "users": users })
        }
    };
    let keep = conn.has(KEEP_ALIVE);
    let body = doc.to_string();
    conn.respond(cx, keep, |out| {
        wire::write_response(out, 200, "application/json", body.as_bytes(), keep, &[])
    });
    true
}
