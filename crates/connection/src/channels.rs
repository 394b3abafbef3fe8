//! Named channels on one connection (docs/protocol.md "Channels"): the channels a
//! request names (`channel=`, every transport) and those a framed WebSocket
//! subscribes to later, each with its own position; how their messages are framed
//! per transport; the composite position an SSE id carries; and the WebSocket's
//! control frames (`subscribe`, `unsubscribe`).
//!
//! Budget: a connection without channels keeps nothing here (`Connection::chans`
//! is `None`, 8 bytes); one with channels keeps a boxed [`Chans`]: its list, one
//! 32-byte [`Sub`] per channel — the name shared with every other subscriber of
//! the process ([`intern`]) and the position packed ([`Place`]).

use super::{replay, Connection, Cx, State, FRAMED, HTTP10, KEEP_ALIVE, LOGGED_IN, RESUME};
use crate::delivery::{Frames, Outcome};
use bus::{ChannelJoin, HistoryRead, Request};
use serde::Deserialize;
use std::collections::HashSet;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use wire::{Since, Transport};

/// What a refused channel is told.
const REFUSED_WHY: &str = "the token does not allow this channel";

/// The channels of one connection.
#[derive(Debug, Default)]
pub(super) struct Chans {
    /// The channels the token allows (`None`: no JWT configured, all of them).
    allow: Option<Box<auth::ChannelGrant>>,
    /// The user's position (the first part of a composite id), when the
    /// connection has a user.
    user: Place,
    /// In the request's order (the order of a composite id's parts), then those a
    /// WebSocket subscribed to later.
    list: Vec<Sub>,
}

/// A position packed in 16 bytes (an `Option<Since>` and a flag would take 24).
#[derive(Clone, Copy, Debug, Default)]
struct Place {
    seq: u64,
    epoch: u32,
    flags: u8,
}

const HAS_AT: u8 = 1;
const HAS_EPOCH: u8 = 2;
/// Refused (the token does not allow the channel): kept only for its place in a
/// composite id, never joined.
const REFUSED: u8 = 4;

impl Place {
    fn get(&self) -> Option<Since> {
        (self.flags & HAS_AT != 0).then_some(Since {
            epoch: (self.flags & HAS_EPOCH != 0).then_some(self.epoch),
            seq: self.seq,
        })
    }

    fn set(&mut self, at: Option<Since>) {
        self.flags &= REFUSED;
        if let Some(at) = at {
            self.flags |= HAS_AT;
            self.seq = at.seq;
            if let Some(e) = at.epoch {
                self.flags |= HAS_EPOCH;
                self.epoch = e;
            }
        }
    }
}

/// One channel of a connection: 32 bytes.
#[derive(Debug)]
struct Sub {
    name: Arc<str>,
    /// The last position delivered (or where the client resumed).
    place: Place,
}

impl Sub {
    fn new(name: &str, at: Option<Since>, refused: bool) -> Sub {
        let mut place = Place::default();
        place.set(at);
        if refused {
            place.flags |= REFUSED;
        }
        Sub {
            name: intern(name),
            place,
        }
    }

    fn at(&self) -> Option<Since> {
        self.place.get()
    }

    fn set_at(&mut self, at: Option<Since>) {
        self.place.set(at);
    }

    fn refused(&self) -> bool {
        self.place.flags & REFUSED != 0
    }
}

impl Drop for Sub {
    fn drop(&mut self) {
        release(&self.name);
    }
}

/// The process's channel names held by connections: one allocation per name,
/// however many connections hold it (a name is up to 200 bytes; a subscriber
/// keeps 16 for it). Taken only when a connection subscribes or lets go, never
/// per message.
static NAMES: Mutex<Option<HashSet<Arc<str>>>> = Mutex::new(None);

fn intern(name: &str) -> Arc<str> {
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let names = names.get_or_insert_with(HashSet::new);
    if let Some(held) = names.get(name) {
        return held.clone();
    }
    let held: Arc<str> = name.into();
    names.insert(held.clone());
    held
}

/// A subscriber lets go of `name`: the table forgets a name nobody else holds.
fn release(name: &Arc<str>) {
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    // The table's and the caller's.
    if Arc::strong_count(name) == 2 {
        if let Some(names) = names.as_mut() {
            names.remove(name);
        }
    }
}

impl Chans {
    fn find(&mut self, name: &str) -> Option<&mut Sub> {
        self.list
            .iter_mut()
            .find(|s| &*s.name == name && !s.refused())
    }

    /// The names joined (not refused).
    fn joined(&self) -> Vec<String> {
        self.list
            .iter()
            .filter(|s| !s.refused())
            .map(|s| s.name.to_string())
            .collect()
    }

    /// The names refused (the token does not allow them).
    fn refused(&self) -> Vec<String> {
        self.list
            .iter()
            .filter(|s| s.refused())
            .map(|s| s.name.to_string())
            .collect()
    }

    /// How many channels count against `--max-channels-per-connection`.
    fn len(&self) -> usize {
        self.list.iter().filter(|s| !s.refused()).count()
    }

    /// The composite position: the user's part (with a user), then each channel's.
    fn write_composite(&self, out: &mut Vec<u8>, user: bool) {
        let user_part = user.then(|| self.user.get());
        let parts = user_part.into_iter().chain(self.list.iter().map(Sub::at));
        wire::write_positions(out, parts);
    }
}

/// Starts a subscription or poll whose request names channels: each allowed one
/// joins (with the user's login, when the path has an id, in the same call), the
/// others are kept as refused and reported once the transport's head is out.
/// `allow`: the channels the token allows (`None`: no JWT, all). A connection
/// that held channels before (a keep-alive long-poll) leaves those it no longer
/// names.
pub(super) fn join_at_start(
    conn: &mut Connection,
    cx: &mut Cx,
    user: Option<u64>,
    since: Option<Since>,
    channels: Vec<(String, Option<Since>)>,
    allow: Option<auth::ChannelGrant>,
) {
    if let Some(old) = conn.chans.take() {
        let gone: Vec<String> = old
            .joined()
            .into_iter()
            .filter(|n| !channels.iter().any(|(c, _)| c == n))
            .collect();
        if !gone.is_empty() {
            cx.out.request(Request::Leave {
                user: conn.has(LOGGED_IN).then_some(conn.user),
                channels: gone,
            });
        }
    }
    let allowed = |name: &str| allow.as_ref().is_none_or(|g| g.allows(name));
    let list: Vec<Sub> = channels
        .into_iter()
        .map(|(name, at)| Sub::new(&name, at, !allowed(&name)))
        .collect();
    let joins = list
        .iter()
        .filter(|s| !s.refused())
        .map(|s| ChannelJoin {
            name: s.name.to_string(),
            since: s.at().map(|a| a.seq),
            epoch: s.at().and_then(|a| a.epoch),
        })
        .collect();
    if let Some(user) = user {
        if conn.has(LOGGED_IN) && conn.user != user {
            conn.logout(cx);
        }
        conn.user = user;
        conn.set(LOGGED_IN, true);
    }
    let mut place = Place::default();
    place.set(since);
    conn.chans = Some(Box::new(Chans {
        allow: allow.map(Box::new),
        user: place,
        list,
    }));
    cx.out.request(Request::Join {
        user,
        login: user.is_some(),
        since: since.map(|s| s.seq),
        epoch: since.and_then(|s| s.epoch),
        channels: joins,
    });
}

/// A refreshed token's `chan` claim: what later subscribes are judged by (the
/// channels already joined stay).
pub(super) fn regrant(conn: &mut Connection, allow: auth::ChannelGrant) {
    if let Some(chans) = conn.chans.as_mut() {
        chans.allow = Some(Box::new(allow));
    }
}

/// Leaves every joined channel (the connection closed): one request.
pub(super) fn leave_all(conn: &mut Connection, cx: &mut Cx) {
    let Some(chans) = conn.chans.take() else {
        return;
    };
    let channels = chans.joined();
    if !channels.is_empty() {
        cx.out.request(Request::Leave {
            user: conn.has(LOGGED_IN).then_some(conn.user),
            channels,
        });
    }
}

/// The join of a subscription that names channels is answered: the transport's
/// head, the refused channels, then per stream its gap (if any) and replay, then
/// deliveries as they come.
pub(super) fn start(
    conn: &mut Connection,
    cx: &mut Cx,
    transport: Transport,
    login: Option<HistoryRead>,
    reads: Vec<(String, HistoryRead)>,
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
    let refused = conn.chans.as_ref().map(|c| c.refused()).unwrap_or_default();
    for name in &refused {
        refuse(conn, cx, transport, name, REFUSED_WHY);
    }
    // The user's stream: its position and replay, as a connection without channels.
    if let Some(history) = login {
        if let Some(chans) = conn.chans.as_mut() {
            chans.user.set(Some(Since {
                epoch: history.epoch,
                seq: history.last,
            }));
        }
        if resume {
            replay_stream(conn, cx, transport, None, &history);
        }
    }
    for (name, history) in reads {
        if let Some(sub) = conn.chans.as_mut().and_then(|c| c.find(&name)) {
            sub.set_at(Some(Since {
                epoch: history.epoch,
                seq: first_replayed(&history, resume) - 1,
            }));
        }
        if transport == Transport::WebSocket {
            subscribed(cx, &name, &history, resume);
        }
        if resume {
            replay_stream(conn, cx, transport, Some(&name), &history);
        }
        if let Some(sub) = conn.chans.as_mut().and_then(|c| c.find(&name)) {
            sub.set_at(Some(Since {
                epoch: history.epoch,
                seq: history.last,
            }));
        }
    }
    if transport == Transport::Sse {
        // Where every stream stands now, as an `id:` without data: an EventSource
        // takes it as its last event id without firing an event (WHATWG HTML,
        // "dispatch the event"), so a channel quiet until a drop still resumes
        // from here instead of from the reconnect.
        let user = conn.has(LOGGED_IN);
        if let Some(chans) = conn.chans.as_ref() {
            cx.out.write(|out| {
                out.extend_from_slice(b"id: ");
                chans.write_composite(out, user);
                out.extend_from_slice(b"\n\n");
            });
        }
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

/// A channel the token does not allow, in the transport's words.
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

/// A WebSocket's `{"subscribed":…}` frame.
fn subscribed(cx: &mut Cx, name: &str, history: &HistoryRead, resume: bool) {
    let at = Since {
        epoch: history.epoch,
        seq: first_replayed(history, resume) - 1,
    };
    let text = serde_json::json!({
        "subscribed": name,
        "pos": at.to_string(),
        "gap": history.gap && resume,
    })
    .to_string();
    ws_text(cx, &text);
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
    let user = conn.has(LOGGED_IN);
    if let Some(chans) = conn.chans.as_mut() {
        match channel {
            Some(name) => match chans.find(name) {
                Some(sub) => sub.set_at(Some(at)),
                None => return false,
            },
            None => chans.user.set(Some(at)),
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
                    Some(c) => c.write_composite(out, user),
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
        _ if channel.is_some() => cx.out.send(frames.envelope(at)),
        // A user delivery on a framed WebSocket: its position is the user's.
        _ => cx.out.write(|out| frames.write_envelope(out, at)),
    }
    true
}

/// A waiting long-poll with channels gets its answer from one delivery.
fn poll_delivery(
    conn: &mut Connection,
    cx: &mut Cx,
    epoch: u32,
    seq: u64,
    frames: &mut Frames,
) -> Outcome {
    let channel = frames.channel().map(str::to_string);
    let Some(chans) = conn.chans.as_mut() else {
        return Outcome::Skipped;
    };
    let at = Some(Since {
        epoch: Some(epoch),
        seq,
    });
    // The stream's place moves to this message (the answer's composite says so).
    let before = match &channel {
        Some(name) => match chans.find(name) {
            Some(sub) => {
                let before = sub.at();
                sub.set_at(at);
                before
            }
            None => return Outcome::Skipped,
        },
        None => {
            let before = chans.user.get();
            chans.user.set(at);
            before
        }
    };
    // Anything between the poll's position and this one is lost, and so is
    // everything when the stream started a new epoch meanwhile.
    let gap = before.is_some_and(|b| seq > b.seq + 1 || b.epoch.is_some_and(|e| e != epoch));
    let stream = Stream {
        channel,
        epoch: Some(epoch),
        messages: vec![(seq, frames.subject(), frames.payload().to_vec())],
        last: seq,
        gap,
    };
    answer_poll(conn, cx, vec![stream]);
    Outcome::Sent
}

/// One stream's part of a long-poll answer.
pub(super) struct Stream {
    /// `None`: the user's.
    channel: Option<String>,
    epoch: Option<u32>,
    /// `(seq, subject, payload)`.
    messages: Vec<(u64, u64, Vec<u8>)>,
    last: u64,
    gap: bool,
}

/// A poll that names channels is answered by its join: at once when a stream has
/// news or a gap, else it waits for the next delivery or its timeout.
pub(super) fn poll_joined(
    conn: &mut Connection,
    cx: &mut Cx,
    login: Option<HistoryRead>,
    reads: Vec<(String, HistoryRead)>,
) {
    let mut streams = Vec::new();
    let mut news = false;
    let all = login
        .map(|h| (None, h))
        .into_iter()
        .chain(reads.into_iter().map(|(n, h)| (Some(n), h)));
    let mut budget = cx.config.max_queued;
    for (channel, history) in all {
        // A client without a position starts from now: nothing to replay.
        let had = match &channel {
            Some(name) => conn
                .chans
                .as_mut()
                .and_then(|c| c.find(name))
                .and_then(|s| s.at()),
            None => conn.chans.as_ref().and_then(|c| c.user.get()),
        };
        let messages: Vec<(u64, u64, Vec<u8>)> = if had.is_some() {
            super::reply::poll_share(&history.messages, &mut budget)
                .iter()
                .map(|(s, m)| (*s, m.subject, m.payload.to_vec()))
                .collect()
        } else {
            Vec::new()
        };
        let cut = messages.len() < history.messages.len() && had.is_some();
        let last = match messages.last() {
            Some(&(s, _, _)) if cut => s,
            _ => history.last,
        };
        let gap = had.is_some() && history.gap;
        news |= !messages.is_empty() || gap;
        // Where the stream now stands (the next poll's position if nothing comes).
        let at = Some(Since {
            epoch: history.epoch,
            seq: last,
        });
        match &channel {
            Some(name) => {
                if let Some(sub) = conn.chans.as_mut().and_then(|c| c.find(name)) {
                    sub.set_at(at);
                }
            }
            None => {
                if let Some(c) = conn.chans.as_mut() {
                    c.user.set(at);
                }
            }
        }
        streams.push(Stream {
            channel,
            epoch: history.epoch,
            messages,
            last,
            gap,
        });
    }
    let refused = conn
        .chans
        .as_ref()
        .is_some_and(|c| c.list.iter().any(Sub::refused));
    if news || refused {
        answer_poll(conn, cx, streams);
    } else {
        conn.state = State::PollWaiting;
        conn.arm(cx, cx.config.poll_timeout);
    }
}

/// Answers a long-poll with channels: `{"messages":[…],"since":"<composite>",
/// "gaps":[…],"refused":[…]}` (docs/protocol.md "Channels").
pub(super) fn answer_poll(conn: &mut Connection, cx: &mut Cx, streams: Vec<Stream>) {
    let user = conn.has(LOGGED_IN);
    let mut body = Vec::with_capacity(128);
    body.extend_from_slice(b"{\"messages\":[");
    let mut first = true;
    // A channel's gap by its name, the user's stream's by its id (a number).
    let mut gaps: Vec<serde_json::Value> = Vec::new();
    for stream in &streams {
        if stream.gap {
            gaps.push(match &stream.channel {
                Some(c) => c.as_str().into(),
                None => conn.user.into(),
            });
        }
        for (seq, subject, payload) in &stream.messages {
            if !first {
                body.push(b',');
            }
            first = false;
            let data = String::from_utf8_lossy(payload);
            let item = match &stream.channel {
                Some(c) => serde_json::json!({"channel": c, "seq": seq, "data": data}),
                None => serde_json::json!({"subject": subject, "seq": seq, "data": data}),
            };
            serde_json::to_writer(&mut body, &item).expect("Vec write");
        }
        let _ = (stream.epoch, stream.last);
    }
    body.extend_from_slice(b"],\"since\":\"");
    if let Some(c) = conn.chans.as_ref() {
        c.write_composite(&mut body, user);
    }
    body.extend_from_slice(b"\",\"gaps\":");
    serde_json::to_writer(&mut body, &gaps).expect("Vec write");
    let refused: Vec<serde_json::Value> = conn
        .chans
        .as_ref()
        .map(|c| c.refused())
        .unwrap_or_default()
        .into_iter()
        .map(|name| serde_json::json!({"channel": name, "error": REFUSED_WHY}))
        .collect();
    body.extend_from_slice(b",\"refused\":");
    serde_json::to_writer(&mut body, &refused).expect("Vec write");
    body.extend_from_slice(b"}");
    cx.credentials.set_expiry(cx.key, None);
    let keep = conn.has(KEEP_ALIVE);
    super::reply::send_poll_body(conn, cx, keep, &body);
}

/// A waiting long-poll with channels timed out: an empty answer with its place.
pub(super) fn answer_poll_timeout(conn: &mut Connection, cx: &mut Cx) {
    answer_poll(conn, cx, Vec::new());
}

/// A control frame of a framed WebSocket (`{"subscribe":…}`,
/// `{"unsubscribe":…}`); true when the frame was one.
pub(super) fn handle_control(conn: &mut Connection, cx: &mut Cx, text: &[u8]) -> bool {
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
        Control::Subscribe { subscribe, since } => subscribe_later(conn, cx, subscribe, since),
        Control::Unsubscribe { unsubscribe } => unsubscribe_later(conn, cx, unsubscribe),
    }
    true
}

#[derive(Deserialize)]
#[serde(untagged, deny_unknown_fields)]
enum Control {
    Subscribe {
        subscribe: String,
        since: Option<String>,
    },
    Unsubscribe {
        unsubscribe: String,
    },
}

fn error(cx: &mut Cx, channel: Option<&str>, why: &str) {
    let text = match channel {
        Some(c) => serde_json::json!({ "error": why, "channel": c }),
        None => serde_json::json!({ "error": why }),
    };
    ws_text(cx, &text.to_string());
}

fn subscribe_later(conn: &mut Connection, cx: &mut Cx, name: String, since: Option<String>) {
    if let Err(why) = wire::channel::check_name(&name) {
        return error(cx, Some(&name), why);
    }
    let since = match since.as_deref().map(|s| Since::parse(s.as_bytes())) {
        None => None,
        Some(Some(s)) => Some(s),
        Some(None) => return error(cx, Some(&name), "since is not <epoch>-<seq>"),
    };
    let Some(chans) = conn.chans.as_mut() else {
        return error(cx, Some(&name), "not a framed connection");
    };
    if !chans.allow.as_ref().is_none_or(|g| g.allows(&name)) {
        return error(cx, Some(&name), REFUSED_WHY);
    }
    if chans.list.iter().any(|s| *s.name == *name && !s.refused()) {
        return error(cx, Some(&name), "already subscribed");
    }
    if chans.len() >= cx.config.max_channels {
        return error(
            cx,
            Some(&name),
            "too many channels on this connection (--max-channels-per-connection)",
        );
    }
    chans.list.push(Sub::new(&name, since, false));
    cx.out.request(Request::Join {
        user: conn.has(LOGGED_IN).then_some(conn.user),
        login: false,
        since: None,
        epoch: None,
        channels: vec![ChannelJoin {
            name,
            since: since.map(|s| s.seq),
            epoch: since.and_then(|s| s.epoch),
        }],
    });
}

fn unsubscribe_later(conn: &mut Connection, cx: &mut Cx, name: String) {
    let held = conn.chans.as_mut().and_then(|c| {
        let i = c
            .list
            .iter()
            .position(|s| *s.name == *name && !s.refused())?;
        Some(c.list.remove(i))
    });
    if held.is_none() {
        return error(cx, Some(&name), "not subscribed");
    }
    cx.out.request(Request::Leave {
        user: conn.has(LOGGED_IN).then_some(conn.user),
        channels: vec![name.clone()],
    });
    ws_text(cx, &serde_json::json!({ "unsubscribed": name }).to_string());
}

/// A framed WebSocket's later join is answered: `subscribed`, then the replay.
pub(super) fn joined_later(conn: &mut Connection, cx: &mut Cx, reads: Vec<(String, HistoryRead)>) {
    for (name, history) in reads {
        let wanted = conn
            .chans
            .as_mut()
            .and_then(|c| c.find(&name))
            .map(|s| s.at().is_some());
        let Some(resume) = wanted else {
            continue; // left again before the answer
        };
        subscribed(cx, &name, &history, resume);
        if resume {
            replay_stream(conn, cx, Transport::WebSocket, Some(&name), &history);
        }
        if let Some(sub) = conn.chans.as_mut().and_then(|c| c.find(&name)) {
            sub.set_at(Some(Since {
                epoch: history.epoch,
                seq: history.last,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_is_32_bytes_and_names_are_shared_then_forgotten() {
        assert_eq!(std::mem::size_of::<Sub>(), 32);
        let name = "channels-test:shared";
        let a = Sub::new(name, None, false);
        let b = Sub::new(
            name,
            Some(Since {
                epoch: Some(3),
                seq: 9,
            }),
            true,
        );
        assert!(Arc::ptr_eq(&a.name, &b.name), "one allocation per name");
        assert_eq!(
            b.at(),
            Some(Since {
                epoch: Some(3),
                seq: 9
            })
        );
        assert!(b.refused() && !a.refused());
        drop(a);
        drop(b);
        let held = NAMES
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|n| n.contains(name));
        assert!(!held, "a name nobody holds is forgotten");
    }

    #[test]
    fn a_place_keeps_a_position_with_or_without_an_epoch_and_its_flag() {
        let mut p = Place::default();
        assert_eq!(p.get(), None);
        p.flags |= REFUSED;
        p.set(Some(Since {
            epoch: None,
            seq: 4,
        }));
        assert_eq!(
            p.get(),
            Some(Since {
                epoch: None,
                seq: 4
            })
        );
        p.set(Some(Since {
            epoch: Some(0),
            seq: u64::MAX,
        }));
        assert_eq!(
            p.get(),
            Some(Since {
                epoch: Some(0),
                seq: u64::MAX
            })
        );
        assert_ne!(p.flags & REFUSED, 0, "the refusal stays");
        p.set(None);
        assert_eq!(p.get(), None);
    }
}
