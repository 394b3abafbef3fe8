//! Deliveries and heartbeats: a message becomes bytes for this connection's
//! transport, encoded once per message and loop ([`Frames`]) and shared; only the
//! SSE `id:` line is per recipient.

use super::{reply, Connection, Cx, SlowPolicy, State, WsHeartbeat, HTTP10, MULTIPLEXED};
use bytes::Bytes;

/// The encodings of one message, made on first use and shared by every recipient
/// of the loop's batch.
pub struct Frames<'a> {
    payload: &'a [u8],
    /// The message's channel, if it went to one; else its subject.
    channel: Option<&'a str>,
    subject: u64,
    stream: Option<Bytes>,
    /// Close-delimited (HTTP/1.0) stream line.
    line: Option<Bytes>,
    sse: Option<Bytes>,
    ws: Option<Bytes>,
    /// On connections with channels: the stream chunk and line tagged with the
    /// channel (or subject), and a framed WebSocket's JSON envelope.
    tagged_stream: Option<Bytes>,
    tagged_line: Option<Bytes>,
    envelope: Option<Bytes>,
    /// A Pusher client's frame of a channel's message, and the socket that sent it.
    pusher: Option<(Bytes, Option<Box<str>>)>,
    /// The channel's name id in this process, looked up once (`None`: not yet).
    channel_id: Option<Option<u32>>,
}

impl<'a> Frames<'a> {
    /// A message to a subject (what tests hand a connection).
    pub fn new(payload: &'a [u8]) -> Frames<'a> {
        Frames {
            payload,
            channel: None,
            subject: 0,
            stream: None,
            line: None,
            sse: None,
            ws: None,
            tagged_stream: None,
            tagged_line: None,
            envelope: None,
            pusher: None,
            channel_id: None,
        }
    }

    /// The encodings of `msg`, to its subject or its channel.
    pub fn of(msg: &'a bus::Message) -> Frames<'a> {
        Frames {
            channel: msg.channel.as_deref(),
            subject: msg.subject,
            ..Frames::new(&msg.payload)
        }
    }

    pub(crate) fn payload(&self) -> &'a [u8] {
        self.payload
    }

    pub(crate) fn channel(&self) -> Option<&'a str> {
        self.channel
    }

    /// The message's channel as a name id (`None`: a subject's message;
    /// `Some(None)`: a channel no connection of the process holds).
    pub(crate) fn channel_id(&mut self) -> Option<Option<u32>> {
        let name = self.channel?;
        Some(
            *self
                .channel_id
                .get_or_insert_with(|| crate::channels::name_id(name)),
        )
    }

    pub(crate) fn subject(&self) -> u64 {
        self.subject
    }

    /// `<channel> ` or `<subject> `: what a stream line starts with on a
    /// connection with channels.
    fn tag(&self) -> Vec<u8> {
        let mut line = match self.channel {
            // A friends push: `friends {"online":[…],"offline":[…]}`.
            Some(c) if wire::channel::friends_of(c).is_some() => b"friends".to_vec(),
            // A presence push: `<channel> +<user>` / `<channel> -<user>`.
            Some(c) => wire::channel::presence_of(c)
                .unwrap_or(c)
                .as_bytes()
                .to_vec(),
            None => self.subject.to_string().into_bytes(),
        };
        line.push(b' ');
        // A presence push's info (`+<user> <info>`) stays out of the line.
        let payload = match self.channel.and_then(wire::channel::presence_of) {
            Some(_) => self
                .payload
                .split(|&b| b == b' ')
                .next()
                .unwrap_or_default(),
            None => self.payload,
        };
        line.extend_from_slice(payload);
        line
    }

    pub(crate) fn tagged_stream(&mut self) -> &Bytes {
        let line = self.tag();
        Self::encoded(&mut self.tagged_stream, |o| {
            wire::write_stream_message(o, &line)
        })
    }

    pub(crate) fn tagged_line(&mut self) -> &Bytes {
        let line = self.tag();
        Self::encoded(&mut self.tagged_line, |o| {
            wire::write_stream_line(o, &[&line])
        })
    }

    /// A framed WebSocket's envelope of a channel's message (`at` is the same for
    /// every subscriber of the channel, so it is encoded once).
    pub(crate) fn envelope(&mut self, at: wire::Since) -> &Bytes {
        let (channel, subject, payload) = (self.channel, self.subject, self.payload);
        Self::encoded(&mut self.envelope, |o| {
            write_envelope(o, channel, subject, at, payload)
        })
    }

    /// A Pusher client's frame of a channel's message and its sender socket, if a
    /// client sent it (`pusher`); encoded once.
    pub(crate) fn pusher(&mut self) -> (&Bytes, Option<&str>) {
        let (channel, payload) = (self.channel.unwrap_or_default(), self.payload);
        let (frame, from) = self
            .pusher
            .get_or_insert_with(|| crate::pusher::encode(channel, payload));
        (frame, from.as_deref())
    }

    /// A framed WebSocket's envelope of a user delivery (`at` is the recipient
    /// user's own position, so it is written per recipient).
    pub(crate) fn write_envelope(&self, out: &mut Vec<u8>, at: wire::Since) {
        write_envelope(out, self.channel, self.subject, at, self.payload)
    }

    fn encoded(slot: &mut Option<Bytes>, encode: impl FnOnce(&mut Vec<u8>)) -> &Bytes {
        slot.get_or_insert_with(|| {
            let mut out = Vec::new();
            encode(&mut out);
            Bytes::from(out)
        })
    }

    fn stream(&mut self) -> &Bytes {
        let payload = self.payload;
        Self::encoded(&mut self.stream, |o| wire::write_stream_message(o, payload))
    }

    fn line(&mut self) -> &Bytes {
        let payload = self.payload;
        Self::encoded(&mut self.line, |o| wire::write_stream_line(o, &[payload]))
    }

    /// An SSE event's body (its `id:` line is per recipient): `event: <channel>`
    /// for a channel's message.
    pub(crate) fn sse(&mut self) -> &Bytes {
        let (payload, channel) = (self.payload, self.channel);
        Self::encoded(&mut self.sse, |o| {
            if let Some((c, change, user)) = channel.and_then(|c| presence(c, payload)) {
                o.extend_from_slice(b"event: presence\n");
                let data = serde_json::json!({"channel": c, change: user}).to_string();
                return wire::write_sse_data(o, data.as_bytes());
            }
            if channel.is_some_and(|c| wire::channel::friends_of(c).is_some()) {
                o.extend_from_slice(b"event: friends\n");
                return wire::write_sse_data(o, payload);
            }
            if let Some(c) = channel {
                o.extend_from_slice(b"event: ");
                o.extend_from_slice(c.as_bytes());
                o.push(b'\n');
            }
            wire::write_sse_data(o, payload)
        })
    }

    fn ws(&mut self) -> &Bytes {
        let payload = self.payload;
        Self::encoded(&mut self.ws, |o| {
            wire::write_ws_frame(o, wire::ws_message_opcode(payload), payload)
        })
    }
}

/// `{"channel":"c","pos":"e-s","data":"…"}` (or `"subject":s`) as one text frame.
fn write_envelope(
    out: &mut Vec<u8>,
    channel: Option<&str>,
    subject: u64,
    at: wire::Since,
    payload: &[u8],
) {
    let pos = at.to_string();
    if let Some((c, change, user)) = channel.and_then(|c| presence(c, payload)) {
        let change = serde_json::json!({ change: user });
        let json = serde_json::json!({"channel": c, "pos": pos, "presence": change});
        return wire::write_ws_frame(out, wire::Opcode::Text, json.to_string().as_bytes());
    }
    if channel.is_some_and(|c| wire::channel::friends_of(c).is_some()) {
        // The router wrote the payload as JSON; anything else goes as a string.
        let friends = serde_json::from_slice::<serde_json::Value>(payload)
            .unwrap_or_else(|_| String::from_utf8_lossy(payload).into());
        let json = serde_json::json!({"friends": friends, "pos": pos});
        return wire::write_ws_frame(out, wire::Opcode::Text, json.to_string().as_bytes());
    }
    let data = String::from_utf8_lossy(payload);
    let json = match channel {
        Some(c) => serde_json::json!({"channel": c, "pos": pos, "data": data}),
        None => serde_json::json!({"subject": subject, "pos": pos, "data": data}),
    };
    wire::write_ws_frame(out, wire::Opcode::Text, json.to_string().as_bytes());
}

/// A presence push (a message of channel `c`'s presence companion, `+<user>` or
/// `-<user>`, an arrival's info after a space): the channel, `joined` or `left`,
/// and the user.
fn presence<'c>(c: &'c str, payload: &[u8]) -> Option<(&'c str, &'static str, u64)> {
    let channel = wire::channel::presence_of(c)?;
    let payload = payload.split(|&b| b == b' ').next()?;
    let (sign, user) = payload.split_first()?;
    let user: u64 = std::str::from_utf8(user).ok()?.parse().ok()?;
    let key = match sign {
        b'+' => "joined",
        b'-' => "left",
        _ => return None,
    };
    Some((channel, key, user))
}

/// What became of one delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Written or queued for the client.
    Sent,
    /// Not for this connection now (between requests; history keeps it).
    Skipped,
    /// Refused by the slow-consumer policy (SPEC D4): counted by the caller.
    SlowDrop,
}

pub(super) fn handle(
    conn: &mut Connection,
    cx: &mut Cx,
    epoch: u32,
    seq: u64,
    frames: &mut Frames,
) -> Outcome {
    if conn.chans.is_some() || frames.channel.is_some() {
        return super::channels::deliver(conn, cx, epoch, seq, frames);
    }
    let state = conn.state;
    if state == State::PollWaiting {
        let (since, since_epoch) = conn
            .pending
            .as_ref()
            .map_or((0, None), |p| (p.poll_since.unwrap_or(0), p.poll_epoch));
        // The wait began with nothing after `since`; anything between is lost, and
        // so is everything when the user's history started a new epoch meanwhile.
        let gap = seq > since + 1 || since_epoch.is_some_and(|e| e != epoch);
        reply::answer_poll(conn, cx, &[(seq, frames.payload)], seq, gap, Some(epoch));
        return Outcome::Sent;
    }
    if !state.is_subscription() {
        return Outcome::Skipped;
    }
    if too_slow(cx, frames.payload.len()) {
        return Outcome::SlowDrop;
    }
    match state {
        State::Stream if conn.has(HTTP10) => cx.out.send(frames.line()),
        State::Stream => cx.out.send(frames.stream()),
        State::Sse => {
            let position = wire::Since {
                epoch: Some(epoch),
                seq,
            };
            cx.out.write(|out| wire::write_sse_id(out, position));
            cx.out.send(frames.sse());
        }
        _ => cx.out.send(frames.ws()),
    }
    Outcome::Sent
}

/// Whether a delivery of `len` bytes is refused by the slow-consumer policy (SPEC
/// D4), judged on what the socket has not taken; the policy's close is queued.
pub(crate) fn too_slow(cx: &mut Cx, len: usize) -> bool {
    if cx.queued == 0 || cx.queued + len + 32 <= cx.config.max_queued {
        return false;
    }
    if cx.config.slow_policy == SlowPolicy::Disconnect {
        cx.out.close_now();
    }
    true
}

/// A heartbeat on an idle subscription; skipped while output waits anyway, and on an
/// HTTP/2 stream (its connection's PING beats; this call is the head timeout's entry
/// still in the wheel, and arms nothing more).
pub(super) fn heartbeat(conn: &mut Connection, cx: &mut Cx) {
    if conn.has(MULTIPLEXED) {
        return;
    }
    if cx.queued == 0 {
        match conn.state {
            State::Stream if conn.has(HTTP10) => cx.out.send_static(b"\n"),
            State::Stream => cx.out.send_static(wire::STREAM_HEARTBEAT),
            State::Sse => cx.out.send_static(wire::SSE_HEARTBEAT),
            _ if crate::pusher::is(cx) => crate::pusher::heartbeat(cx),
            _ => cx.out.send_static(match cx.config.ws_heartbeat {
                WsHeartbeat::Pong => WS_PONG,
                WsHeartbeat::Ping => WS_PING,
            }),
        }
    }
    conn.arm_heartbeat(cx);
}

/// The WebSocket heartbeats (`--ws-heartbeat`): an unsolicited empty pong (RFC 6455
/// 5.5.3), or an empty ping the client answers (5.5.2).
const WS_PONG: &[u8] = &[0x8a, 0x00];
const WS_PING: &[u8] = &[0x89, 0x00];
