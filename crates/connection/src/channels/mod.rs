//! Named channels on one connection (docs/protocol.md "Channels"): the channels a
//! request names (`channel=`, every transport) and those a framed WebSocket
//! subscribes to later, each with its own position; how their messages are framed
//! per transport; the composite position an SSE id carries.
//!
//! Layout: this file joins, starts a subscription and writes messages; [`list`] is
//! what a connection keeps (its channels, packed, in [`words`]' pool); [`poll`]
//! answers a long-poll over channels; [`control`] subscribes and unsubscribes on an
//! open connection (a framed WebSocket's control frames, an HTTP/2 stream's POSTs).

mod control;
mod list;
mod names;
mod poll;
#[cfg(test)]
mod tests;
mod words;

pub(super) use control::{
    handle_control, handle_stream_control, joined_later, subscribe_as, unsubscribe_later,
};
pub(crate) use list::Access;
pub(super) use list::Chans;
pub(crate) use names::id as name_id;
use poll::poll_delivery;
pub(super) use poll::{answer_poll_timeout, poll_joined};

use super::{replay, Connection, Cx, State, HTTP10, LOGGED_IN, RESUME};
use crate::delivery::{Frames, Outcome};
use bus::{ChannelJoin, HistoryRead, Refusal, Request};
use std::io::Write as _;
use wire::{Since, Transport};

/// What a channel the token does not allow is told.
pub(super) const REFUSED_WHY: &str = "the token does not allow this channel";

/// Starts a subscription or poll whose request names channels: each allowed one
/// joins (with the user's login, when the path has an id, in the same call), the
/// others are kept as refused and reported once the transport's head is out.
/// `allow`: the channels the token allows (`None`: no JWT, all); `info`: its
/// `info` claim, the user's presence info. A connection
/// that held channels before (a keep-alive long-poll) leaves those it no longer
/// names, and all of them when its user changes (the router counts each
/// subscription as its user's).
pub(super) fn join_at_start(
    conn: &mut Connection,
    cx: &mut Cx,
    user: Option<u64>,
    since: Option<Since>,
    channels: Vec<(String, Option<Since>)>,
    (allow, info): (Option<Access>, Option<Box<str>>),
    placed: bool,
) {
    if let Some(old) = conn.chans.take() {
        let same_user = user == conn.has(LOGGED_IN).then_some(conn.user);
        let gone: Vec<String> = old
            .joined()
            .into_iter()
            .filter(|n| !same_user || !channels.iter().any(|(c, _)| c == n))
            .collect();
        if !gone.is_empty() {
            cx.out.request(Request::Leave { channels: gone });
        }
    }
    // A presence companion is allowed with its channel; the friends companion of
    // the connection's own user always (what it carries is theirs to know).
    let allowed = |name: &str| {
        if let Some(of) = wire::channel::friends_of(name) {
            return user == Some(of);
        }
        match wire::channel::presence_of(name) {
            // `nopresence` claim: no pushes of this channel's joins and leaves.
            Some(name) => allow.as_ref().is_none_or(|g| g.watches(name)),
            None => allow.as_ref().is_none_or(|g| g.allows(name)),
        }
    };
    let chans = Chans::new(
        placed,
        user.map(|_| since),
        channels
            .iter()
            .map(|(n, at)| (n.as_str(), *at, !allowed(n))),
    );
    // The request's names are the table's: the router keeps them as its channels'.
    let joins = channels
        .into_iter()
        .filter(|(name, _)| allowed(name))
        .map(|(name, at)| ChannelJoin {
            name: names::shared(&name),
            since: at.map(|a| a.seq),
            epoch: at.and_then(|a| a.epoch),
        })
        .collect();
    if let Some(user) = user {
        if conn.has(LOGGED_IN) && conn.user != user {
            conn.logout(cx);
        }
        conn.user = user;
        conn.set(LOGGED_IN, true);
    }
    cx.credentials.set_access(cx.key, allow);
    conn.chans = Some(chans);
    cx.out.request(Request::Join {
        user,
        login: user.is_some(),
        since: since.map(|s| s.seq),
        epoch: since.and_then(|s| s.epoch),
        channels: joins,
        info: info.filter(|_| user.is_some()).map(String::from),
    });
}

/// A refreshed token's `chan` claim: what later subscribes are judged by (the
/// channels already joined stay).
pub(super) fn regrant(conn: &Connection, cx: &mut Cx, allow: Access) {
    if conn.chans.is_some() {
        cx.credentials.set_access(cx.key, Some(allow));
    }
}

/// Leaves every joined channel (the connection closed): one request.
pub(super) fn leave_all(conn: &mut Connection, cx: &mut Cx) {
    let Some(chans) = conn.chans.take() else {
        return;
    };
    let channels = chans.joined();
    if !channels.is_empty() {
        cx.out.request(Request::Leave { channels });
    }
}

/// The join of a subscription that names channels is answered: the transport's
/// head, the refused channels (by the token, or by the router: `refused`), then
/// per stream its gap (if any) and replay, then deliveries as they come.
pub(super) fn start(
    conn: &mut Connection,
    cx: &mut Cx,
    transport: Transport,
    login: Option<HistoryRead>,
    reads: Vec<(String, HistoryRead)>,
    refused: Vec<(String, Refusal)>,
) {
    let ws_key = conn.pending.as_mut().and_then(|p| p.ws_key.take());
    let user = conn.has(LOGGED_IN).then_some(conn.user);
    let http10 = conn.has(HTTP10);
    let resume = conn.has(RESUME) || transport == Transport::Sse;
    // The head.
    match transport {
        Transport::Stream if http10 => cx.out.write(|out| {
            wire::write_stream_head_http10(out);
            wire::write_stream_line(out, &[welcome(user).as_bytes()]);
        }),
        Transport::Stream => cx.out.write(|out| {
            wire::write_stream_head(out);
            wire::write_stream_message(out, welcome(user).as_bytes());
        }),
        Transport::Sse => {
            let retry = cx.config.sse_retry_ms;
            cx.out.write(|out| wire::write_sse_head(out, retry));
        }
        Transport::WebSocket => {
            let key = ws_key.unwrap_or_default();
            cx.out.write(|out| wire::write_ws_handshake(out, &key));
            crate::pusher::established(cx);
        }
    }
    conn.state = match transport {
        Transport::Stream => State::Stream,
        Transport::Sse => State::Sse,
        Transport::WebSocket => State::WebSocket,
    };
    if transport != Transport::WebSocket {
        // Streams never go back to requests: pipelined input is dropped.
        if let Some(p) = conn.pending.as_mut() {
            p.input.clear();
        }
    }
    if let Some(chans) = conn.chans.as_mut() {
        for (name, why) in refused {
            chans.refuse(&name, why);
        }
    }
    let refused = conn.chans.as_ref().map(|c| c.refused()).unwrap_or_default();
    // A presence companion is refused with its channel, which says so.
    let refused = refused
        .iter()
        .filter(|(name, _)| wire::channel::presence_of(name).is_none());
    for (name, why) in refused {
        refuse(conn, cx, transport, name, why);
    }
    // The user's stream: its position and replay, as a connection without channels.
    if let Some(history) = login {
        if let Some(chans) = conn.chans.as_mut() {
            chans.set_user_at(Some(Since {
                epoch: history.epoch,
                seq: history.last,
            }));
        }
        if resume {
            replay_stream(conn, cx, transport, None, &history);
        }
    }
    for (name, history) in reads {
        if let Some(chans) = conn.chans.as_mut() {
            chans.set_named_at(
                &name,
                Some(Since {
                    epoch: history.epoch,
                    seq: first_replayed(&history, resume) - 1,
                }),
            );
        }
        joined(conn, cx, transport, &name, &history, resume);
    }
    if transport == Transport::Sse {
        write_sse_position(conn, cx);
    }
    if transport == Transport::WebSocket
        && conn.pending.as_ref().is_some_and(|p| !p.input.is_empty())
    {
        cx.out.resume_input();
    }
    conn.tidy();
    conn.arm_heartbeat(cx);
}

/// `welcome <id>`, or `welcome` for a connection without a user.
fn welcome(user: Option<u64>) -> String {
    match user {
        Some(u) => format!("welcome {u}"),
        None => "welcome".to_string(),
    }
}

/// The first number `history` replays (`last + 1` when it replays nothing).
fn first_replayed(history: &HistoryRead, resume: bool) -> u64 {
    match history.messages.first() {
        Some(m) if resume => m.0,
        _ => history.last + 1,
    }
}

/// A refused channel (the token does not allow it, or the router refused it), in
/// the transport's words.
fn refuse(conn: &mut Connection, cx: &mut Cx, transport: Transport, name: &str, why: &str) {
    let json = serde_json::json!({ "channel": name, "error": why }).to_string();
    match transport {
        Transport::Stream if conn.has(HTTP10) => {
            let line = format!("! {name} {why}");
            cx.out
                .write(|out| wire::write_stream_line(out, &[line.as_bytes()]));
        }
        Transport::Stream => {
            let line = format!("! {name} {why}");
            cx.out
                .write(|out| wire::write_stream_message(out, line.as_bytes()));
        }
        Transport::Sse => cx.out.write(|out| {
            out.extend_from_slice(b"event: refused\n");
            wire::write_sse_data(out, json.as_bytes());
        }),
        Transport::WebSocket => ws_text(cx, &json),
    }
}

/// A channel's join is answered on its connection: a WebSocket's `subscribed` frame
/// (a presence companion is answered by its channel's, the friends companion by
/// none), the replay when the client
/// resumes, then the channel stands where the join read it.
fn joined(
    conn: &mut Connection,
    cx: &mut Cx,
    transport: Transport,
    name: &str,
    history: &HistoryRead,
    resume: bool,
) {
    if transport == Transport::WebSocket && !wire::channel::is_companion(name) {
        match crate::pusher::is(cx) {
            true => crate::pusher::joined(cx, name),
            false => ws_text(cx, &subscribed_json(name, history, resume)),
        }
    }
    if resume {
        replay_stream(conn, cx, transport, Some(name), history);
    }
    if let Some(chans) = conn.chans.as_mut() {
        chans.set_named_at(
            name,
            Some(Since {
                epoch: history.epoch,
                seq: history.last,
            }),
        );
    }
}

/// Where every stream of an SSE subscription stands now, as an `id:` without data:
/// an EventSource takes it as its last event id without firing an event (WHATWG
/// HTML, "dispatch the event"), so a channel quiet until a drop still resumes from
/// here instead of from the reconnect.
fn write_sse_position(conn: &Connection, cx: &mut Cx) {
    if let Some(chans) = conn.chans.as_ref() {
        cx.out.write(|out| {
            out.extend_from_slice(b"id: ");
            chans.write_composite(out);
            out.extend_from_slice(b"\n\n");
        });
    }
}

/// `{"subscribed":…}`: a WebSocket's frame, an HTTP/2 POST's answer. `pos` is just
/// before the first replayed message.
fn subscribed_json(name: &str, history: &HistoryRead, resume: bool) -> String {
    let at = Since {
        epoch: history.epoch,
        seq: first_replayed(history, resume) - 1,
    };
    serde_json::json!({
        "subscribed": name,
        "pos": at.to_string(),
        "gap": history.gap && resume,
    })
    .to_string()
}

fn ws_text(cx: &mut Cx, text: &str) {
    cx.out
        .write(|out| wire::write_ws_frame(out, wire::Opcode::Text, text.as_bytes()));
}

/// One stream's gap and replay (`channel`: `None` for the user's), within the
/// output budget: the newest that fit, an older cut reported as a gap.
fn replay_stream(
    conn: &mut Connection,
    cx: &mut Cx,
    transport: Transport,
    channel: Option<&str>,
    history: &HistoryRead,
) {
    let framing = replay::Framing {
        transport,
        http10: conn.has(HTTP10),
        epoch: history.epoch,
    };
    let (messages, cut) = replay::fit(cx, history, framing);
    let gap = history.gap || cut;
    if gap {
        let first = messages.first().map_or(history.last + 1, |m| m.0);
        match transport {
            Transport::Sse => cx.out.write(|out| {
                out.extend_from_slice(b"event: gap\n");
                let data = match channel {
                    Some(c) => {
                        serde_json::json!({"channel": c, "first": first, "epoch": history.epoch})
                    }
                    None => serde_json::json!({"first": first, "epoch": history.epoch}),
                };
                wire::write_sse_data(out, data.to_string().as_bytes());
            }),
            Transport::Stream => {
                let line = format!(
                    "{} gap {}",
                    channel.map_or(conn.user.to_string(), str::to_string),
                    Since {
                        epoch: history.epoch,
                        seq: first - 1
                    }
                );
                cx.out.write(|out| match conn.has(HTTP10) {
                    true => wire::write_stream_line(out, &[line.as_bytes()]),
                    false => wire::write_stream_message(out, line.as_bytes()),
                });
            }
            Transport::WebSocket if channel.is_none() => {
                let at = Since {
                    epoch: history.epoch,
                    seq: first - 1,
                };
                cx.out.write(|out| wire::write_ws_position(out, at, true));
            }
            // A channel's gap is in its `subscribed` frame.
            Transport::WebSocket => {}
        }
    }
    for (seq, msg) in messages {
        let mut frames = Frames::of(msg);
        write_message(conn, cx, history.epoch.unwrap_or(0), *seq, &mut frames);
    }
}

/// A message on a connection with channels (or a framed WebSocket), live or
/// replayed: its position noted, then framed for the transport.
pub(super) fn deliver(
    conn: &mut Connection,
    cx: &mut Cx,
    epoch: u32,
    seq: u64,
    frames: &mut Frames,
) -> Outcome {
    if conn.state == State::PollWaiting {
        return poll_delivery(conn, cx, epoch, seq, frames);
    }
    if !conn.state.is_subscription() {
        return Outcome::Skipped;
    }
    if crate::delivery::too_slow(cx, frames.payload().len()) {
        return Outcome::SlowDrop;
    }
    if !write_message(conn, cx, epoch, seq, frames) {
        return Outcome::Skipped;
    }
    Outcome::Sent
}

/// Notes the position and writes one message; false when it is for a channel the
/// connection does not hold (left since the publish).
fn write_message(
    conn: &mut Connection,
    cx: &mut Cx,
    epoch: u32,
    seq: u64,
    frames: &mut Frames,
) -> bool {
    let at = Since {
        epoch: Some(epoch),
        seq,
    };
    let channel = frames.channel();
    if let Some(chans) = conn.chans.as_mut() {
        match frames.channel_id() {
            Some(id) => match id.and_then(|id| chans.find_id(id)) {
                Some(i) => chans.set_at(i, Some(at)),
                None => return false,
            },
            None => chans.set_user_at(Some(at)),
        }
    } else if channel.is_some() {
        return false;
    }
    match conn.state {
        State::Sse => {
            let chans = conn.chans.as_ref();
            cx.out.write(|out| {
                out.extend_from_slice(b"id: ");
                match chans {
                    Some(c) => c.write_composite(out),
                    None => {
                        let _ = write!(out, "{at}");
                    }
                }
                out.push(b'\n');
            });
            cx.out.send(frames.sse());
        }
        State::Stream if conn.has(HTTP10) => cx.out.send(frames.tagged_line()),
        State::Stream => cx.out.send(frames.tagged_stream()),
        _ if crate::pusher::is(cx) => {
            let Some(name) = channel else {
                return false; // a myriad user's own messages: not in Pusher's protocol
            };
            if crate::pusher_user::control(conn, cx, name, frames.payload()) {
                return true;
            }
            if let Some(push) =
                channel.and_then(|c| crate::pusher::member_push(c, frames.payload()))
            {
                cx.out.write(|out| out.extend_from_slice(&push));
                return true;
            }
            let (frame, from) = frames.pusher();
            if crate::pusher::is_own(cx, from) {
                return false;
            }
            cx.out.send(frame);
        }
        _ if channel.is_some() => cx.out.send(frames.envelope(at)),
        // A user delivery on a framed WebSocket: its position is the user's.
        _ => cx.out.write(|out| frames.write_envelope(out, at)),
    }
    true
}
