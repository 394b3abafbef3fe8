//! flood `--reconnect`: where each connection stands in its user's message sequence,
//! so that a connection the server ended is opened again from there (SPEC B6 resume),
//! and what the sequence numbers say about what arrived.
//!
//! A [`Track`] per connection number lives beside the slab (only with the option: the
//! 64-byte slab entry does not grow). It reads the de-framed body bytes the scanner
//! hands over one at a time, each after the scanner's own events for it
//! ([`super::scan::Event::Body`]), and follows, per transport:
//! - SSE: `id: <epoch>-<seq>` lines and `event: gap`; resumes with `Last-Event-ID`.
//! - long-poll: each message's `"seq":`, the body's `"gap":true` and `"since":"e-s"`;
//!   resumes (and polls on) with `?since=`.
//! - WebSocket and chunked stream: the position the server sends first when asked with
//!   `?since=` (`{"position":"e-s","gap":…}` / `position e-s[ gap]`), then one number
//!   per message (their frames carry no ids); resumes with `?since=`. The first connect
//!   asks `?since=0` to learn the position, so history the user already had is replayed
//!   and counted.
//!
//! Ids that skip numbers with no gap reported count as `lost`, numbers at or below one
//! already seen as `duplicates` (SSE, long-poll); for WebSocket and stream only a
//! position other than the one asked for can show either.

use super::scan::Transport;
use super::stats::ResumeCounts;
use std::time::Duration;

/// A resume position, `<epoch>-<seq>` or a bare `<seq>` (the form of `wire::Since`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Since {
    pub epoch: Option<u32>,
    pub seq: u64,
}

impl std::fmt::Display for Since {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.epoch {
            Some(e) => write!(f, "{e}-{}", self.seq),
            None => write!(f, "{}", self.seq),
        }
    }
}

/// First reconnect delay before jitter; doubled per failed attempt up to [`BACKOFF_MAX`].
pub const BACKOFF_BASE: Duration = Duration::from_millis(50);
/// The longest wait between reconnect attempts, before jitter.
pub const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The wait before reconnect attempt `attempt` (0 = the first after the loss):
/// exponential, bounded, times a jitter factor in [0.5, 1.5) from `rand` (a u32), so a
/// gateway's clients do not all come back in the same millisecond.
pub fn backoff(attempt: u8, rand: u32) -> Duration {
    let base = BACKOFF_BASE
        .saturating_mul(1 << attempt.min(16))
        .min(BACKOFF_MAX);
    base.mul_f64(0.5 + f64::from(rand) / (f64::from(u32::MAX) + 1.0))
}

const F_NONE: u8 = 0;
/// Reading `[<epoch>-]<seq>`.
const F_POS: u8 = 1;
/// Reading a long-poll message's `"seq":` number.
const F_SEQ: u8 = 2;

const SSE_ID: &[u8] = b"id:";
const SSE_GAP: &[u8] = b"event: gap";
const STREAM_POSITION: &[u8] = b"position ";
const WS_POSITION: &[u8] = b"{\"position\":\"";
const GAP: &[u8] = b"gap";
const JSON_GAP: &[u8] = b"\"gap\":true";
const POLL_SEQ: &[u8] = b"\"seq\":";
const POLL_SINCE: &[u8] = b"\"since\":\"";

/// One connection number's resume state; see the module doc.
#[derive(Clone, Debug, Default)]
pub struct Track {
    /// The last message's position: where a reconnect resumes.
    pub pos: Since,
    /// What the current connection asked to resume from.
    asked: Since,
    /// Failed reconnect attempts in a row (the backoff exponent).
    pub attempt: u8,
    /// The current attempt is a reconnect, not the first connect.
    pub retry: bool,
    // Parsing state, reset per connection.
    field: u8,
    num: u64,
    epoch: Option<u64>,
    digits: bool,
    /// Column in the current line (SSE, stream), saturating.
    col: u8,
    /// Line-start needles still matching (bit i = needle i).
    cand: u8,
    /// Progress of the anywhere-needles (JSON keys, ` gap`).
    m: [u8; 3],
    /// Stream / WebSocket: the position was read.
    positioned: bool,
    /// Stream / WebSocket: a position read, waiting for its line / object end.
    got: Option<Since>,
    got_gap: bool,
    /// SSE: an id since the last message (a gap event has none).
    id_seen: bool,
    /// SSE: `event: gap` seen; the next id is the new base.
    gap_next: bool,
    /// Stream: the next message is the position line itself.
    suppress: bool,
    /// Long-poll, this body: a gap, and the numbers that looked lost or repeated.
    body_gap: bool,
    body_lost: u64,
    body_dup: u64,
    body_since: Option<Since>,
}

impl Track {
    /// A new connection starts: what it asks for is where this one stands.
    pub fn connecting(&mut self) -> Since {
        let (pos, attempt, retry) = (self.pos, self.attempt, self.retry);
        *self = Track {
            pos,
            asked: pos,
            attempt,
            retry,
            cand: u8::MAX,
            ..Default::default()
        };
        pos
    }

    /// Whether the scanner's message counts (the position line and gap events do not);
    /// advances the stream / WebSocket position.
    pub fn on_message(&mut self, t: Transport) -> bool {
        match t {
            Transport::Sse => std::mem::take(&mut self.id_seen),
            Transport::Poll => true,
            Transport::Stream if std::mem::take(&mut self.suppress) => false,
            Transport::Stream | Transport::Ws | Transport::Socketio | Transport::Pusher => {
                self.pos.seq += 1;
                true
            }
        }
    }

    /// A long-poll body ended: settle its numbers and take the server's `since`.
    pub fn body_done(&mut self, c: &mut ResumeCounts) {
        if std::mem::take(&mut self.body_gap) {
            c.gaps += 1;
        } else {
            c.lost += self.body_lost;
            c.duplicates += self.body_dup;
        }
        (self.body_lost, self.body_dup) = (0, 0);
        if let Some(since) = self.body_since.take() {
            self.pos = since;
        }
    }

    /// De-framed body bytes of this connection.
    pub fn feed(&mut self, t: Transport, data: &[u8], c: &mut ResumeCounts) {
        for &b in data {
            match t {
                Transport::Sse => self.sse_byte(b, c),
                Transport::Poll => self.poll_byte(b),
                Transport::Stream => self.stream_byte(b, c),
                Transport::Ws | Transport::Socketio | Transport::Pusher => self.ws_byte(b, c),
            }
        }
    }

    /// Digits of a position; true when `b` ended it (the caller then reads `b` too).
    fn pos_byte(&mut self, b: u8) -> bool {
        match b {
            b'0'..=b'9' => {
                self.num = self.num.saturating_mul(10) + u64::from(b - b'0');
                self.digits = true;
                false
            }
            b'-' if self.epoch.is_none() && self.digits => {
                self.epoch = Some(self.num);
                (self.num, self.digits) = (0, false);
                false
            }
            b' ' if !self.digits && self.epoch.is_none() => false,
            _ => true,
        }
    }

    /// The position just read (and the parser reset for the next field).
    fn take_pos(&mut self) -> Since {
        let epoch = self.epoch.take().and_then(|e| u32::try_from(e).ok());
        let pos = Since {
            epoch,
            seq: self.num,
        };
        (self.field, self.num, self.digits) = (F_NONE, 0, false);
        pos
    }

    /// Line-start needle matching: the needle completed by `b`, if any.
    fn prefix(&mut self, b: u8, needles: &[&[u8]]) -> Option<usize> {
        let col = usize::from(self.col);
        self.col = self.col.saturating_add(1);
        let mut done = None;
        for (i, n) in needles.iter().enumerate() {
            if self.cand & (1 << i) == 0 {
                continue;
            }
            if n.get(col) != Some(&b) {
                self.cand &= !(1 << i);
            } else if col + 1 == n.len() {
                self.cand &= !(1 << i);
                done = Some(i);
            }
        }
        done
    }

    fn new_line(&mut self) {
        (self.col, self.cand) = (0, u8::MAX);
    }

    fn sse_byte(&mut self, b: u8, c: &mut ResumeCounts) {
        if self.field == F_POS && self.pos_byte(b) {
            let id = self.take_pos();
            self.sse_id(id, c);
        }
        match b {
            b'\n' => {
                if self.col == 0 {
                    // A blank line ends the event (its message was judged just before).
                    self.id_seen = false;
                }
                self.new_line();
            }
            b'\r' => {}
            _ => match self.prefix(b, &[SSE_ID, SSE_GAP]) {
                Some(0) => self.field = F_POS,
                Some(_) => {
                    c.gaps += 1;
                    self.gap_next = true;
                }
                None => {}
            },
        }
    }

    fn sse_id(&mut self, id: Since, c: &mut ResumeCounts) {
        let last = self.pos;
        if std::mem::take(&mut self.gap_next) {
            // Counted at the gap event: this id is the new base.
        } else if matches!((last.epoch, id.epoch), (Some(a), Some(b)) if a != b) {
            c.lost += 1; // a new epoch with no gap reported
        } else if id.seq <= last.seq {
            c.duplicates += 1;
        } else {
            c.lost += id.seq - last.seq - 1;
        }
        self.pos = id;
        self.id_seen = true;
    }

    fn poll_byte(&mut self, b: u8) {
        if self.field == F_SEQ && self.pos_byte(b) {
            let seq = self.take_pos().seq;
            if seq <= self.pos.seq {
                self.body_dup += 1;
            } else {
                self.body_lost += seq - self.pos.seq - 1;
            }
            self.pos.seq = seq;
        } else if self.field == F_POS && self.pos_byte(b) {
            self.body_since = Some(self.take_pos());
        }
        if super::scan::step(&mut self.m[0], POLL_SEQ, b) {
            self.field = F_SEQ;
        }
        if super::scan::step(&mut self.m[1], JSON_GAP, b) {
            self.body_gap = true;
        }
        if super::scan::step(&mut self.m[2], POLL_SINCE, b) {
            self.field = F_POS;
        }
    }

    fn stream_byte(&mut self, b: u8, c: &mut ResumeCounts) {
        if self.positioned {
            return; // protocol lines come only before the first message
        }
        if self.field == F_POS && self.pos_byte(b) {
            self.got = Some(self.take_pos());
        }
        if b == b'\n' {
            if let Some(pos) = self.got.take() {
                let gap = std::mem::take(&mut self.got_gap);
                self.position(pos, gap, c);
                self.suppress = true;
            }
            return self.new_line();
        }
        if self.got.is_some() && super::scan::step(&mut self.m[0], GAP, b) {
            self.got_gap = true;
        }
        if self.prefix(b, &[STREAM_POSITION]).is_some() {
            self.field = F_POS;
        }
    }

    fn ws_byte(&mut self, b: u8, c: &mut ResumeCounts) {
        if self.positioned {
            return; // the position is the first frame
        }
        if self.field == F_POS && self.pos_byte(b) {
            self.got = Some(self.take_pos());
        }
        if b == b'}' {
            if let Some(pos) = self.got.take() {
                let gap = std::mem::take(&mut self.got_gap);
                self.position(pos, gap, c);
            }
            return;
        }
        if self.got.is_some() && super::scan::step(&mut self.m[0], JSON_GAP, b) {
            self.got_gap = true;
        }
        if self.prefix(b, &[WS_POSITION]).is_some() {
            self.field = F_POS;
        }
    }

    /// The server's position for a stream / WebSocket resume.
    fn position(&mut self, pos: Since, gap: bool, c: &mut ResumeCounts) {
        let asked = self.asked;
        if gap {
            c.gaps += 1;
        } else if pos.seq < asked.seq {
            c.duplicates += asked.seq - pos.seq;
        } else {
            c.lost += pos.seq - asked.seq;
        }
        self.pos = Since {
            epoch: pos.epoch.or(asked.epoch),
            seq: pos.seq,
        };
        self.positioned = true;
    }
}

#[cfg(test)]
mod tests;
