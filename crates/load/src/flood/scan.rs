//! The client-side response scanner of `flood`: sans-IO, incremental, and tiny.
//!
//! It is fed whatever bytes a read returned (any split, down to one byte at a time) and
//! reports events: the response status, each message, each `ts=<unix micros>` stamp,
//! WebSocket pings and closes, the end of a long-poll body. It never buffers: a
//! [`Scanner`] is 40 bytes of counters and match progress, because one lives in every
//! connection's slab entry and the budget for a whole idle connection is 256 bytes.
//!
//! It is *not* an HTTP client: it knows just enough framing (response head, chunked,
//! Content-Length, SSE lines, RFC 6455 server frames) to count messages of any
//! nchan-style push server. Malformed framing is reported, never panics.
//!
//! Message rules, chosen to work against servers that are not myriad:
//! - stream: one chunk = one message; whitespace-only chunks are heartbeats; without
//!   chunked encoding every stamp counts as a message.
//! - SSE: one event with a `data:` line = one message; comment lines are heartbeats.
//! - WebSocket: one text/binary frame with FIN = one message.
//! - Socket.IO (Engine.IO v4 over WebSocket): one event packet (`42[...]`) = one
//!   message; the open packet (`0{...}`) asks for the namespace connect (`40`), a
//!   ping (`2`) for a pong (`3`), both reported as [`Event::Answer`].
//! - Pusher: any event but the protocol's own (`pusher`), stamped only.
//! - long-poll: one `"seq":` key in the JSON body = one message; `"last":` is remembered.
//! - stream, SSE, WebSocket: the first message is a welcome (not counted) unless it
//!   carries a stamp; with [`Scanner::stamped_only`] (flood `--rooms`) only stamped
//!   messages count, so a channel protocol's replies never pass for deliveries.
//!
//! Here the framing; the payload's bytes (stamps, SSE lines, long-poll keys, a
//! message's end) are in `content`.

/// Which client protocol a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// HTTP/1.1 chunked streaming.
    Stream,
    /// Server-Sent Events.
    Sse,
    /// WebSocket (RFC 6455).
    Ws,
    /// Long-poll with keep-alive.
    Poll,
    /// Socket.IO v5 over Engine.IO v4's WebSocket transport (`/socket.io/?EIO=4&transport=websocket`).
    Socketio,
    /// A Pusher Channels client (`/app/<key>?protocol=7`): subscribes to one channel
    /// once established, answers `pusher:ping`, is open once subscribed.
    Pusher,
}

impl Transport {
    /// Whether the connection upgrades to WebSocket frames.
    pub fn is_ws(self) -> bool {
        matches!(
            self,
            Transport::Ws | Transport::Socketio | Transport::Pusher
        )
    }
}

/// What the scanner found; delivered in stream order.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// The response head ended with this status; the caller decides whether it is good.
    Head(u16),
    /// One message (see the module rules).
    Message,
    /// A `ts=` stamp: unix microseconds parsed from the payload.
    Stamp(u64),
    /// A WebSocket ping; the payload if the whole frame was in this read, else empty.
    Ping(&'a [u8]),
    /// A text frame the client must send back (Socket.IO's namespace connect and
    /// pongs, Pusher's pongs).
    Answer(&'static [u8]),
    /// Pusher: the connection is established; send the subscription.
    Subscribe,
    /// Pusher: the subscription succeeded (the connection counts as open).
    Subscribed,
    /// Pusher: the subscription was refused.
    Refused,
    /// The server sent a WebSocket close frame or ended a stream body.
    End,
    /// A long-poll body ended; `last` is the newest sequence seen so far.
    BodyDone { last: u64 },
    /// Framing the scanner cannot follow.
    Malformed,
    /// With [`Scanner::track`]: each de-framed body byte (chunk, frame or event
    /// payload), after the events it caused; `--reconnect` reads positions from them.
    Body(&'a [u8]),
}

// Stages. A u8, not an enum with data, so the whole state stays 40 bytes.
const S_STATUS_SKIP: u8 = 0; // "HTTP/1.1" before the first space
const S_STATUS: u8 = 1; // three status digits
const S_HEAD: u8 = 2; // headers until the blank line
const S_CHUNK_SIZE: u8 = 3;
const S_CHUNK_EXT: u8 = 4;
const S_CHUNK_DATA: u8 = 5;
const S_CHUNK_END: u8 = 6;
const S_TRAILER: u8 = 7;
const S_CLEN: u8 = 8;
const S_RAW: u8 = 9;
const S_WS_HDR: u8 = 10; // first two bytes of a frame
const S_WS_LEN: u8 = 11; // extended length bytes
const S_WS_MASK: u8 = 12; // mask key bytes (servers should not mask; tolerated)
const S_WS_DATA: u8 = 13;
const S_DONE: u8 = 14;

// Flag bits.
const F_CHUNKED: u16 = 1;
const F_CLEN: u16 = 1 << 1;
const F_CLEN_DIGITS: u16 = 1 << 2;
const F_SEEN_FIRST: u16 = 1 << 3;
const F_NONWS: u16 = 1 << 4;
const F_HAS_TS: u16 = 1 << 5;
const F_LINE_START: u16 = 1 << 6;
const F_EV_DATA: u16 = 1 << 7;
const F_LINE_DATA: u16 = 1 << 8;
const F_WS_FIN: u16 = 1 << 9;
const F_WS_MASKED: u16 = 1 << 10;
const F_LAST_DIGITS: u16 = 1 << 11;
const F_CLEN_SPACE: u16 = 1 << 12;
const F_TRACK: u16 = 1 << 13;
const F_STAMPED_ONLY: u16 = 1 << 14;

// Socket.IO packet kinds, in `m3` while a text frame is read (Transport::Socketio).
const SIO_START: u8 = 0; // no byte of the packet yet
const SIO_MESSAGE: u8 = 1; // Engine.IO `4`: a Socket.IO packet follows
const SIO_EVENT: u8 = 2; // `42`: an event, the only kind that is a message
const SIO_OPEN: u8 = 3; // `0`: the Engine.IO handshake
const SIO_PING: u8 = 4; // `2`
const SIO_OTHER: u8 = 5;
/// The namespace connect the client sends after the open packet.
const SIO_CONNECT: &[u8] = b"40";
/// The pong answering a ping.
const SIO_PONG: &[u8] = b"3";
const END_OF_HEAD: &[u8] = b"\r\n\r\n";
const CHUNKED: &[u8] = b"chunked";
const CONTENT_LENGTH: &[u8] = b"\ncontent-length:";
const SSE_DATA: &[u8] = b"data:";
const POLL_SEQ: &[u8] = b"\"seq\":";
const POLL_LAST: &[u8] = b"\"last\":";
const TS: &[u8] = b"ts=";

/// Per-connection scanning state. `Copy` and 40 bytes: see the module doc.
#[derive(Clone, Copy, Debug, Default)]
pub struct Scanner {
    stage: u8,
    m1: u8,
    m2: u8,
    m3: u8,
    tsm: u8,
    opcode: u8,
    status: u16,
    flags: u16,
    num: u64,
    ts: u64,
    last: u64,
}

/// Advance a needle match by one byte (lower-cased by the caller where needed).
/// The needles here restart only on their first byte, so no failure table is needed.
#[inline]
pub(super) fn step(progress: &mut u8, needle: &[u8], b: u8) -> bool {
    if needle[*progress as usize] == b {
        *progress += 1;
        if *progress as usize == needle.len() {
            *progress = 0;
            return true;
        }
    } else {
        *progress = u8::from(needle[0] == b);
    }
    false
}

impl Scanner {
    /// A scanner for a fresh response; `last` carries the long-poll position over.
    pub fn new(last: u64) -> Self {
        Scanner {
            last,
            ..Default::default()
        }
    }

    /// Start over for the next response on a keep-alive connection (long-poll).
    pub fn next_response(&mut self) {
        let keep = self.flags & (F_TRACK | F_STAMPED_ONLY);
        *self = Scanner::new(self.last);
        self.flags |= keep;
    }

    /// Count only messages that carry a stamp (no welcome, no protocol replies).
    pub fn stamped_only(&mut self) {
        self.flags |= F_STAMPED_ONLY;
    }

    /// Report every body byte as [`Event::Body`] (`--reconnect`; off by default: one
    /// callback per byte).
    pub fn track(&mut self) {
        self.flags |= F_TRACK;
    }

    /// The newest long-poll sequence seen (the next `since`).
    pub fn last(&self) -> u64 {
        self.last
    }

    /// Feed received bytes; `out` gets every event in order.
    pub fn handle_bytes(&mut self, t: Transport, data: &[u8], out: &mut impl FnMut(Event<'_>)) {
        let mut i = 0;
        while i < data.len() {
            match self.stage {
                S_STATUS_SKIP => {
                    if data[i] == b' ' {
                        self.stage = S_STATUS;
                    }
                    i += 1;
                }
                S_STATUS => {
                    let b = data[i];
                    if b.is_ascii_digit() && self.m1 < 3 {
                        self.status = self.status * 10 + u16::from(b - b'0');
                        self.m1 += 1;
                    } else {
                        self.m1 = 0;
                        self.stage = S_HEAD;
                        continue;
                    }
                    i += 1;
                }
                S_HEAD => {
                    let b = data[i];
                    i += 1;
                    self.head_byte(b);
                    if step(&mut self.m1, END_OF_HEAD, b) {
                        out(Event::Head(self.status));
                        self.begin_body(t, out);
                    }
                }
                S_CHUNK_SIZE => {
                    let b = data[i];
                    i += 1;
                    match b {
                        b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                            let d = (b as char).to_digit(16).unwrap_or(0); // a hex digit by the arm
                            self.num = self.num.saturating_mul(16).saturating_add(u64::from(d));
                        }
                        b';' | b' ' => self.stage = S_CHUNK_EXT,
                        b'\r' => {}
                        b'\n' => self.chunk_size_done(t, out),
                        _ => return self.malformed(out),
                    }
                }
                S_CHUNK_EXT => {
                    if data[i] == b'\n' {
                        self.chunk_size_done(t, out);
                    }
                    i += 1;
                }
                S_CHUNK_DATA => {
                    let n = (self.num as usize).min(data.len() - i);
                    self.content(t, &data[i..i + n], out);
                    i += n;
                    self.num -= n as u64;
                    if self.num == 0 {
                        self.stage = S_CHUNK_END;
                        if t == Transport::Stream {
                            self.message_end(out);
                        }
                    }
                }
                S_CHUNK_END => {
                    if data[i] == b'\n' {
                        self.stage = S_CHUNK_SIZE;
                        self.num = 0;
                    }
                    i += 1;
                }
                S_TRAILER => {
                    let b = data[i];
                    i += 1;
                    if b == b'\n' {
                        if self.flags & F_LINE_START != 0 {
                            self.body_end(t, out);
                        }
                        self.flags |= F_LINE_START;
                    } else if b != b'\r' {
                        self.flags &= !F_LINE_START;
                    }
                }
                S_CLEN => {
                    let n = (self.num as usize).min(data.len() - i);
                    self.content(t, &data[i..i + n], out);
                    i += n;
                    self.num -= n as u64;
                    if self.num == 0 {
                        self.body_end(t, out);
                    }
                }
                S_RAW => {
                    self.content(t, &data[i..], out);
                    i = data.len();
                }
                S_WS_HDR => {
                    let b = data[i];
                    i += 1;
                    if self.m1 == 0 {
                        self.opcode = b & 0x0f;
                        self.flags = (self.flags & !(F_WS_FIN | F_WS_MASKED))
                            | if b & 0x80 != 0 { F_WS_FIN } else { 0 };
                        self.m1 = 1;
                    } else {
                        self.m1 = 0;
                        if b & 0x80 != 0 {
                            self.flags |= F_WS_MASKED;
                        }
                        self.num = u64::from(b & 0x7f);
                        self.m2 = match self.num {
                            126 => 2,
                            127 => 8,
                            _ => 0,
                        };
                        if self.m2 > 0 {
                            self.num = 0;
                            self.stage = S_WS_LEN;
                        } else {
                            self.ws_after_len(t, &data[i..], out);
                        }
                    }
                }
                S_WS_LEN => {
                    self.num = (self.num << 8) | u64::from(data[i]);
                    i += 1;
                    self.m2 -= 1;
                    if self.m2 == 0 {
                        self.ws_after_len(t, &data[i..], out);
                    }
                }
                S_WS_MASK => {
                    i += 1;
                    self.m2 -= 1;
                    if self.m2 == 0 {
                        self.ws_payload_start(t, &data[i..], out);
                    }
                }
                S_WS_DATA => {
                    let n = (self.num as usize).min(data.len() - i);
                    if self.opcode <= 2 {
                        // Masked server frames are a protocol error; their stamps would be
                        // garbage, so only unmasked data is scanned.
                        if self.flags & F_WS_MASKED == 0 {
                            self.content(t, &data[i..i + n], out);
                        }
                    }
                    i += n;
                    self.num -= n as u64;
                    if self.num == 0 {
                        self.ws_frame_end(t, out);
                    }
                }
                _ => return, // S_DONE: ignore whatever follows
            }
        }
    }

    /// Header bytes: spot chunked encoding and a Content-Length value.
    fn head_byte(&mut self, b: u8) {
        let lower = b.to_ascii_lowercase();
        if step(&mut self.m2, CHUNKED, lower) {
            self.flags |= F_CHUNKED;
        }
        if self.flags & F_CLEN_DIGITS != 0 {
            if b.is_ascii_digit() {
                self.num = self
                    .num
                    .saturating_mul(10)
                    .saturating_add(u64::from(b - b'0'));
                self.flags |= F_CLEN_SPACE;
            } else if !(b == b' ' && self.flags & F_CLEN_SPACE == 0) {
                self.flags &= !F_CLEN_DIGITS;
            }
        }
        if step(&mut self.m3, CONTENT_LENGTH, lower) {
            self.flags = (self.flags | F_CLEN | F_CLEN_DIGITS) & !F_CLEN_SPACE;
            self.num = 0;
        }
    }

    fn begin_body(&mut self, t: Transport, out: &mut impl FnMut(Event<'_>)) {
        self.m1 = 0;
        self.m2 = 0;
        self.m3 = 0;
        self.flags |= F_LINE_START;
        self.stage = if t.is_ws() {
            S_WS_HDR
        } else if self.flags & F_CHUNKED != 0 {
            self.num = 0;
            S_CHUNK_SIZE
        } else if self.flags & F_CLEN != 0 {
            if self.num == 0 {
                self.body_end(t, out);
                return;
            }
            S_CLEN
        } else {
            S_RAW
        };
    }

    fn chunk_size_done(&mut self, t: Transport, out: &mut impl FnMut(Event<'_>)) {
        if self.num == 0 {
            self.stage = S_TRAILER;
            self.flags |= F_LINE_START;
        } else {
            self.stage = S_CHUNK_DATA;
        }
        let _ = (t, out);
    }

    fn body_end(&mut self, t: Transport, out: &mut impl FnMut(Event<'_>)) {
        self.ts_flush(out);
        self.stage = S_DONE;
        if t == Transport::Poll {
            out(Event::BodyDone { last: self.last });
        } else {
            out(Event::End);
        }
    }

    fn malformed(&mut self, out: &mut impl FnMut(Event<'_>)) {
        self.stage = S_DONE;
        out(Event::Malformed);
    }

    fn ws_after_len(&mut self, t: Transport, rest: &[u8], out: &mut impl FnMut(Event<'_>)) {
        if self.flags & F_WS_MASKED != 0 {
            self.m2 = 4;
            self.stage = S_WS_MASK;
        } else {
            self.ws_payload_start(t, rest, out);
        }
    }

    fn ws_payload_start(&mut self, t: Transport, rest: &[u8], out: &mut impl FnMut(Event<'_>)) {
        if self.opcode == 9 {
            // Ping: hand over the payload when the whole frame is here (the usual case);
            // otherwise answer with an empty pong rather than keep a per-connection buffer.
            let whole = rest.len() as u64 >= self.num;
            out(Event::Ping(if whole {
                &rest[..self.num as usize]
            } else {
                &[]
            }));
        }
        if self.num == 0 {
            self.ws_frame_end(t, out);
        } else {
            self.stage = S_WS_DATA;
        }
    }

    fn ws_frame_end(&mut self, t: Transport, out: &mut impl FnMut(Event<'_>)) {
        self.stage = S_WS_HDR;
        match self.opcode {
            0..=2 if self.flags & F_WS_FIN != 0 && t == Transport::Socketio => {
                self.socketio_packet_end(out)
            }
            0..=2 if t == Transport::Pusher => {
                self.pusher_frame_end(self.flags & F_WS_FIN != 0, out)
            }
            0..=2 if self.flags & F_WS_FIN != 0 => self.message_end(out),
            8 => {
                self.stage = S_DONE;
                out(Event::End);
            }
            _ => {}
        }
    }
}

mod content;
pub mod pusher;
#[cfg(test)]
mod tests;
