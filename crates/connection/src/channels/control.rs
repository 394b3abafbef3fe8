//! Subscribing and unsubscribing on an open connection, one path for two askers:
//! a framed WebSocket's control frames (`{"subscribe":…}`, `{"unsubscribe":…}`,
//! answered in frames) and an HTTP/2 stream's `POST /subscribe` and `/unsubscribe`
//! on the same connection (`Connection::handle_control`, answered on the POST's own
//! stream, `stream_control`). Each is answered at once or by the join's reply.
//!
//! Places in a composite id: a channel of the request keeps its place when left (an
//! empty part: a reconnect with the same URL starts it from then), and takes it back
//! when joined again; a channel joined later goes to the end and leaves no place,
//! since a reconnect with the URL drops the parts past the URL's (`wire::route`).

use super::{joined, names, subscribed_json, write_sse_position, ws_text, REFUSED_WHY};
use crate::{Connection, ControlAnswer, Cx, State, FRAMED, LOGGED_IN};
use bus::{ChannelJoin, HistoryRead, Refusal, Request};
use serde::Deserialize;
use wire::{Since, StreamControl, Transport};

/// A framed WebSocket's control frame (`{"subscribe":…}`, `{"unsubscribe":…}`);
/// true when the frame was one.
pub(crate) fn handle_control(conn: &mut Connection, cx: &mut Cx, text: &[u8]) -> bool {
    if !conn.has(FRAMED) {
        return false;
    }
    let is = |key: &[u8]| text.windows(key.len()).any(|w| w == key);
    if !is(b"\"subscribe\"") && !is(b"\"unsubscribe\"") {
        return false;
    }
    let frame: Control = match serde_json::from_slice(text) {
        Ok(f) => f,
        Err(_) => {
            error(cx, None, "bad control frame: want {\"subscribe\":\"<channel>\"[,\"since\":\"<epoch>-<seq>\"]} or {\"unsubscribe\":\"<channel>\"}");
            return true;
        }
    };
    match frame {
        Control::Subscribe {
            subscribe,
            since,
            presence,
        } => {
            let since = since.as_deref();
            if let Err(refused) = subscribe_later(conn, cx, &subscribe, since, presence) {
                error(cx, Some(&subscribe), refused.why);
            }
        }
        Control::Unsubscribe { unsubscribe } => match unsubscribe_later(conn, cx, &unsubscribe) {
            Ok(()) => ws_text(cx, &unsubscribed_json(&unsubscribe)),
            Err(refused) => error(cx, Some(&unsubscribe), refused.why),
        },
    }
    true
}

/// An HTTP/2 stream is asked, by a POST on its connection, to join or leave a
/// channel: the answer now (a refusal, or `unsubscribed`), or `None` when the join
/// went to the bus (the answer then comes with its reply, in the outbox).
pub(crate) fn handle_stream_control(
    conn: &mut Connection,
    cx: &mut Cx,
    control: &StreamControl,
) -> Option<ControlAnswer> {
    let name = &control.channel;
    match conn.state {
        State::Sse | State::Stream => {}
        State::SubscribingSse | State::SubscribingStream => {
            return Some(ControlAnswer::refused(
                name,
                409,
                "the stream is not open yet (wait for its head)",
            ))
        }
        // Ending (told to resume, its token expired, a refusal): as good as gone.
        _ => return Some(ControlAnswer::no_stream(name)),
    }
    if control.subscribe {
        let since = control.since.as_deref();
        let refused = subscribe_later(conn, cx, name, since, control.presence).err()?;
        return Some(ControlAnswer::refused(name, refused.status, refused.why));
    }
    Some(match unsubscribe_later(conn, cx, name) {
        Ok(()) => ControlAnswer::new(name, 200, unsubscribed_json(name)),
        Err(refused) => ControlAnswer::refused(name, refused.status, refused.why),
    })
}

#[derive(Deserialize)]
#[serde(untagged, deny_unknown_fields)]
enum Control {
    Subscribe {
        subscribe: String,
        since: Option<String>,
        /// Also the channel's join/leave pushes (its presence companion).
        #[serde(default)]
        presence: bool,
    },
    Unsubscribe {
        unsubscribe: String,
    },
}

/// Why a subscribe or unsubscribe was refused: the text both askers get, and the
/// HTTP status a POST is answered with.
pub(crate) struct Refused {
    pub(crate) status: u16,
    pub(crate) why: &'static str,
}

fn refused(status: u16, why: &'static str) -> Refused {
    Refused { status, why }
}

fn error(cx: &mut Cx, channel: Option<&str>, why: &str) {
    let text = match channel {
        Some(c) => serde_json::json!({ "error": why, "channel": c }),
        None => serde_json::json!({ "error": why }),
    };
    ws_text(cx, &text.to_string());
}

fn unsubscribed_json(name: &str) -> String {
    serde_json::json!({ "unsubscribed": name }).to_string()
}

/// Checks a subscribe and asks the bus to join (with `presence`, its presence
/// companion too, from now); answered by [`joined_later`].
fn subscribe_later(
    conn: &mut Connection,
    cx: &mut Cx,
    name: &str,
    since: Option<&str>,
    presence: bool,
) -> Result<(), Refused> {
    subscribe_as(conn, cx, name, since, presence, None)
}

/// [`subscribe_later`] as a member: a connection without a user becomes `user`'s
/// (logged in with the join, its presence `info` with it), as a Pusher presence
/// subscription does; a connection of another user is refused.
pub(crate) fn subscribe_as(
    conn: &mut Connection,
    cx: &mut Cx,
    name: &str,
    since: Option<&str>,
    presence: bool,
    member: Option<(u64, Option<String>)>,
) -> Result<(), Refused> {
    if let Some((user, _)) = &member {
        if conn.has(LOGGED_IN) && conn.user != *user {
            return Err(refused(409, "this connection is already another user's"));
        }
    }
    // A signed-in Pusher user's internal channel (`pusher_user`) is not a name
    // any client can send.
    let internal = wire::pusher_user::is_user_channel(name) && crate::pusher::is(cx);
    if !internal {
        wire::channel::check_name(name).map_err(|why| refused(400, why))?;
    }
    let since = match since.map(|s| Since::parse(s.as_bytes())) {
        None => None,
        Some(Some(s)) => Some(s),
        Some(None) => return Err(refused(400, "since is not <epoch>-<seq>")),
    };
    let Some(chans) = conn.chans.as_mut() else {
        return Err(refused(409, "not a framed connection"));
    };
    let allow = cx.credentials.access(cx.key);
    if !allow.is_none_or(|g| g.allows(name)) {
        return Err(refused(403, REFUSED_WHY));
    }
    if chans.find(name).is_some() {
        return Err(refused(409, "already subscribed"));
    }
    if chans.len() >= cx.config.max_channels {
        return Err(refused(
            409,
            "too many channels on this connection (--max-channels-per-connection)",
        ));
    }
    // A channel of the request left earlier takes its place back.
    match chans.position(name) {
        Some(i) => chans.replace(i, name, since, false),
        None => chans.push_later(name, since),
    }
    let mut channels = vec![ChannelJoin {
        name: names::shared(name),
        since: since.map(|s| s.seq),
        epoch: since.and_then(|s| s.epoch),
    }];
    let companion = wire::channel::presence_channel(name);
    // `nopresence` claim: the channel is joined, its pushes are not.
    let watches = allow.is_none_or(|g| g.watches(name));
    if presence && watches && chans.find(&companion).is_none() {
        chans.push_later(&companion, None);
        channels.push(ChannelJoin {
            name: names::shared(&companion),
            since: None,
            epoch: None,
        });
    }
    // A member's first join logs the connection in, with its info.
    let (login, info) = match member {
        Some((user, info)) if !conn.has(LOGGED_IN) => {
            conn.user = user;
            conn.set(LOGGED_IN, true);
            (true, info)
        }
        _ => (false, None),
    };
    cx.out.request(Request::Join {
        user: conn.has(LOGGED_IN).then_some(conn.user),
        login,
        since: None,
        epoch: None,
        channels,
        // The user's info went with their first join (see docs/protocol.md
        // "Presence" for what a later subscribe on another router shard shows).
        info,
    });
    Ok(())
}

/// Leaves a channel now: no message of it is written after this.
pub(crate) fn unsubscribe_later(
    conn: &mut Connection,
    cx: &mut Cx,
    name: &str,
) -> Result<(), Refused> {
    let Some(chans) = conn.chans.as_mut() else {
        return Err(refused(409, "not subscribed"));
    };
    if chans.find(name).is_none() {
        return Err(refused(409, "not subscribed"));
    }
    let mut channels = vec![name.to_string()];
    // Its presence companion goes with it.
    let companion = wire::channel::presence_channel(name);
    let watched = chans.find(&companion).is_some();
    for name in [name, companion.as_str()] {
        let Some(i) = chans.find(name) else {
            continue;
        };
        if chans.later(i) {
            chans.remove_at(i);
        } else {
            chans.replace(i, name, None, true);
        }
    }
    if watched {
        channels.push(companion);
    }
    cx.out.request(Request::Leave { channels });
    Ok(())
}

/// A later join is answered: a framed WebSocket's `subscribed` frame, or an HTTP/2
/// POST's answer (in the outbox, for the pump to hand over); then the replay on
/// this connection, and on SSE an `id:` of where every stream stands.
/// A channel the router refused (`refused`) is let go of as an unsubscribe would
/// and answered with the refusal.
pub(crate) fn joined_later(
    conn: &mut Connection,
    cx: &mut Cx,
    reads: Vec<(String, HistoryRead)>,
    refused: Vec<(String, Refusal)>,
) {
    let transport = match conn.state {
        State::Sse => Transport::Sse,
        State::Stream => Transport::Stream,
        _ => Transport::WebSocket,
    };
    for (name, why) in refused {
        let held = conn.chans.as_mut().and_then(|c| {
            let i = c.find(&name)?;
            match c.later(i) {
                true => c.remove_at(i),
                false => c.replace(i, &name, None, true),
            }
            Some(())
        });
        let companion = wire::channel::presence_of(&name).is_some();
        match transport {
            // A presence companion is refused with its channel, which says so.
            _ if companion => {}
            Transport::WebSocket if held.is_some() && crate::pusher::is(cx) => {
                let shown = wire::pusher_user::shown(&name);
                crate::pusher::subscription_error(cx, shown, "SubscriptionError", why.text(), 409)
            }
            Transport::WebSocket if held.is_some() => error(cx, Some(&name), why.text()),
            Transport::WebSocket => {}
            _ => cx
                .out
                .answer(ControlAnswer::refused(&name, 409, why.text())),
        }
    }
    for (name, history) in reads {
        let wanted = conn
            .chans
            .as_ref()
            .and_then(|c| c.find(&name).map(|i| c.has_at(i)));
        if transport != Transport::WebSocket {
            // Answered even when left again before the reply: the join was done,
            // the leave answered after it.
            let body = subscribed_json(&name, &history, wanted.unwrap_or(false));
            cx.out.answer(ControlAnswer::new(&name, 200, body));
        }
        let Some(resume) = wanted else {
            continue; // left again before the answer
        };
        joined(conn, cx, transport, &name, &history, resume);
    }
    if transport == Transport::Sse {
        write_sse_position(conn, cx);
    }
}
