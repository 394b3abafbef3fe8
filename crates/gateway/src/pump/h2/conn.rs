//! What the peer's frames do to one HTTP/2 connection's state (`H2Conn`): the
//! preface, SETTINGS, PING, GOAWAY, windows, header blocks (HPACK) and stream states.
//! Sans-IO: answers that need no other state go to `out`, the rest become
//! [`Action`]s the loop runs once the connection's box is back in its table.

use super::{Action, H2Conn, CLIENT_TABLE, MAX_BLOCK, MAX_DECODED};
use crate::pump::h2_stream::{H2Stream, MAX_BODY};
use fluke_hpack::Decoder;
use wire::h2::{self as frames, code, setting, Frame, FrameError};

impl H2Conn {
    pub(in crate::pump) fn new(loopback: bool) -> H2Conn {
        let mut decoder = Decoder::new();
        decoder.set_max_allowed_table_size(CLIENT_TABLE);
        H2Conn {
            input: Vec::new(),
            preface_done: false,
            decoder,
            block: None,
            last_stream: 0,
            window: i64::from(frames::DEFAULT_WINDOW),
            initial_window: frames::DEFAULT_WINDOW,
            max_frame: frames::DEFAULT_MAX_FRAME,
            streams: Vec::new(),
            ping_out: false,
            gone: false,
            peer_goaway: false,
            loopback,
        }
    }

    pub(in crate::pump) fn stream_by_id(&mut self, id: u32) -> Option<&mut H2Stream> {
        self.streams.iter_mut().find(|s| s.id == id)
    }

    /// Reads frames from `input` (after any held bytes); answers that need no other
    /// state go to `out`, the rest to `actions`.
    pub(in crate::pump) fn handle_bytes(
        &mut self,
        input: &[u8],
        max_streams: u32,
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
                    return Err(FrameError {
                        code: code::PROTOCOL_ERROR,
                        reason: "not the HTTP/2 preface",
                    });
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
                self.handle_frame(frame, max_streams, out, actions)?;
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

    fn handle_frame(
        &mut self,
        frame: Frame,
        max_streams: u32,
        out: &mut Vec<u8>,
        actions: &mut Vec<Action>,
    ) -> Result<(), FrameError> {
        let fail = |code, reason| Err(FrameError { code, reason });
        if self.block.is_some() && !matches!(frame, Frame::Continuation { .. }) {
            return fail(code::PROTOCOL_ERROR, "a frame inside a header block");
        }
        match frame {
            Frame::Settings { ack: true, .. } => {}
            Frame::Settings { ack: false, params } => {
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
                                actions.push(Action::Pump);
                            }
                        }
                        setting::MAX_FRAME_SIZE => self.max_frame = s.value,
                        _ => {}
                    }
                }
                frames::write_settings_ack(out);
            }
            Frame::Ping { ack: true, .. } => self.ping_out = false,
            Frame::Ping { ack: false, data } => frames::write_ping(out, true, data),
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
                actions.push(Action::Pump);
            }
            Frame::WindowUpdate { stream, increment } => {
                if let Some(s) = self.stream_by_id(stream) {
                    s.window += i64::from(increment);
                    if s.window > i64::from(frames::MAX_WINDOW) {
                        // A stream error (RFC 9113 6.9.1): reset that stream only.
                        frames::write_rst_stream(out, stream, code::FLOW_CONTROL_ERROR);
                        actions.push(Action::Reset(stream));
                    } else {
                        actions.push(Action::Pump);
                    }
                } else if stream > self.last_stream {
                    return fail(code::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream");
                }
            }
            Frame::RstStream { stream, .. } => {
                if stream > self.last_stream {
                    return fail(code::PROTOCOL_ERROR, "RST_STREAM on an idle stream");
                }
                if self.stream_by_id(stream).is_some() {
                    actions.push(Action::Reset(stream));
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
                self.last_stream = self.last_stream.max(stream);
                if end_headers {
                    self.open(stream, end_stream, block, max_streams, out, actions)?;
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
                    return fail(code::ENHANCE_YOUR_CALM, "header block too large");
                }
                pending.2.extend_from_slice(block);
                if end_headers {
                    let (stream, end_stream, bytes) = *pending;
                    self.open(stream, end_stream, &bytes, max_streams, out, actions)?;
                } else {
                    self.block = Some(pending);
                }
            }
            Frame::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => {
                // Credit goes back at once: bodies are bounded by the core's limits,
                // not by holding the client's window.
                if flow_len > 0 {
                    frames::write_window_update(out, 0, flow_len);
                }
                if stream > self.last_stream {
                    return fail(code::PROTOCOL_ERROR, "DATA on an idle stream");
                }
                let Some(s) = self.stream_by_id(stream) else {
                    frames::write_rst_stream(out, stream, code::STREAM_CLOSED);
                    return Ok(());
                };
                match s.request.as_mut() {
                    Some(request) if !s.remote_closed => {
                        if request.body.len() + data.len() > MAX_BODY {
                            frames::write_rst_stream(out, stream, code::ENHANCE_YOUR_CALM);
                            actions.push(Action::Reset(stream));
                        } else {
                            request.body.extend_from_slice(data);
                            if end_stream {
                                s.remote_closed = true;
                                actions.push(Action::Request(stream));
                            } else if flow_len > 0 {
                                frames::write_window_update(out, stream, flow_len);
                            }
                        }
                    }
                    // Half-closed (remote): a stream error (RFC 9113 5.1), the stream
                    // ends here.
                    _ => {
                        frames::write_rst_stream(out, stream, code::STREAM_CLOSED);
                        actions.push(Action::Reset(stream));
                    }
                }
            }
            Frame::Ignored => {}
        }
        Ok(())
    }

    /// A complete header block opened `stream`: decoded (always, so the HPACK table
    /// stays in step), refused beyond the stream limit, else kept until its request
    /// is complete.
    fn open(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
        max_streams: u32,
        out: &mut Vec<u8>,
        actions: &mut Vec<Action>,
    ) -> Result<(), FrameError> {
        let mut headers = Vec::new();
        let mut size = 0usize;
        self.decoder
            .decode_with_cb(block, |name, value| {
                size += name.len() + value.len() + 32;
                if size <= MAX_DECODED {
                    headers.push((name.into_owned(), value.into_owned()));
                }
            })
            .map_err(|_| FrameError {
                code: code::COMPRESSION_ERROR,
                reason: "HPACK block not decodable",
            })?;
        if let Some(s) = self.stream_by_id(stream) {
            // A second header block on an open stream: trailers end a request body
            // (their fields are not used); anything else is a stream error.
            let code = match (s.remote_closed, end_stream) {
                (false, true) => {
                    s.remote_closed = true;
                    actions.push(Action::Request(stream));
                    return Ok(());
                }
                (false, false) => code::PROTOCOL_ERROR,
                (true, _) => code::STREAM_CLOSED,
            };
            frames::write_rst_stream(out, stream, code);
            actions.push(Action::Reset(stream));
            return Ok(());
        }
        if size > MAX_DECODED {
            frames::write_rst_stream(out, stream, code::ENHANCE_YOUR_CALM);
            return Ok(());
        }
        if self.peer_goaway || self.streams.len() >= max_streams as usize {
            frames::write_rst_stream(out, stream, code::REFUSED_STREAM);
            return Ok(());
        }
        let mut opened = H2Stream::new(stream, headers, self.initial_window);
        opened.remote_closed = end_stream;
        self.streams.push(opened);
        if end_stream {
            actions.push(Action::Request(stream));
        }
        Ok(())
    }
}
