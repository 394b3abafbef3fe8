//! HTTP/2 connections (ALPN `h2` on the TLS listener): frames in, frames out, each
//! request stream served by a connection core of its own.
//!
//! The mapping onto the pump: every request stream becomes a *virtual connection* — a
//! slab slot with no socket (`Slot::stream` is `None`) whose core reads the request
//! as an HTTP/1.1 head (`wire::h2::write_request_head`) — so presence, deliveries,
//! sequence numbers, resume, heartbeats and timeouts work unchanged per stream. What
//! the stream's core writes is read back as an HTTP/1.1 response and framed as
//! HEADERS and DATA on its connection (`h2_stream`). The connection's own slot keeps
//! the socket and the TLS session; its core only holds the timer, which this module
//! uses for PING heartbeats.
//!
//! Budget: an HTTP/1.1 connection pays nothing for this (the tables below are only
//! made on a TLS listener and are indexed by slab index, like `Conns`'s generations);
//! an HTTP/2 connection adds a boxed [`H2Conn`] (~250 B with its HPACK decoder,
//! which holds a dynamic table only until the client obeys our
//! `SETTINGS_HEADER_TABLE_SIZE = 0`); a stream adds a slot
//! (40 B), its core's state and an [`H2Stream`] entry (~100 B).
//!
//! What a peer can make a connection cost is bounded (issue 39): a header block at
//! most [`MAX_BLOCK`] compressed and [`MAX_FIELDS`] / [`MAX_DECODED`] decoded (past
//! either the stream is answered 431, the block still decoded to keep the table in
//! step; decoding costs the same per byte whatever the block holds); frames that carry
//! no request and streams that end unanswered (rapid reset) within `budget`'s buckets,
//! then GOAWAY ENHANCE_YOUR_CALM; request bodies reach their core as they arrive, after
//! the core judged the head (key, token, route, stated size), with the stream's credit
//! returned only then, and the bodies of a connection's incomplete requests together
//! at most `max(--max-batch, --max-message)`; a connection without streams closes
//! after `--keepalive-timeout` (GOAWAY NO_ERROR), one that does not answer a PING
//! within a heartbeat is closed.
//!
//! Layout: this file holds the per-loop tables, a connection's state with its stream
//! entries ([`H2Stream`]), and what the loop does for a connection (start, input,
//! PING and keep-alive timer, writes); `conn` what the peer's frames do to one
//! connection's state; `budget` the leaky buckets; `script` the sans-IO driver the
//! fuzz target `h2_conn` runs; `h2_stream` (beside this module) what the loop does
//! for a stream; `h2_control` (beside it too) carries `POST /subscribe` and
//! `/unsubscribe` to the stream whose `session=` they name.
//!
//! Not done: server push, RFC 8441 WebSocket over HTTP/2 (WebSocket stays on
//! HTTP/1.1: ALPN offers both), trailers on requests, PRIORITY (ignored).

mod budget;
mod conn;
pub(super) mod script;

use super::h2_control::{Relay, Role};
use super::EventLoop;
use budget::Bucket;
use conn::Limits;
use connection::Tick;
use wire::h2::hpack::Decoder;
use wire::h2::{self as frames, code, setting, Framing, ResponseReader};

/// No stream or connection at this slab index.
pub(super) const NONE: u32 = u32::MAX;
/// A request's header block (HEADERS + CONTINUATION) at most, compressed: the peer
/// cannot make a connection hold more while a block is incomplete.
const MAX_BLOCK: usize = 16 * 1024;
/// A request's decoded headers at most (what the core's head limit allows anyway),
/// in SETTINGS_MAX_HEADER_LIST_SIZE's measure; more is answered 431.
const MAX_DECODED: usize = 32 * 1024;
/// A request's header fields at most (a browser sends about 20); more is answered 431.
const MAX_FIELDS: usize = 100;

/// One loop's HTTP/2 state: per-connection boxes and the stream → connection map.
pub(super) struct H2Layer {
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` (`--max-streams-per-connection`).
    pub(super) max_streams: u32,
    /// HTTP/2 connections by slab index.
    pub(super) conns: Vec<Option<Box<H2Conn>>>,
    /// For a stream's virtual slot: its connection's slab index ([`NONE`] otherwise).
    pub(super) parent: Vec<u32>,
    /// Frames to write, reused per call.
    pub(super) out: Vec<u8>,
    /// A stream's core output, gathered, reused per call.
    pub(super) gathered: Vec<u8>,
    /// A response body's bytes before flow control, reused per call.
    pub(super) body: Vec<u8>,
    /// What streams left for other streams of their connection (`h2_control`).
    pub(super) relays: Vec<(u32, Relay)>,
}

/// One HTTP/2 connection's state (boxed: HTTP/1.1 connections pay nothing).
pub(super) struct H2Conn {
    /// An incomplete frame (or preface) carried to the next read; empty otherwise.
    input: Vec<u8>,
    preface_done: bool,
    decoder: Decoder,
    /// A header block waiting for its CONTINUATION frames: stream, END_STREAM, bytes.
    block: Option<Box<(u32, bool, Vec<u8>)>>,
    /// The highest client stream id seen.
    pub(super) last_stream: u32,
    /// Our connection-level send window (the peer's receive window).
    pub(super) window: i64,
    /// Our connection-level receive window (what the peer may still send).
    recv_window: i64,
    /// The peer's SETTINGS_INITIAL_WINDOW_SIZE and SETTINGS_MAX_FRAME_SIZE.
    pub(super) initial_window: u32,
    pub(super) max_frame: u32,
    pub(super) streams: Vec<H2Stream>,
    /// A PING of ours waits for its ACK.
    ping_out: bool,
    /// We sent GOAWAY after an error: input is ignored, the timer closes.
    pub(super) gone: bool,
    /// The peer sent GOAWAY (NO_ERROR): no new streams; closed when the last ends.
    pub(super) peer_goaway: bool,
    /// The peer is on loopback (the API's rule for keyless calls, given to streams).
    pub(super) loopback: bool,
    /// Frames that carry no request (`budget`).
    idle_frames: Bucket,
    /// Streams that ended unanswered (`budget`).
    unanswered: Bucket,
    /// When our next PING is due.
    next_ping: Tick,
    /// Since when the connection has had no stream (it closes after the keep-alive
    /// timeout, like an idle HTTP/1.1 connection); `None` while it has one.
    idle_since: Option<Tick>,
    /// Streams answered 401: at `connection::MAX_AUTH_FAILURES` the connection goes.
    auth_failures: u8,
}

impl H2Conn {
    /// A stream was answered 401: true once the connection has had too many.
    pub(super) fn auth_failed(&mut self) -> bool {
        self.auth_failures = self.auth_failures.saturating_add(1);
        self.auth_failures >= connection::MAX_AUTH_FAILURES
    }
}

/// One open stream of an HTTP/2 connection: an entry of its [`H2Conn::streams`]
/// (frame handling in `conn` opens and ends it; `h2_stream` writes its response).
pub(super) struct H2Stream {
    pub(super) id: u32,
    /// The stream's virtual slot ([`NONE`] until its request is complete).
    pub(super) slot: u32,
    /// Our send window for this stream.
    pub(super) window: i64,
    pub(super) reader: ResponseReader,
    /// The response is complete; END_STREAM goes after the queued data.
    pub(super) end_queued: bool,
    /// The client ended its side (END_STREAM): further DATA or HEADERS are errors.
    pub(super) remote_closed: bool,
    /// The request's HTTP/1.1 head until its core takes it.
    pub(super) head: Vec<u8>,
    /// How the body follows the head; `Length` counts down what is still to come.
    pub(super) framing: Framing,
    /// Our receive window for this stream (what the peer may still send on it).
    pub(super) recv_window: i64,
    /// Body bytes received so far (they count against the connection's bound on
    /// incomplete requests until the request is complete).
    pub(super) received: usize,
    /// Body bytes read this round, not yet handed to the core, and their flow-control
    /// length (padding included), credited back when the core has them.
    pub(super) staged: Vec<u8>,
    pub(super) staged_flow: u32,
    /// The end of the body went to the core.
    pub(super) end_fed: bool,
    /// Its `session=` name, or the stream a POST of it waits for (`h2_control`);
    /// boxed, on the few streams that have either.
    pub(super) control: Option<Box<Role>>,
}

impl H2Stream {
    pub(super) fn new(id: u32, head: Vec<u8>, framing: Framing, window: u32) -> H2Stream {
        H2Stream {
            id,
            slot: NONE,
            window: i64::from(window),
            reader: ResponseReader::default(),
            end_queued: false,
            remote_closed: false,
            head,
            framing,
            recv_window: i64::from(frames::DEFAULT_WINDOW),
            received: 0,
            staged: Vec::new(),
            staged_flow: 0,
            end_fed: framing == Framing::None,
            control: None,
        }
    }
}

/// What frame handling asks the loop to do once the connection's box is back in its
/// table (the work creates and closes slots, which needs the table).
pub(super) enum Action {
    /// A stream's header block is complete: give it a core and the request's head.
    Request(u32),
    /// A stream has staged body bytes or its request ended: hand them to its core.
    Body(u32),
    /// The peer reset a stream: close its virtual connection.
    Reset(u32),
    /// Windows opened: move queued data.
    Pump,
    /// The peer said GOAWAY with an error: close.
    Close,
    /// The peer said GOAWAY (NO_ERROR): close once no stream is left.
    Finish,
}

impl H2Layer {
    pub(super) fn new(max_streams: u32) -> H2Layer {
        H2Layer {
            max_streams,
            conns: Vec::new(),
            parent: Vec::new(),
            out: Vec::new(),
            gathered: Vec::new(),
            body: Vec::new(),
            relays: Vec::new(),
        }
    }

    /// The connection a stream's virtual slot belongs to.
    pub(super) fn parent_of(&self, index: usize) -> Option<usize> {
        self.parent
            .get(index)
            .filter(|&&p| p != NONE)
            .map(|&p| p as usize)
    }

    pub(super) fn is_conn(&self, index: usize) -> bool {
        self.conns.get(index).is_some_and(|c| c.is_some())
    }

    /// Gives back table capacity after a mass disconnect.
    pub(super) fn shrink(&mut self) {
        while self.conns.last().is_some_and(|c| c.is_none()) {
            self.conns.pop();
        }
        while self.parent.last() == Some(&NONE) {
            self.parent.pop();
        }
        self.conns.shrink_to_fit();
        self.parent.shrink_to_fit();
        self.out = Vec::new();
        self.gathered = Vec::new();
        self.body = Vec::new();
        self.relays = Vec::new();
    }
}

impl EventLoop {
    /// Connection `index` agreed on `h2`: its state, our SETTINGS, and the PING
    /// heartbeat in place of the head timeout.
    pub(super) fn h2_start(&mut self, index: usize) {
        let Some(h2) = self.h2.as_mut() else {
            return;
        };
        let loopback = self.conns[index]
            .stream
            .as_ref()
            .and_then(|s| s.peer_addr().ok())
            .is_some_and(|a| a.ip().to_canonical().is_loopback());
        if h2.conns.len() <= index {
            h2.conns.resize_with(index + 1, || None);
        }
        h2.conns[index] = Some(Box::new(H2Conn::new(loopback, self.timers.now())));
        let mut out = std::mem::take(&mut h2.out);
        out.clear();
        frames::write_settings(
            &mut out,
            &[
                (setting::HEADER_TABLE_SIZE, 0),
                (setting::ENABLE_PUSH, 0),
                (setting::MAX_CONCURRENT_STREAMS, h2.max_streams),
                (setting::INITIAL_WINDOW_SIZE, frames::DEFAULT_WINDOW),
            ],
        );
        self.h2_write(index, &out, false);
        if let Some(h2) = self.h2.as_mut() {
            h2.out = out;
        }
        let next_ping = self.timers.now().wrapping_add(self.config.heartbeat);
        if let Some(conn) = self.h2_conn(index) {
            conn.next_ping = next_ping;
        }
        self.h2_rearm(index);
    }

    fn h2_conn(&mut self, index: usize) -> Option<&mut H2Conn> {
        self.h2.as_mut()?.conns.get_mut(index)?.as_deref_mut()
    }

    /// Arms connection `index`'s timer for its next PING or, with no stream, the end
    /// of its keep-alive, whichever comes first.
    fn h2_rearm(&mut self, index: usize) {
        let (now, keepalive) = (self.timers.now(), self.config.keepalive_timeout);
        let Some(conn) = self.h2_conn(index) else {
            return;
        };
        let mut at = conn.next_ping;
        if let Some(since) = conn.idle_since {
            let idle_end = since.wrapping_add(keepalive);
            if idle_end.wrapping_sub(now) < at.wrapping_sub(now) {
                at = idle_end;
            }
        }
        self.h2_arm(index, at.wrapping_sub(now));
    }

    /// Sets connection `index`'s one timer `after` ticks from now.
    fn h2_arm(&mut self, index: usize, after: u32) {
        let token = self.conns.token(index);
        let at = self
            .timers
            .schedule(token, self.timers.now().wrapping_add(after.max(1)));
        if let Some(slot) = self.conns.get_mut(index) {
            slot.conn.reschedule(at);
        }
    }

    /// Plaintext read on HTTP/2 connection `index`.
    pub(super) fn h2_input(&mut self, index: usize, input: &[u8]) {
        let Some(h2) = self.h2.as_mut() else {
            return;
        };
        let Some(mut conn) = h2.conns.get_mut(index).and_then(|c| c.take()) else {
            return;
        };
        if conn.gone {
            h2.conns[index] = Some(conn);
            return;
        }
        let mut out = std::mem::take(&mut h2.out);
        out.clear();
        let mut actions = Vec::new();
        let limits = Limits {
            max_streams: h2.max_streams,
            receiving: self.config.max_batch.max(self.config.max_message),
            now: self.timers.now(),
        };
        if let Err(e) = conn.handle_bytes(input, &limits, &mut out, &mut actions) {
            tracing::debug!(error = %e, "http/2 connection error");
            frames::write_goaway(&mut out, conn.last_stream, e.code);
            conn.gone = true;
        }
        let gone = conn.gone;
        h2.conns[index] = Some(conn);
        if !out.is_empty() && !self.h2_write(index, &out, false) {
            return;
        }
        if let Some(h2) = self.h2.as_mut() {
            h2.out = out;
        }
        if gone {
            return self.h2_goaway_sent(index);
        }
        for action in actions {
            if self.live_slot(index).is_none() {
                return;
            }
            match action {
                Action::Request(id) => self.h2_request(index, id),
                Action::Body(id) => self.h2_body(index, id),
                Action::Reset(id) => self.h2_reset(index, id),
                Action::Pump => self.h2_pump(index),
                Action::Close => return self.close(index),
                Action::Finish => self.h2_finish_if_idle(index),
            }
        }
    }

    /// The slot at `index` if it is open.
    fn live_slot(&self, index: usize) -> Option<()> {
        self.conns.contains(index).then_some(())
    }

    /// GOAWAY with `code` on connection `index`, then its close (streams first).
    pub(super) fn h2_goaway(&mut self, index: usize, code: u32) {
        let Some(conn) = self.h2_conn(index) else {
            return;
        };
        if conn.gone {
            return;
        }
        conn.gone = true;
        let mut out = Vec::with_capacity(17);
        frames::write_goaway(&mut out, conn.last_stream, code);
        if self.h2_write(index, &out, false) {
            self.h2_goaway_sent(index);
        }
    }

    /// After our GOAWAY: the streams are closed now, the socket after our last bytes
    /// (FIN at once, the close at the linger timeout), so the client reads the code.
    fn h2_goaway_sent(&mut self, index: usize) {
        self.h2_close_streams(index);
        if let Some(slot) = self.conns.get(index) {
            if slot.out.is_none() {
                if let Some(stream) = slot.stream.as_ref() {
                    let _ = stream.shutdown(std::net::Shutdown::Write);
                }
            }
        }
        self.h2_arm(index, self.config.linger);
    }

    /// A stream of connection `index` ended. With none left the keep-alive clock
    /// starts; after the peer's GOAWAY (NO_ERROR), our GOAWAY (NO_ERROR) and the close.
    pub(super) fn h2_finish_if_idle(&mut self, index: usize) {
        let now = self.timers.now();
        let Some(conn) = self.h2_conn(index) else {
            return;
        };
        if !conn.streams.is_empty() || conn.gone {
            return;
        }
        if conn.peer_goaway {
            return self.h2_goaway(index, code::NO_ERROR);
        }
        if conn.idle_since.is_none() {
            conn.idle_since = Some(now);
            self.h2_rearm(index);
        }
    }

    /// The timer of HTTP/2 connection `index`: the PING heartbeat (a connection that
    /// did not answer the last one within a heartbeat is closed), the keep-alive of a
    /// connection without streams (GOAWAY NO_ERROR), or the end of the linger after
    /// GOAWAY.
    pub(super) fn h2_timeout(&mut self, index: usize) {
        let (now, keepalive, heartbeat) = (
            self.timers.now(),
            self.config.keepalive_timeout,
            self.config.heartbeat,
        );
        let Some(conn) = self.h2_conn(index) else {
            return;
        };
        if conn.gone {
            return self.close(index);
        }
        let idle_over = conn.streams.is_empty()
            && conn
                .idle_since
                .is_some_and(|since| now.wrapping_sub(since) >= keepalive);
        if idle_over {
            return self.h2_goaway(index, code::NO_ERROR);
        }
        if connection::clock::reached(conn.next_ping, now) {
            if conn.ping_out {
                return self.close(index);
            }
            conn.ping_out = true;
            conn.next_ping = now.wrapping_add(heartbeat);
            let mut ping = Vec::with_capacity(17);
            frames::write_ping(&mut ping, false, *b"myriadhb");
            if !self.h2_write(index, &ping, false) {
                return;
            }
        }
        self.h2_rearm(index);
    }

    /// Seals `bytes` for HTTP/2 connection `index` and writes or queues them. False
    /// if the connection was closed.
    pub(super) fn h2_write(&mut self, index: usize, bytes: &[u8], coalesce: bool) -> bool {
        self.tls_send_bytes(index, &[bytes], coalesce)
    }
}
