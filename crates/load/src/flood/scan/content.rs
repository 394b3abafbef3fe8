//! The scanner's payload bytes: `ts=` stamps, SSE events, long-poll keys, and where a
//! message ends (heartbeats and the welcome are not counted).

use super::*;

impl Scanner {
    /// Payload bytes of the current message: stamps, and per transport the message
    /// boundaries that live inside the payload (SSE events, long-poll keys).
    pub(super) fn content(&mut self, t: Transport, data: &[u8], out: &mut impl FnMut(Event<'_>)) {
        let track = self.flags & F_TRACK != 0;
        for (i, &b) in data.iter().enumerate() {
            if track {
                self.content_byte(t, b, out);
                out(Event::Body(&data[i..=i]));
            } else {
                self.content_byte(t, b, out);
            }
        }
    }

    #[inline]
    fn content_byte(&mut self, t: Transport, b: u8, out: &mut impl FnMut(Event<'_>)) {
        self.ts_byte(b, t, out);
        match t {
            Transport::Sse => self.sse_byte(b, out),
            Transport::Poll => {
                if step(&mut self.m1, POLL_SEQ, b) {
                    out(Event::Message);
                }
                if self.flags & F_LAST_DIGITS != 0 {
                    if b.is_ascii_digit() {
                        self.last = self
                            .last
                            .saturating_mul(10)
                            .saturating_add(u64::from(b - b'0'));
                    } else if b != b' ' {
                        self.flags &= !F_LAST_DIGITS;
                    }
                }
                if step(&mut self.m2, POLL_LAST, b) {
                    self.flags |= F_LAST_DIGITS;
                    self.last = 0;
                }
            }
            Transport::Socketio => {
                self.flags |= F_NONWS;
                self.m3 = match (self.m3, b) {
                    (SIO_START, b'4') => SIO_MESSAGE,
                    (SIO_START, b'0') => SIO_OPEN,
                    (SIO_START, b'2') => SIO_PING,
                    (SIO_MESSAGE, b'2') => SIO_EVENT,
                    (SIO_START | SIO_MESSAGE, _) => SIO_OTHER,
                    (kind, _) => kind,
                };
            }
            Transport::Pusher => self.pusher_byte(b),
            Transport::Stream | Transport::Ws => {
                if !b.is_ascii_whitespace() {
                    self.flags |= F_NONWS;
                }
            }
        }
    }

    /// A whole Socket.IO packet was read: an event is a message, the open packet and
    /// a ping ask for an answer, anything else (the namespace's reply, a noop) is
    /// neither.
    pub(super) fn socketio_packet_end(&mut self, out: &mut impl FnMut(Event<'_>)) {
        let kind = std::mem::replace(&mut self.m3, SIO_START);
        if kind == SIO_EVENT {
            return self.message_end(out);
        }
        self.ts_flush(out);
        self.tsm = 0;
        self.flags &= !(F_NONWS | F_HAS_TS);
        match kind {
            SIO_OPEN => out(Event::Answer(SIO_CONNECT)),
            SIO_PING => out(Event::Answer(SIO_PONG)),
            _ => {}
        }
    }

    fn sse_byte(&mut self, b: u8, out: &mut impl FnMut(Event<'_>)) {
        match b {
            b'\r' => {}
            b'\n' => {
                if self.flags & F_LINE_START != 0 {
                    if self.flags & F_EV_DATA != 0 {
                        self.flags |= F_NONWS;
                        if self.flags & F_TRACK != 0 {
                            // With --reconnect an event counts by its id
                            // (resume::Track): an id-less welcome is not counted
                            // there, and a first message without a stamp must be.
                            self.flags |= F_SEEN_FIRST;
                        }
                        self.message_end(out);
                    }
                    self.flags &= !F_EV_DATA;
                } else if self.flags & F_LINE_DATA != 0 {
                    self.flags |= F_EV_DATA;
                }
                self.flags = (self.flags | F_LINE_START) & !F_LINE_DATA;
                self.m3 = 0;
            }
            _ => {
                if self.flags & F_LINE_START != 0 {
                    self.m3 = 0;
                    self.flags &= !F_LINE_START;
                    if b == b'd' {
                        self.m3 = 1;
                    } else {
                        self.m3 = u8::MAX; // not a data line: stop matching
                    }
                } else if self.m3 != u8::MAX && (self.m3 as usize) < SSE_DATA.len() {
                    if SSE_DATA[self.m3 as usize] == b {
                        self.m3 += 1;
                        if self.m3 as usize == SSE_DATA.len() {
                            self.flags |= F_LINE_DATA;
                        }
                    } else {
                        self.m3 = u8::MAX;
                    }
                }
            }
        }
    }

    /// The `ts=` stamp matcher; `tsm` 0..=2 is match progress, 3 means "in digits".
    #[inline]
    fn ts_byte(&mut self, b: u8, t: Transport, out: &mut impl FnMut(Event<'_>)) {
        if self.tsm == 3 {
            if b.is_ascii_digit() {
                self.ts = self
                    .ts
                    .saturating_mul(10)
                    .saturating_add(u64::from(b - b'0'));
                return;
            }
            self.ts_flush_with(t, out);
        }
        if step(&mut self.tsm, TS, b) {
            self.tsm = 3;
            self.ts = 0;
        }
    }

    pub(super) fn ts_flush(&mut self, out: &mut impl FnMut(Event<'_>)) {
        if self.tsm == 3 {
            self.tsm = 0;
            if self.ts > 0 {
                self.flags |= F_HAS_TS;
                out(Event::Stamp(self.ts));
            }
        }
    }

    fn ts_flush_with(&mut self, t: Transport, out: &mut impl FnMut(Event<'_>)) {
        let had = self.tsm == 3 && self.ts > 0;
        self.ts_flush(out);
        // Without message framing (raw stream body) every stamp is a message.
        if had && t == Transport::Stream && self.stage == S_RAW {
            out(Event::Message);
        }
    }

    pub(super) fn message_end(&mut self, out: &mut impl FnMut(Event<'_>)) {
        self.ts_flush(out);
        self.tsm = 0;
        let nonws = self.flags & F_NONWS != 0;
        let stamped = self.flags & F_HAS_TS != 0;
        self.flags &= !(F_NONWS | F_HAS_TS);
        if !nonws {
            return; // a heartbeat
        }
        if !stamped && self.flags & F_STAMPED_ONLY != 0 {
            return; // a protocol reply, not a delivery
        }
        if self.flags & F_SEEN_FIRST == 0 {
            self.flags |= F_SEEN_FIRST;
            if !stamped {
                return; // the welcome
            }
        }
        out(Event::Message);
    }
}
