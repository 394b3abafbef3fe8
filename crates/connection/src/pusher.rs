//! A Pusher Channels client on `/app/<key>?protocol=7` (SPEC J1, docs/protocol.md
//! "Pusher clients"): another dialect of JSON frames on a framed WebSocket. The
//! connection is a framed WebSocket without a user (`channels`); this module says
//! what differs: the greeting (`pusher:connection_established`), the events a
//! client sends (`wire::pusher`), channel signatures (`auth::PusherApp`), how a
//! subscription is answered, how a channel's message is framed
//! (`{"event","channel","data"}`), the heartbeat (`pusher:ping`, which pusher-js
//! answers) and the close codes (4001 unknown app, 4007 old protocol, 4200 on drain).
//!
//! Client events (`client-*`) are published on their channel as a
//! `wire::pusher::Published` envelope naming the sender's socket, so no process
//! echoes them to it; at most [`CLIENT_EVENTS_PER_SECOND`] per connection.
//!
//! Budget: a Pusher connection keeps its `Session` (app, socket id, rate bucket) in
//! the loop's side table (`pusher_session`), keyed by the connection; the
//! connection itself is a framed WebSocket's size, and other connections pay nothing.

use super::{channels, Connection, Cx, State, FRAMED, LOGGED_IN, WS_CLOSE_SENT};
use crate::clock::TICK_MS;
use crate::pusher_session::Session;
use bus::Request;
use bytes::Bytes;
use wire::pusher::{code, ClientFrame, Published};
use wire::{Opcode, RequestHead};

pub use crate::pusher_session::CLIENT_EVENTS_PER_SECOND;

/// True for a connection that speaks Pusher (the connection of `cx.key`).
pub(super) fn is(cx: &Cx) -> bool {
    session(cx).is_some()
}

pub(super) fn session<'a>(cx: &'a Cx) -> Option<&'a Session> {
    cx.credentials.pusher.get(cx.key)
}

/// The first part of a socket id: unique across loops and processes (a loop's
/// connection key repeats in every loop, and so does its seeded generator), so
/// no client takes another's socket for its own. `RandomState` draws keys per
/// thread from the system once and changes them for every call: no IO here.
fn socket_random(cx: &mut Cx) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(cx.out.random());
    h.finish() % 1_000_000_000_000
}

/// `GET /app/<key>?protocol=<n>` with an upgrade: an unknown key or an old protocol
/// is told so after the handshake (as Pusher does: the client reads the code, not
/// an HTTP status); a known one becomes a framed WebSocket without a user.
pub(super) fn open(
    conn: &mut Connection,
    cx: &mut Cx,
    key: &str,
    protocol: Option<u32>,
    head: &RequestHead,
) {
    let ws_key = head
        .websocket
        .as_ref()
        .map(|ws| ws.key.clone())
        .unwrap_or_default();
    let refusal = match (cx.config.access.pusher.by_key(key), protocol) {
        (None, _) => Some((
            code::APP_UNKNOWN,
            format!("App key {key} not in this cluster"),
        )),
        (Some(_), p) if p.unwrap_or(0) < wire::pusher::PROTOCOL => Some((
            code::PROTOCOL_UNSUPPORTED,
            "Unsupported protocol version: this server speaks 7".to_string(),
        )),
        (Some((app, _)), _) => {
            let session = Session::new(app, socket_random(cx), cx.now);
            cx.credentials.pusher.insert(cx.key, session);
            None
        }
    };
    if let Some((code, why)) = refusal {
        cx.out.write(|out| wire::write_ws_handshake(out, &ws_key));
        send(cx, |out| wire::pusher::write_error(out, Some(code), &why));
        return close(conn, cx, code, &why);
    }
    conn.pending().ws_key = Some(ws_key);
    conn.set(FRAMED, true);
    channels::join_at_start(conn, cx, None, None, Vec::new(), (None, None), false);
    conn.state = State::SubscribingWebSocket;
    conn.arm(cx, cx.config.head_timeout);
}

/// The handshake is out: `pusher:connection_established` with the socket id and the
/// activity timeout (the heartbeat: a client quiet that long sends `pusher:ping`).
pub(super) fn established(cx: &mut Cx) {
    let Some(s) = session(cx) else { return };
    let timeout = (u64::from(cx.config.heartbeat) * TICK_MS / 1000).max(1);
    let data = serde_json::json!({ "socket_id": s.socket_id(cx.key), "activity_timeout": timeout });
    send(cx, |out| {
        wire::pusher::write_event(
            out,
            "pusher:connection_established",
            None,
            &data.to_string(),
        )
    });
}

/// A complete text frame from a Pusher client.
pub(super) fn handle_text(conn: &mut Connection, cx: &mut Cx, text: &[u8]) {
    let frame = match wire::pusher::parse_client_frame(text) {
        Ok(f) => f,
        Err(e) => return error(cx, Some(code::BAD_FRAME), &e.to_string()),
    };
    match frame {
        ClientFrame::Ping => send(cx, |out| {
            wire::pusher::write_event(out, "pusher:pong", None, "{}")
        }),
        ClientFrame::Pong => {}
        ClientFrame::Subscribe {
            channel,
            auth,
            channel_data,
        } => subscribe(conn, cx, &channel, auth.as_deref(), channel_data.as_deref()),
        // Leaving a channel not held is not an error in Pusher.
        ClientFrame::Unsubscribe { channel } => {
            let name = internal(cx, &channel);
            let _ = channels::unsubscribe_later(conn, cx, &name);
        }
        ClientFrame::Signin { auth, user_data } => super::pusher_user::signin(
            conn,
            cx,
            auth.as_deref(),
            user_data.as_deref().unwrap_or_default(),
        ),
        ClientFrame::ClientEvent {
            event,
            channel,
            data,
        } => client_event(conn, cx, &event, channel, &data),
        ClientFrame::Other { event } => error(
            cx,
            None,
            &format!("event {event} is not supported by this server"),
        ),
    }
}

fn subscribe(
    conn: &mut Connection,
    cx: &mut Cx,
    channel: &str,
    auth: Option<&str>,
    channel_data: Option<&str>,
) {
    let Some(s) = session(cx) else { return };
    if channel.starts_with(wire::pusher_user::SERVER_TO_USER) {
        return super::pusher_user::subscribe_to_self(cx, channel);
    }
    if let Err(why) = wire::pusher_user::check_name(channel) {
        return subscription_error(cx, channel, "SubscriptionError", why, 400);
    }
    let signed = channel.starts_with("private-") || channel.starts_with("presence-");
    if signed {
        let Some(app) = cx.config.access.pusher.get(s.app) else {
            return;
        };
        // Whatever `channel_data` the app's endpoint returned, it signed (the
        // `pusher` SDKs add it on private channels too when given member data).
        let socket_id = s.socket_id(cx.key);
        if let Err(e) = app.check_channel_auth(&socket_id, channel, channel_data, auth) {
            return subscription_error(cx, channel, "AuthError", &e.to_string(), 401);
        }
    }
    // A presence channel's member is the user of `channel_data` (signed above):
    // its myriad user is the id's key, its info carries a non-numeric id.
    let member = match channel.starts_with("presence-") {
        false => None,
        true => match wire::pusher::parse_channel_data(channel_data.unwrap_or_default()) {
            Ok((id, info)) => Some((
                auth::pusher_user_key(&id),
                wire::pusher_user::member_info(&id, info),
            )),
            Err(why) => return subscription_error(cx, channel, "SubscriptionError", why, 400),
        },
    };
    let presence = member.is_some();
    let name = internal(cx, channel);
    if let Err(refused) = channels::subscribe_as(conn, cx, &name, None, presence, member) {
        subscription_error(
            cx,
            channel,
            "SubscriptionError",
            refused.why,
            refused.status,
        );
    }
}

/// `client-*` on a private or presence channel this connection holds, within the
/// rate: published on the channel, naming the sender so it is not echoed.
fn client_event(conn: &mut Connection, cx: &mut Cx, event: &str, channel: String, data: &str) {
    if !channel.starts_with("private-") && !channel.starts_with("presence-") {
        return error(
            cx,
            Some(code::REFUSED),
            "client events are for private and presence channels only",
        );
    }
    let name = internal(cx, &channel);
    let held = conn.chans.as_ref().and_then(|c| c.find(&name));
    if held.is_none() {
        return error(
            cx,
            Some(code::REFUSED),
            &format!("not subscribed to {channel}"),
        );
    }
    let (now, key) = (cx.now, cx.key);
    let Some(s) = cx.credentials.pusher.get_mut(key) else {
        return;
    };
    if !s.take_token(now) {
        return error(
            cx,
            Some(code::RATE_LIMITED),
            &format!("client events: at most {CLIENT_EVENTS_PER_SECOND} per second"),
        );
    }
    // On a presence channel the connection is its member's user (`subscribe`): the
    // router that owns the channel shows the member's id as the app gave it.
    let member = (channel.starts_with("presence-") && conn.has(LOGGED_IN)).then_some(conn.user);
    let payload = Published::client_event(event, data, &s.socket_id(key), member);
    cx.out.request(Request::PublishChannel {
        channel: name,
        payload: Bytes::from(payload),
    });
}

/// The myriad channel of this connection's app's channel `name`
/// (`wire::pusher_user::internal`: the first app's names are myriad's).
pub(super) fn internal(cx: &Cx, name: &str) -> String {
    let app = session(cx).map_or(0, |s| s.app);
    wire::pusher_user::internal(&cx.config.access.pusher.namespace(app), name)
}

/// A channel's join is answered: `pusher_internal:subscription_succeeded`; for a
/// presence channel once its members are known (a presence query, answered in
/// [`members`]); for a signed-in user's channel, `pusher:signin_success`.
pub(super) fn joined(cx: &mut Cx, channel: &str) {
    if wire::pusher_user::is_user_channel(channel) {
        return super::pusher_user::signed_in(cx);
    }
    let shown = wire::pusher_user::shown(channel);
    if shown.starts_with("presence-") {
        let of = bus::PresenceOf::Channel(channel.to_string());
        return cx.out.request(Request::Presence { of, list: true });
    }
    subscription_succeeded(cx, shown, "{}");
}

pub(super) fn subscription_succeeded(cx: &mut Cx, channel: &str, data: &str) {
    send(cx, |out| {
        wire::pusher::write_event(
            out,
            "pusher_internal:subscription_succeeded",
            Some(channel),
            data,
        )
    });
}

/// A presence channel's members: its `subscription_succeeded` with
/// `{"presence":{"ids","hash","count"}}` (ids as strings, `hash` the members'
/// `user_info`). A list cut by `--max-presence-members` names fewer than `count`.
pub(super) fn members(conn: &Connection, cx: &mut Cx, channel: &str, presence: bus::Presence) {
    let held = conn.chans.as_ref().and_then(|c| c.find(channel));
    if held.is_none() {
        return; // left before the answer
    }
    let mut ids = Vec::with_capacity(presence.users.len());
    let mut hash = serde_json::Map::new();
    for m in presence.users {
        let (id, info) = wire::pusher_user::read_member(m.user, m.info.as_deref());
        hash.insert(id.clone(), info);
        ids.push(id);
    }
    let data = serde_json::json!({
        "presence": { "ids": ids, "hash": hash, "count": presence.count }
    });
    let shown = wire::pusher_user::shown(channel);
    subscription_succeeded(cx, shown, &data.to_string());
}

/// A message of a presence channel's companion (`+<user>[ <info>]` /
/// `-<user>[ <info>]`, one per user, not per connection) as
/// `pusher_internal:member_added` (with the member's `user_info`) /
/// `member_removed`, the user shown by its id as the app gave it
/// (`wire::pusher_user::read_member`). `None`: not a companion's message.
pub(super) fn member_push(channel: &str, payload: &[u8]) -> Option<Vec<u8>> {
    let of = wire::channel::presence_of(channel)?;
    let text = std::str::from_utf8(payload).ok()?;
    let (user, info) = text.split_once(' ').unwrap_or((text, ""));
    let (event, user) = match user.split_at_checked(1)? {
        ("+", user) => ("pusher_internal:member_added", user),
        ("-", user) => ("pusher_internal:member_removed", user),
        _ => return None,
    };
    let (user, info) = wire::pusher_user::read_member(user.parse().ok()?, Some(info));
    let data = match (event, info) {
        ("pusher_internal:member_added", info) if !info.is_null() => {
            serde_json::json!({ "user_id": user, "user_info": info })
        }
        _ => serde_json::json!({ "user_id": user }),
    };
    let mut text = Vec::new();
    let of = wire::pusher_user::shown(of);
    wire::pusher::write_event(&mut text, event, Some(of), &data.to_string());
    let mut out = Vec::new();
    wire::write_ws_frame(&mut out, Opcode::Text, &text);
    Some(out)
}

/// A subscription refused: `pusher:subscription_error` on the channel (pusher-js
/// emits it there, as for a failed auth endpoint).
pub(super) fn subscription_error(cx: &mut Cx, channel: &str, kind: &str, why: &str, status: u16) {
    let data = serde_json::json!({ "type": kind, "error": why, "status": status });
    send(cx, |out| {
        wire::pusher::write_event(
            out,
            "pusher:subscription_error",
            Some(channel),
            &data.to_string(),
        )
    });
}

/// A channel's message as a Pusher event (a whole WebSocket frame, encoded once per
/// message and loop by `Frames`), and the socket that sent it, if a client did.
/// The channel shown is the message's own without the app's namespace, or the
/// one its envelope names (a user's `#server-to-user-<id>`).
pub(crate) fn encode(channel: &str, payload: &[u8]) -> (Bytes, Option<Box<str>>) {
    let p = Published::read(payload);
    let shown = p
        .channel
        .as_deref()
        .unwrap_or(wire::pusher_user::shown(channel));
    let mut text = Vec::with_capacity(payload.len() + channel.len() + 40);
    // A member's id only on a presence channel, where the router vouched for it.
    let presence = wire::pusher_user::shown(channel).starts_with("presence-");
    let user_id = p.user_id.as_deref().filter(|_| presence);
    wire::pusher::write_event_from(&mut text, &p.event, Some(shown), &p.data, user_id);
    let mut out = Vec::with_capacity(text.len() + 10);
    wire::write_ws_frame(&mut out, Opcode::Text, &text);
    (Bytes::from(out), p.socket_id.map(Into::into))
}

/// True when `from` (a message's sender socket) is this connection: its own client
/// event, never echoed.
pub(super) fn is_own(cx: &Cx, from: Option<&str>) -> bool {
    from.is_some_and(|from| session(cx).is_some_and(|s| s.is_socket(cx.key, from)))
}

/// The heartbeat of a Pusher connection: `pusher:ping` (pusher-js answers pong).
pub(super) fn heartbeat(cx: &mut Cx) {
    send(cx, |out| {
        wire::pusher::write_event(out, "pusher:ping", None, "{}")
    });
}

/// Drain: close 4200, so pusher-js reconnects at once (to another server).
pub(super) fn drain(conn: &mut Connection, cx: &mut Cx) {
    close(conn, cx, code::RECONNECT, "server restarting: reconnect");
}

/// `pusher:error` without a close (4300-range codes, or `None`).
pub(super) fn error(cx: &mut Cx, code: Option<u16>, why: &str) {
    send(cx, |out| wire::pusher::write_error(out, code, why));
}

pub(super) fn close(conn: &mut Connection, cx: &mut Cx, code: u16, why: &str) {
    if !conn.has(WS_CLOSE_SENT) {
        conn.set(WS_CLOSE_SENT, true);
        cx.out.write(|out| wire::write_ws_close(out, code, why));
    }
    conn.start_closing(cx);
}

/// One text frame whose JSON `write` produces.
pub(super) fn send(cx: &mut Cx, write: impl FnOnce(&mut Vec<u8>)) {
    let mut text = Vec::new();
    write(&mut text);
    cx.out
        .write(|out| wire::write_ws_frame(out, Opcode::Text, &text));
}
