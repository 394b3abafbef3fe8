//! [`Outbox`]: where a core call leaves what it produced — bytes to send, requests
//! for the bus, the connection's next timer, and whether to close now.
//!
//! One outbox per event loop, reused for every call (the caller drains it after
//! each), so producing output allocates nothing per connection. Bytes are kept in
//! order as pieces: shared frames (`Bytes`, encoded once per message and loop) and
//! spans of an inline buffer the encoders write into (responses, per-recipient
//! SSE `id:` lines).

use super::{ControlAnswer, Tick};
use bus::Request;
use bytes::Bytes;
use wire::StreamControl;

#[derive(Default)]
pub struct Outbox {
    pieces: Vec<Piece>,
    inline: Vec<u8>,
    requests: Vec<Request>,
    timer: Option<Tick>,
    close: bool,
    resume: bool,
    /// HTTP/2 streams only (`stream_control`): this stream's `session=` name, a POST's
    /// control for the stream of that name, answers to POSTs whose join was answered.
    session: Option<Box<str>>,
    control: Option<Box<StreamControl>>,
    answers: Vec<ControlAnswer>,
    /// xorshift state for heartbeat jitter (never 0).
    rng: u32,
}

/// One piece of output, in order.
#[derive(Clone, Debug)]
pub enum Piece {
    Shared(Bytes),
    /// `inline[start..end]`.
    Inline(u32, u32),
}

impl Outbox {
    /// An empty outbox whose jitter sequence starts from `seed`.
    pub fn new(seed: u32) -> Outbox {
        Outbox {
            rng: seed | 1,
            ..Outbox::default()
        }
    }

    // ---- written by the core ----

    /// Appends a shared frame.
    pub fn send(&mut self, frame: &Bytes) {
        if !frame.is_empty() {
            self.pieces.push(Piece::Shared(frame.clone()));
        }
    }

    /// Appends a static byte string (heartbeats, fixed heads).
    pub fn send_static(&mut self, bytes: &'static [u8]) {
        self.send(&Bytes::from_static(bytes));
    }

    /// Appends whatever `encode` writes into the inline buffer.
    pub fn write(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        let start = self.inline.len();
        encode(&mut self.inline);
        let end = self.inline.len();
        if end == start {
            return;
        }
        // Adjacent inline spans merge, so a response is one piece.
        if let Some(Piece::Inline(_, last_end)) = self.pieces.last_mut() {
            if *last_end as usize == start {
                *last_end = end as u32;
                return;
            }
        }
        self.pieces.push(Piece::Inline(start as u32, end as u32));
    }

    pub(crate) fn request(&mut self, request: Request) {
        self.requests.push(request);
    }

    pub(crate) fn set_timer(&mut self, deadline: Tick) {
        self.timer = Some(deadline);
    }

    pub(crate) fn close_now(&mut self) {
        self.close = true;
    }

    pub(crate) fn resume_input(&mut self) {
        self.resume = true;
    }

    pub(crate) fn name_session(&mut self, session: &str) {
        self.session = Some(session.into());
    }

    pub(crate) fn control(&mut self, control: StreamControl) {
        self.control = Some(Box::new(control));
    }

    pub(crate) fn answer(&mut self, answer: ControlAnswer) {
        self.answers.push(answer);
    }

    /// A pseudo-random u32 (xorshift32): heartbeat jitter without a clock or an RNG
    /// in the core; deterministic for a given seed, so tests can replay it.
    pub(crate) fn random(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x
    }

    // ---- read by the caller ----

    /// True when the call left nothing to do.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
            && self.requests.is_empty()
            && self.timer.is_none()
            && !self.close
            && !self.resume
            && self.session.is_none()
            && self.control.is_none()
            && self.answers.is_empty()
    }

    /// Bytes to send, in order.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// The bytes of one piece.
    pub fn slice<'a>(&'a self, piece: &'a Piece) -> &'a [u8] {
        match piece {
            Piece::Shared(b) => b,
            Piece::Inline(start, end) => &self.inline[*start as usize..*end as usize],
        }
    }

    /// One piece from `from` on as owned bytes (for output that must wait).
    pub fn tail(&self, piece: &Piece, from: usize) -> Bytes {
        match piece {
            Piece::Shared(b) => b.slice(from..),
            Piece::Inline(..) => Bytes::copy_from_slice(&self.slice(piece)[from..]),
        }
    }

    /// Total bytes to send.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(|p| self.slice(p).len()).sum()
    }

    /// Forgets the bytes (after they were written or queued).
    pub fn clear_bytes(&mut self) {
        self.pieces.clear();
        self.inline.clear();
    }

    /// Takes the bus requests, in order, into `into`.
    pub fn take_requests(&mut self, into: &mut Vec<Request>) {
        into.append(&mut self.requests);
    }

    pub fn take_timer(&mut self) -> Option<Tick> {
        self.timer.take()
    }

    pub fn take_close(&mut self) -> bool {
        std::mem::take(&mut self.close)
    }

    pub fn take_resume(&mut self) -> bool {
        std::mem::take(&mut self.resume)
    }

    /// The stream's `session=` name, when its subscription named one (HTTP/2 only).
    pub fn take_session(&mut self) -> Option<Box<str>> {
        self.session.take()
    }

    /// A `POST /subscribe` or `/unsubscribe` for the stream its `session` names: hand
    /// it to that stream's [`Connection::handle_control`](crate::Connection::handle_control).
    pub fn take_control(&mut self) -> Option<Box<StreamControl>> {
        self.control.take()
    }

    /// Answers for POSTs that waited for this stream's join: each to the oldest POST
    /// on the connection still waiting for this stream and its channel.
    pub fn take_answers(&mut self, into: &mut Vec<ControlAnswer>) {
        into.append(&mut self.answers);
    }

    /// Everything at once (tests): bytes as one vector, then the rest is dropped.
    pub fn take_all_bytes(&mut self) -> Vec<u8> {
        let mut all = Vec::new();
        for p in &self.pieces {
            all.extend_from_slice(self.slice(p));
        }
        self.clear_bytes();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_keep_order_and_adjacent_inline_spans_merge() {
        let mut out = Outbox::new(1);
        out.write(|b| b.extend_from_slice(b"id: 1\n"));
        out.write(|b| b.extend_from_slice(b"x"));
        out.send(&Bytes::from_static(b"data: a\n\n"));
        out.write(|b| b.extend_from_slice(b"id: 2\n"));
        assert_eq!(out.pieces().len(), 3);
        assert_eq!(out.len(), 7 + 9 + 6);
        assert_eq!(
            out.tail(&out.pieces()[2].clone(), 4),
            Bytes::from_static(b"2\n")
        );
        assert_eq!(out.take_all_bytes(), b"id: 1\nxdata: a\n\nid: 2\n");
        assert!(out.is_empty());
    }

    #[test]
    fn jitter_is_deterministic_per_seed() {
        let (mut a, mut b) = (Outbox::new(7), Outbox::new(7));
        let xs: Vec<u32> = (0..4).map(|_| a.random()).collect();
        let ys: Vec<u32> = (0..4).map(|_| b.random()).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().all(|&x| x != 0));
    }
}
