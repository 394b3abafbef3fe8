//! Deliveries and heartbeats: a message becomes bytes for this connection's
//! transport, encoded once per message and loop ([`Frames`]) and shared; only the
//! SSE `id:` line is per recipient.

use super::{reply, Connection, Cx, SlowPolicy, State, WsHeartbeat, HTTP10, MULTIPLEXED};
use bytes::Bytes;

/// The encodings of one message, made on first use and shared by every recipient
/// of the loop's batch.
pub struct Frames<'a> {
    payload: &'a [u8],
    stream: Option<Bytes>,
    /// Close-delimited (HTTP/1.0) stream line.
    line: Option<Bytes>,
    sse: Option<Bytes>,
    ws: Option<Bytes>,
}

impl<'a> Frames<'a> {
    pub fn new(payload: &'a [u8]) -> Frames<'a> {
        Frames {
            payload,
            stream: None,
            line: None,
            sse: None,
            ws: None,
        }
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

    fn sse(&mut self) -> &Bytes {
        let payload = self.payload;
        Self::encoded(&mut self.sse, |o| wire::write_sse_data(o, payload))
    }

    fn ws(&mut self) -> &Bytes {
        let payload = self.payload;
        Self::encoded(&mut self.ws, |o| {
            wire::write_ws_frame(o, wire::ws_message_opcode(payload), payload)
        })
    }
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
    // Judged on what the socket has not taken (SPEC D4).
    if cx.queued > 0 && cx.queued + frames.payload.len() + 32 > cx.config.max_queued {
        if cx.config.slow_policy == SlowPolicy::Disconnect {
            cx.out.close_now();
        }
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
