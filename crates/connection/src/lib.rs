//! `connection`: the connection core, one client connection's protocol state with no
//! IO (sans-IO, in the style of quinn-proto). A crate of its own so Cargo keeps
//! sockets, threads and the flag parser out of it: the gateway's pump drives it.
//!
//! A [`Connection`] is driven by inputs — [`Connection::handle_bytes`] (what the
//! socket read), [`Connection::handle_reply`] (the bus answered),
//! [`Connection::handle_delivery`] (a message for this connection),
//! [`Connection::handle_timeout`] (its timer fired), [`Connection::handle_expired`]
//! (its token's time is up) and [`Connection::handle_close`] (the socket is gone) —
//! and writes its outputs into the caller's [`Outbox`]: bytes to send, bus
//! requests, its next timer, whether to close. It knows no socket, no
//! lock and no clock: the time comes in [`Cx::now`] as wheel ticks, so tests drive it
//! with a virtual clock.
//!
//! Budget (DESIGN "the budget per connection"): an idle subscribed connection is
//! 32 bytes and owns no buffer; `pending` exists only while input waits (a partial
//! head or frame, a body, pipelined requests behind a waiting call). What only a few
//! connections have — a token's expiry, failed authentications, a Pusher client's
//! session — lives in the loop's [`Credentials`] side table, keyed by [`Cx::key`].
//!
//! Layout: [`request`] turns heads and bodies into subscriptions, polls and API
//! calls; [`reply`] turns bus replies into responses ([`replay`]: a resume's history
//! within the output budget); [`delivery`] writes messages and heartbeats;
//! [`websocket`] handles client frames; [`outbox`] is the output; [`context`] is what
//! a call reads; [`access`] decides who is let in; [`expiry`] ends a connection whose
//! token expired and [`refresh`] replaces a WebSocket's token in place;
//! [`client_publish`] is a WebSocket's publish and [`http_publish`] a client's
//! publish over HTTP, both at the rate of [`publish_rate`];
//! [`credentials`] is the side table both keep their state in; [`clock`] is time in
//! the wheel's ticks; [`stream_control`] is an HTTP/2 `POST /subscribe` or
//! `/unsubscribe` for another stream of its connection (the pump carries the
//! control and its [`ControlAnswer`] between the two cores); [`pusher`] is a
//! Pusher Channels client on `/app/<key>`, a framed WebSocket in Pusher's words
//! ([`pusher_session`]: what it keeps, in the side table);
//! [`pusher_api`] is Pusher's signed `POST /apps/<id>/events`.
//!
//! Token lifetime: a connection let in with a token that has an `exp` ends when the
//! token does ([`expiry`]: close code [`WS_TOKEN_EXPIRED`], SSE `event: expired`, …)
//! unless a WebSocket refreshes it ([`refresh`]); [`MAX_AUTH_FAILURES`] refused
//! credentials close a connection ([`access`], [`WS_AUTH_FAILURES`]).

mod access;
mod channels;
mod client_publish;
pub mod clock;
mod context;
mod credentials;
mod delivery;
mod drain;
mod expiry;
mod hosts;
mod http_publish;
mod origin;
mod outbox;
mod publish_rate;
mod pusher;
mod pusher_api;
mod pusher_session;
mod pusher_user;
mod refresh;
mod replay;
mod reply;
mod request;
mod state;
mod stream_control;
mod websocket;

#[cfg(test)]
mod access_tests;
#[cfg(test)]
mod expiry_tests;
#[cfg(test)]
mod harness;
#[cfg(test)]
mod multiplexed_tests;
#[cfg(test)]
mod pusher_tests;
#[cfg(test)]
mod pusher_user_tests;
#[cfg(test)]
mod stream_control_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod websocket_tests;

pub use access::{open_api_warning, Access, LOOPBACK_ONLY};
pub use clock::Tick;
pub use context::{Config, Cx, SlowPolicy, WsHeartbeat};
pub use credentials::{Credentials, MAX_AUTH_FAILURES};
pub use delivery::{Frames, Outcome};
pub use drain::WS_SERVICE_RESTART;
pub use expiry::WS_TOKEN_EXPIRED;
pub use hosts::Hosts;
pub use origin::Origins;
pub use outbox::{Outbox, Piece};
pub use publish_rate::PublishRates;
pub use pusher::CLIENT_EVENTS_PER_SECOND;
pub use pusher_session::Sessions as PusherSessions;
pub use refresh::WS_AUTH_FAILURES;
pub use reply::write_presence;
pub use state::State;
pub use stream_control::ControlAnswer;

use bus::{Reply, Request};
use wire::{BodyDecoder, Route, WsMessageState};

/// Pipelined input held at most behind a call or a waiting long-poll.
const MAX_HELD_INPUT: usize = 64 * 1024;

/// Flag: the connection is logged in to the router as `user`.
const LOGGED_IN: u8 = 1;
/// Flag: the current request asked to keep the connection open.
const KEEP_ALIVE: u8 = 2;
/// Flag: a WebSocket close frame has been sent.
const WS_CLOSE_SENT: u8 = 4;
/// Flag: the peer is on a loopback address (the API answers it without a key when
/// none is configured).
const PEER_LOOPBACK: u8 = 8;
/// Flag: a stream or WebSocket subscription asked to resume (`?since=`): it is told
/// its position before the replayed messages (SSE ids say it on every event).
const RESUME: u8 = 16;
/// Flag: an HTTP/1.0 stream subscriber: close-delimited, unchunked lines.
const HTTP10: u8 = 32;
/// Flag: an HTTP/2 stream. Its connection's PING is the heartbeat (it keeps the one
/// TCP connection alive and finds a dead peer), so the stream beats none of its own:
/// no SSE comment, chunk or wheel entry per stream every `--heartbeat`.
const MULTIPLEXED: u8 = 64;
/// Flag: a framed WebSocket (the request named channels or `framed=1`): every
/// message is a JSON envelope and control frames subscribe (`channels`).
const FRAMED: u8 = 128;

/// One connection's protocol state: 32 bytes (checked by a test).
pub struct Connection {
    state: State,
    flags: u8,
    ws: WsMessageState,
    /// Which tick of the heartbeat grid this connection beats on (taken modulo the
    /// grid): the same for every connection of one peer address (`beat_phase_of`).
    beat_phase: u8,
    /// The tick of the connection's one timer; the caller's wheel asks for it.
    deadline: Tick,
    user: u64,
    pending: Option<Box<Pending>>,
    /// The named channels of a connection that has any (`channels`).
    chans: Option<channels::Chans>,
}

/// Input and request state that exists only while it is needed.
#[derive(Default)]
struct Pending {
    /// Unconsumed bytes: a partial head or frame, or pipelined requests waiting
    /// their turn behind a call or a long-poll.
    input: Vec<u8>,
    /// A request whose head is parsed and whose body is being read.
    body: Option<Box<BodyRead>>,
    /// Long-poll: the sequence number the waiting request reads after (`None`:
    /// "the next message", fixed when the login reply says where the user is).
    poll_since: Option<u64>,
    /// Long-poll: the epoch `poll_since` belongs to, when known.
    poll_epoch: Option<u32>,
    /// WebSocket: the client's `Sec-WebSocket-Key`, kept until the login reply.
    ws_key: Option<String>,
    /// WebSocket whose token may publish (C7): its grant and rate bucket.
    publisher: Option<Box<client_publish::Publisher>>,
    /// A Pusher API query waiting for the router: how to write its answer.
    pusher_ask: Option<pusher_api::Ask>,
}

struct BodyRead {
    route: Route,
    /// A client publish over HTTP: its token's grant, checked once the body is read.
    client: Option<Box<http_publish::ClientGrant>>,
    decoder: BodyDecoder,
    body: Vec<u8>,
}

impl Default for Connection {
    fn default() -> Self {
        Connection::new()
    }
}

impl Connection {
    /// A connection that has just been accepted; call [`Connection::handle_open`].
    pub fn new() -> Connection {
        Connection {
            state: State::Head,
            flags: 0,
            ws: WsMessageState::default(),
            beat_phase: 0,
            deadline: 0,
            user: 0,
            pending: None,
            chans: None,
        }
    }

    /// Marks the peer as local (set once, at accept).
    pub fn set_peer_loopback(&mut self, loopback: bool) {
        self.set(PEER_LOOPBACK, loopback);
    }

    /// Sets the heartbeat phase (set once, at accept, from `gateway::wheel::beat_phase_of` of the
    /// peer's address).
    pub fn set_beat_phase(&mut self, phase: u8) {
        self.beat_phase = phase;
    }

    /// Marks the connection as an HTTP/2 stream (set once, before `handle_open`):
    /// its subscription sends no heartbeats of its own.
    pub fn set_multiplexed(&mut self) {
        self.set(MULTIPLEXED, true);
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// The tick the connection wants its timer at (the caller's wheel compares).
    pub fn deadline(&self) -> Tick {
        self.deadline
    }

    /// The caller's wheel moved the timer to `tick` (it never schedules in the past).
    pub fn reschedule(&mut self, tick: Tick) {
        self.deadline = tick;
    }

    /// True while the connection only waits for its last bytes to leave.
    pub fn is_closing(&self) -> bool {
        self.state == State::Closing
    }

    /// The connection was accepted: the head timeout starts.
    pub fn handle_open(&mut self, cx: &mut Cx) {
        self.arm(cx, cx.config.head_timeout);
    }

    /// Bytes read from the socket. Everything that cannot be used yet is held.
    pub fn handle_bytes(&mut self, cx: &mut Cx, input: &[u8]) {
        let held = self
            .pending
            .as_mut()
            .map(|p| std::mem::take(&mut p.input))
            .unwrap_or_default();
        if held.is_empty() {
            let used = self.consume(cx, input);
            self.hold(cx, &input[used..]);
        } else {
            let mut input_all = held;
            input_all.extend_from_slice(input);
            let used = self.consume(cx, &input_all);
            self.hold(cx, &input_all[used..]);
        }
    }

    /// The bus answered this connection's request.
    pub fn handle_reply(&mut self, cx: &mut Cx, reply: Reply) {
        reply::handle(self, cx, reply);
    }

    /// A message for this connection: `seq` is its user's sequence number for it,
    /// in the user's history `epoch` (SPEC B6).
    pub fn handle_delivery(
        &mut self,
        cx: &mut Cx,
        epoch: u32,
        seq: u64,
        frames: &mut Frames,
    ) -> Outcome {
        delivery::handle(self, cx, epoch, seq, frames)
    }

    /// The connection's timer fired (the caller checked it is due).
    pub fn handle_timeout(&mut self, cx: &mut Cx) {
        match self.state {
            State::Head | State::Body => self.fail(cx, 408, "request timeout"),
            State::Idle | State::Closing => cx.out.close_now(),
            // It may have published or changed edges: a 504 the client should not
            // repeat blindly, not a 503 with Retry-After.
            State::Calling(call) if call.acts() => self.fail(
                cx,
                504,
                "timed out: the router did not answer in time; the call may or may not \
                 have been done",
            ),
            State::Calling(_)
            | State::Controlling
            | State::SubscribingStream
            | State::SubscribingSse
            | State::SubscribingWebSocket
            | State::Polling => self.fail(cx, 503, "the router did not answer in time"),
            State::PollWaiting if self.chans.is_some() => channels::answer_poll_timeout(self, cx),
            State::PollWaiting => reply::answer_poll_timeout(self, cx),
            State::Stream | State::Sse | State::WebSocket => delivery::heartbeat(self, cx),
        }
    }

    /// The connection's token has expired (the caller's [`Credentials`] said so):
    /// the connection ends in its transport's words (see `expiry`).
    pub fn handle_expired(&mut self, cx: &mut Cx) {
        expiry::handle(self, cx);
    }

    /// The server drains: tell the client to reconnect elsewhere and close (see
    /// `drain`). Returns false when the connection is already on its way out.
    pub fn handle_drain(&mut self, cx: &mut Cx) -> bool {
        if self.state == State::Closing {
            return false;
        }
        drain::handle(self, cx);
        true
    }

    /// Deliveries for this connection were lost on their way to this process: a
    /// stream, SSE or WebSocket subscription is told to reconnect as in a drain, so
    /// that its client resumes from history (SPEC B6) or is told of a gap there,
    /// and takes no later delivery first. A waiting long-poll is answered at once
    /// with nothing, keeping its place: its client polls again from there and reads
    /// the lost messages from history (rather than waiting for the next delivery
    /// and being told of a gap it need not have).
    pub fn handle_lost(&mut self, cx: &mut Cx) {
        match self.state {
            State::Stream | State::Sse | State::WebSocket => drain::handle(self, cx),
            State::PollWaiting if self.chans.is_some() => channels::answer_poll_timeout(self, cx),
            State::PollWaiting => reply::answer_poll_timeout(self, cx),
            _ => {}
        }
    }

    /// The socket is gone (peer EOF, error, or the caller closed it): logs out.
    pub fn handle_close(&mut self, cx: &mut Cx) {
        channels::leave_all(self, cx);
        self.logout(cx);
        self.state = State::Closing;
        self.pending = None;
    }

    // ---- shared by the submodules ----

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    fn set(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }

    /// Sets the connection's one timer `after` ticks from now.
    fn arm(&mut self, cx: &mut Cx, after: Tick) {
        self.deadline = cx.now.wrapping_add(after.max(1));
        cx.out.set_timer(self.deadline);
    }

    /// A heartbeat timer, jittered ±10 % so connections opened together do not beat in
    /// the same instant, then put on the heartbeat grid so those that do beat in one
    /// instant share the wake-ups (`--heartbeat-grid`), at the tick of the grid that
    /// the peer's address falls on: one client host's connections beat together (it
    /// wakes once per grid for all of them), different hosts' beats are spread over
    /// the grid's ticks instead of all landing in one burst.
    fn arm_heartbeat(&mut self, cx: &mut Cx) {
        if self.has(MULTIPLEXED) {
            return; // no timer at all: the connection's PING beats for every stream
        }
        let base = cx.config.heartbeat.max(1);
        let spread = (base / 5).max(1);
        let jitter = cx.out.random() % (spread + 1);
        let due = crate::clock::on_grid_phase(
            cx.now.wrapping_add(base - base / 10 + jitter),
            cx.config.heartbeat_grid,
            Tick::from(self.beat_phase),
        );
        self.arm(cx, due.wrapping_sub(cx.now));
    }

    fn pending(&mut self) -> &mut Pending {
        self.pending.get_or_insert_with(Default::default)
    }

    /// Drops the pending box once nothing is left in it (idle connections hold none).
    fn tidy(&mut self) {
        if let Some(p) = &self.pending {
            let polling = matches!(self.state, State::Polling | State::PollWaiting);
            let needed = !p.input.is_empty()
                || p.body.is_some()
                || p.ws_key.is_some()
                || p.publisher.is_some()
                || p.pusher_ask.is_some()
                || (polling && p.poll_since.is_some());
            if !needed {
                self.pending = None;
            }
        }
    }

    /// Logs in as `user` (logging out of another user first) and asks the bus,
    /// which answers with the user's history after `since`.
    fn login(&mut self, cx: &mut Cx, user: u64, since: Option<wire::Since>) {
        if self.has(LOGGED_IN) && self.user != user {
            self.logout(cx);
        }
        self.user = user;
        self.set(LOGGED_IN, true);
        cx.out.request(Request::Login {
            user,
            since: since.map(|s| s.seq),
            epoch: since.and_then(|s| s.epoch),
        });
    }

    fn logout(&mut self, cx: &mut Cx) {
        if self.has(LOGGED_IN) {
            self.set(LOGGED_IN, false);
            cx.out.request(Request::Logout { user: self.user });
        }
    }

    /// Sends a bus request and waits for its reply in `state`, holding input.
    fn call(&mut self, cx: &mut Cx, request: Request, state: State) {
        cx.out.request(request);
        self.state = state;
        // A bus that never answers must not hold the connection forever.
        self.arm(cx, cx.config.head_timeout);
    }

    /// Consumes as much of `buf` as the state allows; returns the bytes used.
    fn consume(&mut self, cx: &mut Cx, buf: &[u8]) -> usize {
        let mut pos = 0;
        loop {
            let rest = &buf[pos..];
            if rest.is_empty() {
                return pos;
            }
            let used = match self.state {
                State::Head | State::Idle => request::handle_head_bytes(self, cx, rest),
                State::Body => request::handle_body_bytes(self, cx, rest),
                State::WebSocket => websocket::handle_frame_bytes(self, cx, rest),
                // Subscribers have nothing more to say; closing sockets are drained.
                State::Stream | State::Sse | State::Closing => return buf.len(),
                // Pipelined input waits until the call or the poll is answered.
                s if s.is_waiting() => return pos,
                _ => unreachable!("every state is listed above"),
            };
            match used {
                // Not enough bytes for the next step.
                Consumed::Wait => return pos,
                Consumed::Bytes(n) => pos += n,
                // A failure: whatever remains is dropped.
                Consumed::All => return buf.len(),
            }
        }
    }

    /// Keeps what `consume` could not use, bounded while a call or poll waits.
    fn hold(&mut self, cx: &mut Cx, rest: &[u8]) {
        if !rest.is_empty() && self.state != State::Closing {
            let waiting = self.state.is_waiting();
            let input = &mut self.pending().input;
            input.extend_from_slice(rest);
            if waiting && input.len() > MAX_HELD_INPUT {
                self.fail(cx, 431, "too much pipelined input behind a waiting request");
                return;
            }
        }
        self.tidy();
    }

    /// Answers with a complete response written by `encode`; then waits for the next
    /// request (keep-alive) or closes once the bytes are out.
    fn respond(&mut self, cx: &mut Cx, keep_alive: bool, encode: impl FnOnce(&mut Vec<u8>)) {
        // Tell the client the real idle timeout (RFC 9112 9.3's `Keep-Alive`), so it
        // does not send on a connection we are about to close.
        let timeout = u64::from(cx.config.keepalive_timeout) * crate::clock::TICK_MS / 1000;
        cx.out.write(|out| {
            let start = out.len();
            encode(out);
            if keep_alive {
                wire::add_header(
                    out,
                    start,
                    "Keep-Alive",
                    &format!("timeout={}", timeout.max(1)),
                );
            }
        });
        if keep_alive {
            self.state = State::Idle;
            self.arm(cx, cx.config.keepalive_timeout);
            if self.pending.as_ref().is_some_and(|p| !p.input.is_empty()) {
                cx.out.resume_input();
            }
        } else {
            self.start_closing(cx);
        }
    }

    /// A clean error: a short text response, then close (the request framing may be
    /// lost). 503 carries `Retry-After`.
    fn fail(&mut self, cx: &mut Cx, status: u16, message: &str) {
        let retry: &[(&str, &str)] = if status == 503 {
            &[("Retry-After", "1")]
        } else {
            &[]
        };
        self.set(KEEP_ALIVE, false);
        self.respond(cx, false, |out| {
            wire::write_error_response(out, status, message, false, retry)
        });
    }

    /// Closes after the queued output is written: the caller half-closes (FIN) once
    /// it is out, then waits for the peer's EOF, so our last bytes are not lost to a
    /// reset. The connection is nobody's from here (its channels left, its user
    /// logged out): a lingering socket that gets no more deliveries is not counted
    /// in a publish's reach or a presence list.
    fn start_closing(&mut self, cx: &mut Cx) {
        channels::leave_all(self, cx);
        self.logout(cx);
        self.state = State::Closing;
        self.pending = None;
        self.arm(cx, cx.config.linger);
    }
}

/// How much input a step used.
enum Consumed {
    /// Nothing yet: more bytes are needed.
    Wait,
    Bytes(usize),
    /// The connection failed; drop the rest of the input.
    All,
}
