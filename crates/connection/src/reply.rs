//! Bus replies: an API call's answer becomes its HTTP response, a subscription's
//! login reply becomes the transport's head (and resumed history), a long-poll's
//! becomes an answer or a wait.

use super::replay::{self, Framing};
use super::{Connection, Cx, State, HTTP10, KEEP_ALIVE, RESUME};
use bus::http::not_stored_text;
use bus::{Call, HistoryRead, Presence, PresenceOf, PublishAnswer, Reply};
use std::io::Write as _;
use wire::Transport;

pub(super) fn handle(conn: &mut Connection, cx: &mut Cx, reply: Reply) {
    match (conn.state, conn.state.subscribing(), reply) {
        // A Pusher API `GET` (`pusher_api`) answers in Pusher's words.
        (State::Calling(_), _, Reply::Presence { presence, .. })
            if super::pusher_api::answer(conn, cx, &presence) => {}
        (State::Calling(_), _, Reply::Occupied(list))
            if super::pusher_api::answer_list(conn, cx, &list) => {}
        (State::Calling(call), _, reply) => api_response(conn, cx, call, reply),
        (State::Polling, _, Reply::Unavailable(message) | Reply::TimedOut(message))
        | (_, Some(_), Reply::Unavailable(message) | Reply::TimedOut(message)) => {
            conn.fail(cx, 503, &format!("router unavailable: {message}"));
        }
        (_, Some(transport), Reply::History(history)) => {
            start_subscription(conn, cx, transport, history)
        }
        (State::Polling, _, Reply::History(history)) => poll_reply(conn, cx, history),
        // A subscription or poll that names channels (or a framed WebSocket).
        (
            _,
            Some(transport),
            Reply::Joined {
                login,
                channels,
                refused,
            },
        ) => super::channels::start(conn, cx, transport, login, channels, refused),
        (
            State::Polling,
            _,
            Reply::Joined {
                login,
                channels,
                refused,
            },
        ) => super::channels::poll_joined(conn, cx, login, channels, refused),
        // A later subscribe: a framed WebSocket's, or an HTTP/2 stream's by POST.
        (
            State::WebSocket | State::Sse | State::Stream,
            _,
            Reply::Joined {
                channels, refused, ..
            },
        ) => super::channels::joined_later(conn, cx, channels, refused),
        // A Pusher presence channel's members, asked when it was joined.
        (
            State::WebSocket,
            _,
            Reply::Presence {
                of: bus::PresenceOf::Channel(name),
                presence,
            },
        ) if super::pusher::is(cx) => super::pusher::members(conn, cx, &name, presence),
        // A Pusher client event's publish: nothing to tell the client (Pusher
        // answers none); a failure is its `pusher:error`.
        (State::WebSocket, _, Reply::Published { .. }) if super::pusher::is(cx) => {}
        (State::WebSocket, _, Reply::NotStored { error, .. }) if super::pusher::is(cx) => {
            super::pusher::error(cx, None, &format!("client event not stored: {error}"))
        }
        (State::WebSocket, _, Reply::Unavailable(m) | Reply::TimedOut(m))
            if super::pusher::is(cx) =>
        {
            super::pusher::error(cx, None, &format!("client event: router unavailable: {m}"))
        }
        // A client publish over WebSocket (C7).
        (
            State::WebSocket,
            _,
            Reply::Published {
                connections, users, ..
            },
        ) => super::client_publish::answer(cx, connections, users),
        (
            State::WebSocket,
            _,
            Reply::NotStored {
                connections,
                users,
                error,
                ..
            },
        ) => super::client_publish::error(cx, &not_stored_text(connections, users, &error)),
        (State::WebSocket, _, Reply::Unavailable(message)) => {
            super::client_publish::error(cx, &format!("router unavailable: {message}"))
        }
        (State::WebSocket, _, Reply::TimedOut(message)) => {
            super::client_publish::error(cx, &format!("timed out: {message}"))
        }
        // A reply with nothing to act on (a logout's), or for a request this
        // connection has since moved past.
        _ => {}
    }
}

/// Formats an API reply: JSON for success, text for errors (docs/protocol.md, Endpoints).
fn api_response(conn: &mut Connection, cx: &mut Cx, call: Call, reply: Reply) {
    // A Pusher `GET` answered otherwise (unavailable, timed out) asks no more.
    if let Some(p) = conn.pending.as_mut() {
        p.pusher_ask = None;
    }
    if let Call::Publish | Call::PublishBatch = call {
        return publish_response(conn, cx, call, reply);
    }
    let keep = conn.has(KEEP_ALIVE);
    let mut body = Vec::with_capacity(64);
    // Writing into a Vec cannot fail.
    match (call, reply) {
        (Call::Subscribe, Reply::Changed { edges, changed }) => {
            write!(body, r#"{{"edges":{edges},"added":{changed}}}"#).expect("Vec")
        }
        (Call::Unsubscribe, Reply::Changed { edges, changed }) => {
            write!(body, r#"{{"edges":{edges},"removed":{changed}}}"#).expect("Vec")
        }
        (Call::Subscribers | Call::Subscriptions, Reply::Ids(ids)) => {
            serde_json::to_writer(&mut body, &ids).expect("ids serialise")
        }
        (Call::ReadHistory, Reply::History(history)) => write_history(&mut body, &history),
        (Call::Presence | Call::PresenceStats, Reply::Presence { of, presence }) => {
            write_presence(&mut body, call == Call::Presence, &of, &presence)
        }
        (Call::Online, Reply::Online { user, online }) => {
            let doc = serde_json::json!({"user": user, "count": online.len(), "online": online});
            serde_json::to_writer(&mut body, &doc).expect("Vec write")
        }
        (Call::Stats, Reply::Stats(doc)) => {
            serde_json::to_writer(&mut body, &doc).expect("a JSON value serialises")
        }
        (_, Reply::Unavailable(message)) => {
            return conn.respond(cx, keep, |out| {
                let message = format!("unavailable: {message}");
                wire::write_error_response(out, 503, &message, keep, &[("Retry-After", "1")])
            });
        }
        (_, Reply::TimedOut(message)) => {
            return conn.respond(cx, keep, |out| {
                let message = format!("timed out: {message}");
                wire::write_error_response(out, 504, &message, keep, &[])
            });
        }
        (call, reply) => {
            // A bus answering a different question is a bug on the other side; the
            // client gets a 500 rather than a made-up success.
            tracing::error!(?call, ?reply, "bus reply does not match the request");
            return conn.fail(cx, 500, "internal error: unexpected reply");
        }
    }
    body.push(b'\n');
    conn.respond(cx, keep, |out| {
        wire::write_response(out, 200, "application/json", &body, keep, &[])
    });
}

/// `GET /history/<channel>`'s answer: `{"messages":[{"seq":n,"data":"…"}],
/// "pos":"<epoch>-<seq>","gap":false}`; `pos` is where to subscribe from to go on
/// with no gap and no repeat.
fn write_history(body: &mut Vec<u8>, history: &HistoryRead) {
    let messages: Vec<serde_json::Value> = history
        .messages
        .iter()
        .map(
            |(seq, m)| serde_json::json!({"seq": seq, "data": String::from_utf8_lossy(&m.payload)}),
        )
        .collect();
    let pos = wire::Since {
        epoch: history.epoch,
        seq: history.last,
    };
    let doc = serde_json::json!({"messages": messages, "pos": pos.to_string(), "gap": history.gap});
    serde_json::to_writer(body, &doc).expect("Vec write");
}

/// `GET /presence/<channel>`'s answer: `{"channel":"C","users":[{"user":42,
/// "connections":2,"info":{…}}],"count":1,"connections":2,"cut":false}` (`info`
/// only for a user whose token carried one); `/stats`:
/// `{"channel":"C","users":1,"connections":2}`. A subject's says `"subject":42`.
pub fn write_presence(body: &mut Vec<u8>, list: bool, of: &PresenceOf, presence: &Presence) {
    // Written directly, keys in order: a 10,000-member list is one pass with no
    // JSON value per member. Writing into a Vec cannot fail.
    body.push(b'{');
    match of {
        PresenceOf::Channel(name) => {
            body.extend_from_slice(b"\"channel\":");
            serde_json::to_writer(&mut *body, name).expect("Vec write");
        }
        PresenceOf::Subject(id) => write!(body, r#""subject":{id}"#).expect("Vec"),
    }
    let (count, connections) = (presence.count, presence.connections);
    if !list {
        write!(body, r#","connections":{connections},"users":{count}}}"#).expect("Vec");
        return;
    }
    let cut = presence.cut;
    write!(
        body,
        r#","connections":{connections},"count":{count},"cut":{cut},"users":["#
    )
    .expect("Vec");
    for (i, m) in presence.users.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        write!(body, r#"{{"connections":{}"#, m.connections).expect("Vec");
        // The router keeps the compact text of the object the token's claim
        // parsed to: valid JSON as it is.
        if let Some(info) = &m.info {
            write!(body, r#","info":{info}"#).expect("Vec");
        }
        write!(body, r#","user":{}}}"#, m.user).expect("Vec");
    }
    body.extend_from_slice(b"]}");
}

/// A publish's answer (`bus::PublishAnswer`, shared with the router's publish port).
fn publish_response(conn: &mut Connection, cx: &mut Cx, call: Call, reply: Reply) {
    let Some(answer) = PublishAnswer::of(call == Call::PublishBatch, reply) else {
        // A bus answering a different question is a bug on the other side.
        tracing::error!(?call, "bus reply to a publish is not a publish's");
        return conn.fail(cx, 500, "internal error: unexpected reply");
    };
    let keep = conn.has(KEEP_ALIVE);
    conn.respond(cx, keep, |out| {
        let (status, json, retry) = (answer.status, answer.json, answer.retry_after);
        wire::write_api_answer(out, status, json, &answer.body, keep, retry)
    });
}

/// The login of a subscription is done: the transport's head goes out, then what
/// history holds after the client's resume point — as much of it as the output
/// budget takes, the newest first kept ([`replay`](super::replay)) — then
/// deliveries as they come.
fn start_subscription(
    conn: &mut Connection,
    cx: &mut Cx,
    transport: Transport,
    history: HistoryRead,
) {
    let ws_key = conn.pending.as_mut().and_then(|p| p.ws_key.take());
    let user = conn.user;
    let resume = conn.has(RESUME);
    let framing = Framing {
        transport,
        http10: conn.has(HTTP10),
        epoch: history.epoch,
    };
    // Streams and WebSockets replay only when asked to resume; SSE whenever the
    // router sent history (it does for a `Last-Event-ID`).
    let (messages, cut) = match transport {
        Transport::Sse => replay::fit(cx, &history, framing),
        _ if resume => replay::fit(cx, &history, framing),
        _ => (&history.messages[..0], false),
    };
    let gap = history.gap || cut;
    // Where a resuming stream or WebSocket client stands before the replayed
    // messages; each later message is the next number (SPEC B6).
    let position = wire::Since {
        epoch: history.epoch,
        seq: messages.first().map_or(history.last, |m| m.0 - 1),
    };
    match transport {
        Transport::Stream if framing.http10 => {
            cx.out.write(|out| {
                wire::write_stream_head_http10(out);
                wire::write_stream_line(out, &[format!("welcome {user}").as_bytes()]);
            });
            if resume {
                let gap = if gap { " gap" } else { "" };
                let line = format!("position {position}{gap}");
                cx.out
                    .write(|out| wire::write_stream_line(out, &[line.as_bytes()]));
            }
            conn.state = State::Stream;
            conn.pending = None;
        }
        Transport::Stream => {
            cx.out.write(|out| {
                wire::write_stream_head(out);
                wire::write_welcome_chunk(out, user);
            });
            if resume {
                cx.out
                    .write(|out| wire::write_stream_position(out, position, gap));
            }
            conn.state = State::Stream;
            // Streams never go back to requests: pipelined input is dropped.
            conn.pending = None;
        }
        Transport::Sse => {
            let retry = cx.config.sse_retry_ms;
            cx.out.write(|out| wire::write_sse_head(out, retry));
            if gap {
                let first = messages.first().map_or(history.last + 1, |m| m.0);
                cx.out
                    .write(|out| wire::write_sse_gap(out, first, history.epoch));
            }
            conn.state = State::Sse;
            conn.pending = None;
        }
        Transport::WebSocket => {
            let key = ws_key.unwrap_or_default();
            cx.out.write(|out| wire::write_ws_handshake(out, &key));
            if resume {
                cx.out
                    .write(|out| wire::write_ws_position(out, position, gap));
            }
            conn.state = State::WebSocket;
        }
    }
    for (seq, msg) in messages {
        cx.out.write(|out| framing.write(out, *seq, &msg.payload));
    }
    // Client frames may already be waiting behind the upgrade request.
    if transport == Transport::WebSocket
        && conn.pending.as_ref().is_some_and(|p| !p.input.is_empty())
    {
        cx.out.resume_input();
    }
    conn.tidy();
    conn.arm_heartbeat(cx);
}

/// A long-poll's login reply: answer at once when history has news (or a gap to
/// report), otherwise wait for the next delivery or the poll timeout.
fn poll_reply(conn: &mut Connection, cx: &mut Cx, history: HistoryRead) {
    let since = conn
        .pending
        .as_ref()
        .and_then(|p| p.poll_since)
        .unwrap_or(history.last);
    let epoch = history.epoch;
    if !history.messages.is_empty() || history.gap {
        // One answer carries at most `max_queued` bytes of payload (at least one
        // message): the client asks again from the last one it got.
        let mut budget = cx.config.max_queued;
        let messages: Vec<(u64, &[u8])> = poll_share(&history.messages, &mut budget)
            .iter()
            .map(|(seq, m)| (*seq, &m.payload[..]))
            .collect();
        let messages = if messages.is_empty() {
            history
                .messages
                .first()
                .map(|(seq, m)| vec![(*seq, &m.payload[..])])
                .unwrap_or_default()
        } else {
            messages
        };
        // The router's position, never the client's `since` echoed back: after a
        // restart the client is ahead and must move to the new numbers (echoing it
        // made the client ask for the same `since` forever).
        let last = match messages.last() {
            Some(&(seq, _)) if messages.len() < history.messages.len() => seq,
            _ => history.last,
        };
        answer_poll(conn, cx, &messages, last, history.gap, epoch);
    } else {
        // No news and no gap: `since` is the user's current position.
        let p = conn.pending();
        p.poll_since = Some(since);
        p.poll_epoch = epoch;
        conn.state = State::PollWaiting;
        conn.arm(cx, cx.config.poll_timeout);
    }
}

/// The oldest of `messages` whose payloads fit in `budget` (what one long-poll
/// answer carries), the budget taken down by them.
pub(super) fn poll_share<'h>(
    messages: &'h [(u64, std::sync::Arc<bus::Message>)],
    budget: &mut usize,
) -> &'h [(u64, std::sync::Arc<bus::Message>)] {
    let fit = messages
        .iter()
        .take_while(|(_, m)| {
            let fits = *budget >= m.payload.len();
            *budget = budget.saturating_sub(m.payload.len().max(1));
            fits
        })
        .count();
    &messages[..fit]
}

/// A waiting long-poll's time is up: an empty answer that keeps the client's place.
pub(super) fn answer_poll_timeout(conn: &mut Connection, cx: &mut Cx) {
    let (since, epoch) = conn
        .pending
        .as_ref()
        .map_or((0, None), |p| (p.poll_since.unwrap_or(0), p.poll_epoch));
    answer_poll(conn, cx, &[], since, false, epoch);
}

/// Answers a long-poll with `messages` (the JSON body of `wire::write_poll_body`).
pub(super) fn answer_poll(
    conn: &mut Connection,
    cx: &mut Cx,
    messages: &[(u64, &[u8])],
    last: u64,
    gap: bool,
    epoch: Option<u32>,
) {
    if let Some(p) = conn.pending.as_mut() {
        p.poll_since = None;
        p.poll_epoch = None;
    }
    // The poll's token served this one answer; the next request brings its own.
    cx.credentials.set_expiry(cx.key, None);
    let keep = conn.has(KEEP_ALIVE);
    let mut body = Vec::with_capacity(64 + messages.iter().map(|m| m.1.len() + 24).sum::<usize>());
    wire::write_poll_body(&mut body, messages, last, gap, epoch);
    send_poll_body(conn, cx, keep, &body);
}

/// A long-poll's JSON answer (any origin may read it), then the next request.
pub(super) fn send_poll_body(conn: &mut Connection, cx: &mut Cx, keep: bool, body: &[u8]) {
    conn.respond(cx, keep, |out| {
        wire::write_response(
            out,
            200,
            "application/json",
            body,
            keep,
            &[
                ("Cache-Control", "no-cache"),
                ("Access-Control-Allow-Origin", "*"),
            ],
        )
    });
    conn.tidy();
}
