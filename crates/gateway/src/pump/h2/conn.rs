//! What the peer's frames do to one HTTP/2 connection's state (`H2Conn`): the
//! preface, SETTINGS, PING, GOAWAY, windows, header blocks (HPACK), stream states and
//! the connection's budgets. Sans-IO, time a parameter: answers that need no other
//! state go to `out`, the rest become [`Action`]s the loop runs once the connection's
//! box is back in its table.
//!
//! A stream's request reaches its core in pieces as the frames arrive: the head when
//! the header block is complete (so keys, tokens, routes and the body's stated size are
//! judged before any body is held), then each DATA payload (`staged` until the loop
//! hands it over in the same round). What one connection may have in request bodies
//! not yet complete is bounded (`Limits::receiving`); each body is bounded again by
//! the core (`--max-message`, `--max-batch`).

use super::budget::{Bucket, IDLE_FRAMES, UNANSWERED_STREAMS};
use super::{Action, H2Conn, H2Stream, MAX_BLOCK, MAX_DECODED, MAX_FIELDS};
use connection::Tick;
use wire::h2::hpack::{self, Caps, Decoder};
use wire::h2::{self as frames, code, setting, Frame, FrameError, Framing};

/// What the loop's settings allow one connection, and the time.
pub(in crate::pump) struct Limits {
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` (`--max-streams-per-connection`).
    pub max_streams: u32,
    /// Request body bytes of incomplete requests, all streams together.
    pub receiving: usize,
    pub now: Tick,
}

fn fail<T>(code: u32, reason: &'static str) -> Result<T, FrameError> {
    Err(FrameError { code, reason })
}

const CALM: u32 = code::ENHANCE_YOUR_CALM;

impl H2Conn {
    pub(in crate::pump) fn new(loopback: bool, now: Tick) -> H2Conn {
        H2Conn {
            input: Vec::new(),
            preface_done: false,
            decoder: Decoder::new(),
            block: None,
            last_stream: 0,
            window: i64::from(frames::DEFAULT_WINDOW),
            recv_window: i64::from(frames::DEFAULT_WINDOW),
            initial_window: frames::DEFAULT_WINDOW,
            max_frame: frames::DEFAULT_MAX_FRAME,
            streams: Vec::new(),
            ping_out: false,
            gone: false,
            peer_goaway: false,
            loopback,
            idle_frames: Bucket::new(now),
            unanswered: Bucket::new(now),
            next_ping: now,
            idle_since: Some(now),
            auth_failures: 0,
        }
    }

    /// Body bytes of the requests still incomplete, all streams together (what
    /// `Limits::receiving` bounds).
    pub(in crate::pump) fn receiving(&self) -> usize {
        self.streams
            .iter()
            .filter(|s| !s.remote_closed)
            .map(|s| s.received)
            .sum()
    }

    pub(in crate::pump) fn stream_by_id(&mut self, id: u32) -> Option<&mut H2Stream> {
        self.streams.iter_mut().find(|s| s.id == id)
    }

    /// A stream ended without an answer (the peer reset it, or we refused it): a
    /// connection error once the connection has done that too often (rapid reset).
    fn unanswered_stream(&mut self, now: Tick) -> Result<(), FrameError> {
        if self.unanswered.take(now, UNANSWERED_STREAMS) {
            Ok(())
        } else {
            fail(CALM, "too many streams ended unanswered")
        }
    }

    /// Reads frames from `input` (after any held bytes); answers that need no other
    /// state go to `out`, the rest to `actions`.
    pub(in crate::pump) fn handle_bytes(
        &mut self,
        input: &[u8],
        limits: &Limits,
        out: &mut Vec<u8>,
        actions: &mut Vec<Action>,
    ) -> Result<(), FrameError> {
        let mut held = std::mem::take(&mut self.input);
        let buf: &[u8] = if held.is_empty() {
            input
        } else {
            held.extend_from_slice(input);
            &held
        };
        let mut pos = 0;
        let result = (|| {
            if !self.preface_done {
                let n = frames::PREFACE.len().min(buf.len());
                if buf[..n] != frames::PREFACE[..n] {
                    return fail(code::PROTOCOL_ERROR, "not the HTTP/2 preface");
                }
                if n < frames::PREFACE.len() {
                    return Ok(());
                }
                self.preface_done = true;
                pos = n;
            }
            while let Some((frame, used)) =
                frames::parse_frame(&buf[pos..], frames::DEFAULT_MAX_FRAME)?
            {
                pos += used;
                self.handle_frame(frame, limits, out, actions)?;
                if self.gone {
                    break;
                }
            }
            Ok(())
        })();
        let rest = &buf[pos..];
        if result.is_ok() && !rest.is_empty() {
            let mut keep = Vec::with_capacity(rest.len());
            keep.extend_from_slice(rest);
            self.input = keep;
        }
        result
    }

    /// Counts a frame that carries no request: GOAWAY ENHANCE_YOUR_CALM past the budget.
    fn idle_frame(&mut self, now: Tick) -> Result<(), FrameError> {
        if self.idle_frames.take(now, IDLE_FRAMES) {
            Ok(())
        } else {
            fail(CALM, "too many frames without a request")
        }
    }

    /// Resets `stream` with `code` for a reason of its own (a stream error).
    fn reset(
        &mut self,
        stream: u32,
        code: u32,
        now: Tick,
        out: &mut Vec<u8>,
        actions: &mut Vec<Action>,
    ) -> Result<(), FrameError> {
        frames::write_rst_stream(out, stream, code);
        actions.push(Action::Reset(stream));
        self.unanswered_stream(now)
    }

    fn handle_frame(
        &mut self,
        frame: Frame,
        limits: &Limits,
        out: &mut Vec<u8>,
        actions: &mut Vec<Action>,
    ) -> Result<(), FrameError> {
        let now = limits.now;
        if self.block.is_some() && !matches!(frame, Frame::Continuation { .. }) {
            return fail(code::PROTOCOL_ERROR, "a frame inside a header block");
        }
        match frame {
            Frame::Settings { ack: true, .. } => {
                self.idle_frame(now)?;
                // Our only SETTINGS said HEADER_TABLE_SIZE 0: the client's encoder
                // now owes us a table size update and keeps no table for us.
                self.decoder.set_limit(0);
            }
            Frame::Settings { ack: false, params } => {
                self.idle_frame(now)?;
                for s in frames::parse_settings(params) {
                    match s.id {
                        setting::INITIAL_WINDOW_SIZE => {
                            let delta = i64::from(s.value) - i64::from(self.initial_window);
                            self.initial_window = s.value;
                            for stream in &mut self.streams {
                                stream.window += delta;
                                if stream.window > i64::from(frames::MAX_WINDOW) {
                                    return fail(
                                        code::FLOW_CONTROL_ERROR,
                                        "stream window over 2^31-1",
                                    );
                                }
                            }
                            if delta > 0 {
                                pump(actions);
                            }
                        }
                        setting::MAX_FRAME_SIZE => self.max_frame = s.value,
                        _ => {}
                    }
                }
                frames::write_settings_ack(out);
            }
            Frame::Ping { ack: true, .. } => {
                self.idle_frame(now)?;
                self.ping_out = false;
            }
            Frame::Ping { ack: false, data } => {
                self.idle_frame(now)?;
                frames::write_ping(out, true, data);
            }
            // An error: the peer is gone. NO_ERROR: it opens no more streams, and
            // those it has get their answers (a long-poll in flight); the connection
            // closes once none is left (RFC 9113 6.8).
            Frame::GoAway { code, last_stream } if code != code::NO_ERROR => {
                // Why a client left (it was how the flood's ENHANCE_YOUR_CALM showed).
                tracing::debug!(
                    code,
                    last_stream,
                    streams = self.streams.len(),
                    "http/2 peer GOAWAY"
                );
                actions.push(Action::Close)
            }
            Frame::GoAway { .. } => {
                self.idle_frame(now)?;
                self.peer_goaway = true;
                actions.push(Action::Finish);
            }
            Frame::WindowUpdate {
                stream: 0,
                increment,
            } => {
                self.window += i64::from(increment);
                if self.window > i64::from(frames::MAX_WINDOW) {
                    return fail(code::FLOW_CONTROL_ERROR, "connection window over 2^31-1");
                }
                pump(actions);
            }
            Frame::WindowUpdate { stream, increment } => {
                if let Some(s) = self.stream_by_id(stream) {
                    s.window += i64::from(increment);
                    if s.window > i64::from(frames::MAX_WINDOW) {
                        // A stream error (RFC 9113 6.9.1): reset that stream only.
                        self.reset(stream, code::FLOW_CONTROL_ERROR, now, out, actions)?;
                    } else {
                        pump(actions);
                    }
                } else if stream > self.last_stream {
                    return fail(code::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream");
                } else {
                    // A closed stream's late credit: nothing to do, but not free.
                    self.idle_frame(now)?;
                }
            }
            Frame::RstStream { stream, .. } => {
                if stream > self.last_stream {
                    return fail(code::PROTOCOL_ERROR, "RST_STREAM on an idle stream");
                }
                if self.stream_by_id(stream).is_some() {
                    actions.push(Action::Reset(stream));
                    self.unanswered_stream(now)?;
                } else {
                    self.idle_frame(now)?;
                }
            }
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                block,
            } => {
                if stream % 2 == 0 {
                    return fail(code::PROTOCOL_ERROR, "HEADERS on a server stream id");
                }
                if stream <= self.last_stream && self.stream_by_id(stream).is_none() {
                    // RFC 9113 5.1: frames after a stream closed are STREAM_CLOSED; a
                    // new stream below the last one is an unexpected id (5.1.1).
                    return if stream == self.last_stream {
                        fail(code::STREAM_CLOSED, "HEADERS on a closed stream")
                    } else {
                        fail(code::PROTOCOL_ERROR, "stream id below the last one")
                    };
                }
                if block.is_empty() && !end_headers {
                    self.idle_frame(now)?;
                }
                if end_headers {
                    self.header_block(stream, end_stream, block, limits, out, actions)?;
                } else {
                    self.block = Some(Box::new((stream, end_stream, block.to_vec())));
                }
            }
            Frame::Continuation {
                stream,
                end_headers,
                block,
            } => {
                let Some(mut pending) = self.block.take() else {
                    return fail(code::PROTOCOL_ERROR, "CONTINUATION without HEADERS");
                };
                if pending.0 != stream {
                    return fail(code::PROTOCOL_ERROR, "CONTINUATION on another stream");
                }
                if pending.2.len() + block.len() > MAX_BLOCK {
                    return fail(CALM, "header block too large");
                }
                if block.is_empty() && !end_headers {
                    self.idle_frame(now)?;
                }
                pending.2.extend_from_slice(block);
                if end_headers {
                    let (stream, end_stream, bytes) = *pending;
                    self.header_block(stream, end_stream, &bytes, limits, out, actions)?;
                } else {
                    self.block = Some(pending);
                }
            }
            Frame::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => self.data(stream, end_stream, data, flow_len, limits, out, actions)?,
            Frame::Ignored => self.idle_frame(now)?,
        }
        Ok(())
    }

    /// A DATA frame: flow control first (ours, the receiver's), then the bytes are
    /// staged for the stream's core, or dropped on a stream that is over.
    #[allow(clippy::too_many_arguments)]
    fn data(
        &mut self,
        stream: u32,
        end_stream: bool,
        data: &[u8],
        flow_len: u32,
        limits: &Limits,
        out: &mut Vec<u8>,
        actions: &mut Vec<Action>,
    ) -> Result<(), FrameError> {
        let now = limits.now;
        if stream > self.last_stream {
            return fail(code::PROTOCOL_ERROR, "DATA on an idle stream");
        }
        if data.is_empty() && !end_stream {
            self.idle_frame(now)?;
        }
        self.recv_window -= i64::from(flow_len);
        if self.recv_window < 0 {
            return fail(
                code::FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
            );
        }
        // The connection's credit goes back at once: nothing stays in this box past
        // the round (the loop hands staged bytes to the cores); what bounds a
        // connection's request bodies is `Limits::receiving` and the stream windows.
        if flow_len > 0 {
            self.recv_window += i64::from(flow_len);
            frames::write_window_update(out, 0, flow_len);
        }
        let receiving = self.receiving();
        let Some(s) = self.stream_by_id(stream) else {
            // Closed (answered, reset or refused): a stream error STREAM_CLOSED (RFC
            // 9113 6.1). Late DATA after an early answer is honest but bounded, so
            // these answers count as frames without a request, not as resets.
            frames::write_rst_stream(out, stream, code::STREAM_CLOSED);
            return self.idle_frame(now);
        };
        if s.remote_closed {
            // Half-closed (remote): a stream error (RFC 9113 5.1).
            return self.reset(stream, code::STREAM_CLOSED, now, out, actions);
        }
        s.recv_window -= i64::from(flow_len);
        if s.recv_window < 0 {
            return self.reset(stream, code::FLOW_CONTROL_ERROR, now, out, actions);
        }
        if s.framing == Framing::None && !data.is_empty() {
            // A GET or HEAD that said it has no body sent one.
            return self.reset(stream, code::PROTOCOL_ERROR, now, out, actions);
        }
        if let Framing::Length(left) = &mut s.framing {
            let fits = (data.len() as u64) <= *left;
            if !fits || (end_stream && *left != data.len() as u64) {
                // RFC 9113 8.1.1: DATA that differs from content-length is malformed.
                return self.reset(stream, code::PROTOCOL_ERROR, now, out, actions);
            }
            *left -= data.len() as u64;
        }
        if receiving + data.len() > limits.receiving {
            return self.reset(stream, CALM, now, out, actions);
        }
        s.received += data.len();
        s.staged.extend_from_slice(data);
        s.staged_flow += flow_len;
        s.remote_closed = end_stream;
        actions.push(Action::Body(stream));
        Ok(())
    }

    /// A complete header block on `stream`: decoded (always, so the HPACK table stays
    /// in step), then a new request, trailers ending a body, or dropped on a stream
    /// that is over.
    fn header_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
        limits: &Limits,
        out: &mut Vec<u8>,
        actions: &mut Vec<Action>,
    ) -> Result<(), FrameError> {
        let now = limits.now;
        let caps = Caps {
            fields: MAX_FIELDS,
            list_size: MAX_DECODED,
        };
        let mut headers = Vec::new();
        let decoded = self
            .decoder
            .decode(block, caps, |name, value| {
                headers.push((name.to_vec(), value.to_vec()))
            })
            .map_err(|e: hpack::HpackError| {
                tracing::debug!(error = %e, "http/2 header block refused");
                FrameError {
                    code: code::COMPRESSION_ERROR,
                    reason: "HPACK block not decodable",
                }
            })?;
        if let Some(s) = self.stream_by_id(stream) {
            // A second header block on an open stream: trailers end a request body
            // (their fields are not used); anything else is a stream error.
            if !s.remote_closed && end_stream {
                s.remote_closed = true;
                if let Framing::Length(left) = s.framing {
                    if left != 0 {
                        return self.reset(stream, code::PROTOCOL_ERROR, now, out, actions);
                    }
                }
                actions.push(Action::Body(stream));
                return Ok(());
            }
            let code = if s.remote_closed {
                code::STREAM_CLOSED
            } else {
                code::PROTOCOL_ERROR
            };
            return self.reset(stream, code, now, out, actions);
        }
        self.last_stream = self.last_stream.max(stream);
        if decoded.capped {
            // Too many or too large headers: answered at once, nothing kept.
            frames::write_headers(out, stream, 431, &[], true);
            if !end_stream {
                frames::write_rst_stream(out, stream, code::NO_ERROR);
            }
            return Ok(());
        }
        if self.peer_goaway || self.streams.len() >= limits.max_streams as usize {
            frames::write_rst_stream(out, stream, code::REFUSED_STREAM);
            return self.unanswered_stream(now);
        }
        let mut head = Vec::with_capacity(256);
        let fields = headers.iter().map(|(n, v)| (&n[..], &v[..]));
        let framing = match frames::write_request_head(&mut head, fields, !end_stream) {
            Ok(framing) => framing,
            Err(e) => {
                tracing::debug!(error = %e, stream, "http/2 request refused");
                frames::write_rst_stream(out, stream, code::PROTOCOL_ERROR);
                return self.unanswered_stream(now);
            }
        };
        let mut opened = H2Stream::new(stream, head, framing, self.initial_window);
        opened.remote_closed = end_stream;
        self.streams.push(opened);
        self.idle_since = None;
        actions.push(Action::Request(stream));
        Ok(())
    }
}

/// Windows opened: one pump per read is enough however many WINDOW_UPDATEs it held.
fn pump(actions: &mut Vec<Action>) {
    if !actions.iter().any(|a| matches!(a, Action::Pump)) {
        actions.push(Action::Pump);
    }
}
