//! One event loop: a thread that owns a listener (SO_REUSEPORT), a slab of connections,
//! a timing wheel and a scratch read buffer, and pumps bytes between sockets and the
//! sans-IO codec in `wire`. Requests are handled in `request`, deliveries in `delivery`.
//!
//! Readiness is edge-triggered (mio): reads go on until the socket is drained. Every
//! socket is registered once for READABLE | WRITABLE and never re-registered: with edge
//! triggering a writable edge comes only after a write hit a full buffer, so the
//! interest costs nothing while idle and saves two epoll_ctl calls per slow write
//! (measured: epoll_ctl was the top user of kernel time in the broadcast bench).

use crate::conn::{Conn, PendingRequest, State, KEEP_ALIVE, LOGGED_IN};
use crate::output::{write_now, Part};
use crate::shared::{self, Command, Shared};
use crate::wheel::{self, Wheel, TICK_MS};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use observe::metrics::LoopMetrics;
use router::ConnRef;
use slab::Slab;
use std::io::{self, Read};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const LISTENER: Token = Token(usize::MAX - 1);
pub const WAKER: Token = Token(usize::MAX - 2);

/// Per-loop scratch read buffer: every connection reads here first, so an idle
/// connection owns no read buffer.
const SCRATCH: usize = 64 * 1024;
/// The loop's lag probe fires this often (SPEC F1: a 10 ms tick, measured).
const LAG_TICK: Duration = Duration::from_millis(10);
/// Pipelined input held behind a waiting long-poll, at most.
const MAX_HELD_INPUT: usize = 64 * 1024;
/// How long a closing connection may take to read our last bytes.
const LINGER: Duration = Duration::from_secs(2);

pub struct EventLoop {
    pub(crate) id: u16,
    pub(crate) poll: Poll,
    listener: TcpListener,
    pub(crate) conns: Slab<Conn>,
    /// Generation per slab slot, bumped on close (1 byte per slot ever used).
    gens: Vec<u8>,
    pub(crate) wheel: Wheel,
    pub(crate) shared: Arc<Shared>,
    pub(crate) metrics: Arc<LoopMetrics>,
    scratch: Vec<u8>,
    epoch: Instant,
    due: Vec<u32>,
    inbox: Vec<Command>,
    /// Connection count at the last memory give-back, to notice a mass disconnect.
    peak: usize,
    /// Output bytes queued on this loop's sockets (mirrored into metrics each tick).
    pub(crate) queued: usize,
    /// Accepting paused by EMFILE/ENFILE; retried on every tick.
    accept_paused: bool,
    /// Connections that got queued output during a coalesced delivery pass.
    pub(crate) dirty: Vec<usize>,
    /// Inside `drain_inbox` (guards against re-entry).
    draining: bool,
    /// A shutdown command arrived: close everything and end the loop.
    stopping: bool,
    /// A publish of this round queued deliveries for this loop without waking it.
    pub(crate) own_deliveries: bool,
    /// Accepted sockets arrive with TCP_NODELAY already set (inherited from the listener).
    nodelay_inherited: bool,
}

impl EventLoop {
    pub fn new(
        id: u16,
        poll: Poll,
        mut listener: TcpListener,
        shared: Arc<Shared>,
    ) -> io::Result<EventLoop> {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let metrics = shared.metrics.loops[id as usize].clone();
        Ok(EventLoop {
            id,
            poll,
            listener,
            conns: Slab::new(),
            gens: Vec::new(),
            wheel: Wheel::new(0),
            shared,
            metrics,
            scratch: vec![0; SCRATCH],
            epoch: Instant::now(),
            due: Vec::new(),
            inbox: Vec::new(),
            peak: 0,
            queued: 0,
            accept_paused: false,
            dirty: Vec::new(),
            draining: false,
            stopping: false,
            own_deliveries: false,
            nodelay_inherited: false,
        })
    }

    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let mut next_tick = Instant::now() + LAG_TICK;
        let mut next_second = Instant::now() + Duration::from_secs(1);
        loop {
            let timeout = next_tick.saturating_duration_since(Instant::now());
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept_all(),
                    WAKER => self.drain_inbox(),
                    Token(index) => {
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            self.on_readable(index);
                        }
                        if event.is_writable() {
                            self.on_writable(index);
                        }
                    }
                }
            }
            if std::mem::take(&mut self.own_deliveries) {
                self.drain_inbox();
            }
            if self.stopping {
                return Ok(());
            }
            let now = Instant::now();
            if now >= next_tick {
                self.metrics.record_lag(now - next_tick);
                next_tick = now + LAG_TICK;
                self.run_timers(now);
                if self.accept_paused {
                    self.accept_paused = false;
                    self.accept_all();
                }
                self.metrics
                    .queued_bytes
                    .store(self.queued as u64, Ordering::Relaxed);
            }
            if now >= next_second {
                next_second = now + Duration::from_secs(1);
                self.housekeeping(now);
            }
        }
    }

    pub(crate) fn tick_of(&self, at: Instant) -> u32 {
        (at.saturating_duration_since(self.epoch).as_millis() as u64 / TICK_MS) as u32
    }

    /// Sets the connection's one timer `after` from now.
    pub(crate) fn set_timer(&mut self, index: usize, after: Duration) {
        let tick = self.tick_of(Instant::now() + after);
        if let Some(conn) = self.conns.get_mut(index) {
            conn.deadline = self.wheel.schedule(shared::token(index, conn.gen), tick);
        }
    }

    /// A heartbeat timer, jittered ±10 % so connections opened together do not beat together.
    pub(crate) fn set_heartbeat(&mut self, index: usize) {
        let base = self.shared.config.heartbeat.as_secs_f64();
        let jitter = 0.9 + rand::random::<f64>() * 0.2;
        self.set_timer(index, Duration::from_secs_f64(base * jitter));
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, addr)) => self.on_accept(stream, addr),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE / ENFILE: out of descriptors. Leave the rest in the backlog
                    // and retry on the next tick (edge-triggered: no new event would come).
                    tracing::warn!(loop_id = self.id, error = %e, "accept failed; pausing accepts for a tick");
                    self.accept_paused = true;
                    return;
                }
            }
        }
    }

    fn on_accept(&mut self, mut stream: TcpStream, addr: std::net::SocketAddr) {
        let ip_key = shared::ip_key(addr.ip());
        if !self.shared.admit() {
            reject(&mut stream, 503, "too many connections");
            return;
        }
        if !self.shared.admit_ip(ip_key) {
            self.shared.release();
            reject(&mut stream, 503, "too many connections from this address");
            return;
        }
        // The listener has TCP_NODELAY and Linux copies it to accepted sockets; the
        // first accept checks that once, so the storm path saves a setsockopt each.
        if self.shared.config.tcp_nodelay && !self.nodelay_inherited {
            if stream.nodelay().unwrap_or(false) {
                self.nodelay_inherited = true;
            } else {
                let _ = stream.set_nodelay(true);
            }
        }
        let entry = self.conns.vacant_entry();
        let index = entry.key();
        if index >= shared::MAX_SLOTS_PER_LOOP {
            self.shared.release();
            self.shared.release_ip(ip_key);
            reject(&mut stream, 503, "too many connections in this loop");
            return;
        }
        if self.gens.len() <= index {
            self.gens.resize(index + 1, 0);
        }
        let conn = entry.insert(Conn::new(stream, self.gens[index], ip_key));
        if let Err(e) = self.poll.registry().register(
            &mut conn.stream,
            Token(index),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            tracing::warn!(error = %e, "register failed");
            let conn = self.conns.remove(index);
            drop(conn);
            self.shared.release();
            self.shared.release_ip(ip_key);
            return;
        }
        self.metrics.connects.fetch_add(1, Ordering::Relaxed);
        self.metrics.connections.fetch_add(1, Ordering::Relaxed);
        self.set_timer(index, self.shared.config.head_timeout);
    }

    fn on_readable(&mut self, index: usize) {
        let mut scratch = std::mem::take(&mut self.scratch);
        while let Some(conn) = self.conns.get_mut(index) {
            match conn.stream.read(&mut scratch) {
                Ok(0) => {
                    self.close(index);
                    break;
                }
                Ok(n) => {
                    self.feed(index, &scratch[..n]);
                    // A short read drained the socket; new data brings a new edge.
                    if n < scratch.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.close(index);
                    break;
                }
            }
        }
        self.scratch = scratch;
    }

    /// Hands newly read bytes to the request / frame handlers, keeping what they cannot
    /// use yet in the connection's pending box.
    fn feed(&mut self, index: usize, data: &[u8]) {
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        let held = conn
            .pending
            .as_mut()
            .map(|p| std::mem::take(&mut p.input))
            .unwrap_or_default();
        if held.is_empty() {
            let used = self.consume(index, data);
            self.hold(index, &data[used..]);
        } else {
            let mut input = held;
            input.extend_from_slice(data);
            let used = self.consume(index, &input);
            self.hold(index, &input[used..]);
        }
    }

    /// Re-runs input held while a long-poll waited (pipelined requests).
    pub(crate) fn resume_input(&mut self, index: usize) {
        self.feed(index, &[]);
    }

    fn hold(&mut self, index: usize, rest: &[u8]) {
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        if !rest.is_empty() {
            let pending = conn.pending.get_or_insert_with(Default::default);
            pending.input.extend_from_slice(rest);
            if conn.state == State::PollWaiting && pending.input.len() > MAX_HELD_INPUT {
                self.fail(index, 431, "too much pipelined input behind a long-poll");
                return;
            }
        }
        if let Some(conn) = self.conns.get_mut(index) {
            conn.tidy_pending();
        }
    }

    /// Consumes as much of `buf` as the connection's state allows; returns bytes used.
    fn consume(&mut self, index: usize, buf: &[u8]) -> usize {
        let mut pos = 0;
        let limits = self.limits();
        loop {
            let Some(conn) = self.conns.get_mut(index) else {
                return buf.len();
            };
            let rest = &buf[pos..];
            match conn.state {
                State::Head | State::Idle => {
                    if rest.is_empty() {
                        return pos;
                    }
                    match wire::parse_head(rest, &limits) {
                        Ok(None) => {
                            if conn.state == State::Idle {
                                // The first bytes of the next request: the head clock starts.
                                conn.state = State::Head;
                                self.set_timer(index, self.shared.config.head_timeout);
                            }
                            return pos;
                        }
                        Ok(Some((head, n))) => {
                            pos += n;
                            self.handle_head(index, head);
                        }
                        Err(e) => {
                            self.fail(index, e.status(), &e.to_string());
                            return buf.len();
                        }
                    }
                }
                State::Body => {
                    if rest.is_empty() {
                        return pos;
                    }
                    // Invariant: State::Body is only entered with a pending request.
                    let pending = conn.pending.as_mut().expect("body state has a pending box");
                    let request = pending.request.as_mut().expect("body state has a request");
                    match request.decoder.handle_bytes(rest, &mut request.body) {
                        Ok((n, done)) => {
                            pos += n;
                            if done {
                                let request = pending.request.take().expect("checked above");
                                let PendingRequest { route, body, .. } = *request;
                                self.handle_body(index, route, body);
                            } else if n == rest.len() || n == 0 {
                                return pos;
                            }
                        }
                        Err(e) => {
                            self.fail(index, e.status(), &e.to_string());
                            return buf.len();
                        }
                    }
                }
                // Subscribers have nothing more to say; closing sockets are drained.
                State::Stream | State::Sse | State::Closing => return buf.len(),
                State::WebSocket => {
                    if rest.is_empty() {
                        return pos;
                    }
                    match wire::parse_ws_frame(rest, self.shared.config.max_message) {
                        Ok(None) => return pos,
                        Ok(Some((frame, n))) => {
                            pos += n;
                            self.handle_ws_frame(index, frame);
                        }
                        Err(e) => {
                            self.ws_fail(index, e.close_code(), &e.to_string());
                            return buf.len();
                        }
                    }
                }
                // Pipelined requests wait until the poll is answered.
                State::PollWaiting => return pos,
            }
        }
    }

    pub(crate) fn limits(&self) -> wire::Limits {
        wire::Limits::default()
    }

    fn on_writable(&mut self, index: usize) {
        self.flush(index);
    }

    /// Writes queued output; drops the queue (and WRITABLE interest) once it is empty, and
    /// finishes a closing connection.
    pub(crate) fn flush(&mut self, index: usize) {
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        let Some(queue) = conn.out.as_mut() else {
            return;
        };
        let before = queue.bytes();
        let result = queue.flush(&mut conn.stream);
        let after = queue.bytes();
        self.queued = self.queued + after - before;
        match result {
            Ok(n) => {
                self.metrics
                    .bytes_out
                    .fetch_add(n as u64, Ordering::Relaxed);
                if after == 0 {
                    conn.out = None;
                    if conn.state == State::Closing {
                        self.finish_closing(index);
                    }
                }
            }
            Err(_) => self.close(index),
        }
    }

    /// Sends bytes to a connection: straight to the socket when nothing waits, else
    /// behind the queued output. `coalesce` queues without writing; the caller flushes
    /// every dirty connection once (one writev for several messages).
    pub(crate) fn send(&mut self, index: usize, parts: &[Part<'_>], coalesce: bool) -> bool {
        let Some(conn) = self.conns.get_mut(index) else {
            return false;
        };
        let len: usize = parts.iter().map(Part::len).sum();
        if let Some(queue) = conn.out.as_mut() {
            for p in parts {
                queue.push_part(*p);
            }
            self.queued += len;
            return true;
        }
        if coalesce {
            let mut queue = Box::<crate::output::OutQueue>::default();
            for p in parts {
                queue.push_part(*p);
            }
            conn.out = Some(queue);
            self.queued += len;
            self.dirty.push(index);
            return true;
        }
        match write_now(&mut conn.stream, parts) {
            Ok((n, None)) => {
                self.metrics
                    .bytes_out
                    .fetch_add(n as u64, Ordering::Relaxed);
                true
            }
            Ok((n, Some(queue))) => {
                self.metrics
                    .bytes_out
                    .fetch_add(n as u64, Ordering::Relaxed);
                self.queued += queue.bytes();
                conn.out = Some(queue);
                true
            }
            Err(_) => {
                self.close(index);
                false
            }
        }
    }

    /// Flushes connections that got output during a coalesced pass.
    pub(crate) fn flush_dirty(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for &index in &dirty {
            self.flush(index);
        }
        dirty.clear();
        self.dirty = dirty;
    }

    /// Answers with a complete response; then either waits for the next request
    /// (keep-alive idle timer) or closes once the bytes are out.
    pub(crate) fn respond(&mut self, index: usize, bytes: Vec<u8>, keep_alive: bool) {
        let bytes = bytes::Bytes::from(bytes);
        if !self.send(index, &[Part::Shared(&bytes)], false) {
            return;
        }
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        if keep_alive {
            conn.state = State::Idle;
            self.set_timer(index, self.shared.config.keepalive_timeout);
        } else {
            self.start_closing(index);
        }
    }

    /// A clean error: a short text response, then close (the request framing may be lost).
    pub(crate) fn fail(&mut self, index: usize, status: u16, message: &str) {
        let mut response = wire::error_response(status, message, false);
        if status == 503 {
            response = wire::response(
                503,
                "text/plain; charset=utf-8",
                format!("{message}\n").as_bytes(),
                false,
                &[("Retry-After", "1")],
            );
        }
        if let Some(conn) = self.conns.get_mut(index) {
            // Whatever request was in progress is abandoned.
            if let Some(p) = conn.pending.as_mut() {
                p.request = None;
                p.input.clear();
            }
            conn.set(KEEP_ALIVE, false);
        }
        self.respond(index, response, false);
    }

    /// Closes after the queued output is written: FIN first, then wait for the peer's
    /// EOF (reading and discarding), so our last bytes are not lost to a reset.
    pub(crate) fn start_closing(&mut self, index: usize) {
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        conn.state = State::Closing;
        if let Some(p) = conn.pending.as_mut() {
            p.request = None;
            p.input.clear();
        }
        let drained = conn.out.is_none();
        self.set_timer(index, LINGER);
        if drained {
            self.finish_closing(index);
        }
    }

    fn finish_closing(&mut self, index: usize) {
        if let Some(conn) = self.conns.get_mut(index) {
            let _ = conn.stream.shutdown(std::net::Shutdown::Write);
            self.logout(index);
        }
    }

    pub(crate) fn login(&mut self, index: usize, user: u64) {
        self.login_and_read(index, user, None);
    }

    /// Logs the connection in as `user` (moving it from another user if needed) and, when
    /// `since` is given, reads that user's history in the same router critical section:
    /// every later message then arrives through the inbox, none twice, none missed.
    pub(crate) fn login_and_read(
        &mut self,
        index: usize,
        user: u64,
        since: Option<u64>,
    ) -> Option<router::HistoryRead> {
        let conn = self.conns.get_mut(index)?;
        let conn_ref = ConnRef {
            shard: self.id,
            token: shared::token(index, conn.gen),
        };
        let mut router = self.shared.router.lock();
        if conn.has(LOGGED_IN) && conn.user != user {
            router.handle_logout(conn.user, conn_ref, Instant::now());
            conn.set(LOGGED_IN, false);
        }
        if !conn.has(LOGGED_IN) {
            router.handle_login(user, conn_ref);
            conn.user = user;
            conn.set(LOGGED_IN, true);
        }
        since.map(|since| router.history_since(user, since))
    }

    pub(crate) fn logout(&mut self, index: usize) {
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        if conn.has(LOGGED_IN) {
            conn.set(LOGGED_IN, false);
            let conn_ref = ConnRef {
                shard: self.id,
                token: shared::token(index, conn.gen),
            };
            self.shared
                .router
                .lock()
                .handle_logout(conn.user, conn_ref, Instant::now());
        }
    }

    pub(crate) fn close(&mut self, index: usize) {
        if !self.conns.contains(index) {
            return;
        }
        self.logout(index);
        let conn = self.conns.remove(index);
        self.queued -= conn.queued_bytes();
        self.gens[index] = self.gens[index].wrapping_add(1);
        self.shared.release();
        self.shared.release_ip(conn.ip_key);
        self.metrics.closes.fetch_add(1, Ordering::Relaxed);
        self.metrics.connections.fetch_sub(1, Ordering::Relaxed);
        // Dropping the stream closes the socket, which also removes it from epoll.
        drop(conn);
    }

    /// Runs the commands other loops (or this one) queued, until none is left. Re-entry
    /// (a delivery answering a long-poll whose pipelined request publishes) returns at
    /// once: the outer call picks the new commands up, keeping per-user order.
    pub(crate) fn drain_inbox(&mut self) {
        if self.draining {
            return;
        }
        self.draining = true;
        let mut inbox = std::mem::take(&mut self.inbox);
        loop {
            self.shared.loops[self.id as usize].drain(&mut inbox);
            if inbox.is_empty() {
                break;
            }
            let deliveries = inbox
                .iter()
                .filter(|c| matches!(c, Command::Deliver(_)))
                .count();
            let coalesce = deliveries > 1;
            for cmd in inbox.drain(..) {
                match cmd {
                    Command::Deliver(d) => self.deliver(d, coalesce),
                    Command::Shutdown => self.stopping = true,
                }
            }
            if coalesce {
                self.flush_dirty();
            }
        }
        self.inbox = inbox;
        self.draining = false;
        if self.stopping {
            let all: Vec<usize> = self.conns.iter().map(|(i, _)| i).collect();
            for index in all {
                self.close(index);
            }
        }
    }

    fn run_timers(&mut self, now: Instant) {
        let now_tick = self.tick_of(now);
        let mut due = std::mem::take(&mut self.due);
        let conns = &self.conns;
        let deadline_of = |token: u32| {
            let (index, gen) = shared::untoken(token);
            conns
                .get(index)
                .filter(|c| c.gen == gen)
                .map(|c| c.deadline)
        };
        self.wheel.poll_due(
            now_tick,
            |token, slot_tick| wheel::judge(deadline_of(token), slot_tick, now_tick),
            |token| due.push(token),
        );
        for token in due.drain(..) {
            // Check again: an earlier timer's work may have closed this connection
            // (a long-poll answer running a pipelined publish) or already fired it (an
            // entry scheduled twice for one tick).
            let (index, gen) = shared::untoken(token);
            if matches!(self.conns.get(index), Some(c) if c.gen == gen && c.deadline <= now_tick) {
                self.on_timer(index);
            }
        }
        self.due = due;
    }

    fn on_timer(&mut self, index: usize) {
        let Some(conn) = self.conns.get(index) else {
            return;
        };
        match conn.state {
            State::Head | State::Body => self.fail(index, 408, "request timeout"),
            State::Idle => self.close(index),
            State::Closing => self.close(index),
            State::PollWaiting => self.answer_poll(index),
            State::Stream | State::Sse | State::WebSocket => self.heartbeat(index),
        }
    }

    /// Gives memory back after a mass disconnect and lets the router expire history.
    fn housekeeping(&mut self, now: Instant) {
        let open = self.conns.len();
        // One loop drives the router's clock; the others have nothing to add.
        if self.id == 0 {
            self.shared.router.lock().handle_tick(now);
        }
        if open > self.peak {
            self.peak = open;
        } else if self.peak >= 1024 && open < self.peak / 2 {
            // `gens` stays: one byte per slot keeps stale tokens from matching new ones.
            self.conns.shrink_to_fit();
            self.dirty = Vec::new();
            self.due = Vec::new();
            self.inbox = Vec::new();
            self.wheel.shrink();
            self.shared.router.lock().compact();
            // SAFETY: malloc_trim only returns free heap pages to the kernel.
            #[cfg(target_os = "linux")]
            unsafe {
                libc::malloc_trim(0);
            }
            self.peak = open;
        }
    }
}

/// Answers a connection we will not keep (over a limit) and drops it.
fn reject(stream: &mut TcpStream, status: u16, message: &str) {
    let response = wire::response(
        status,
        "text/plain; charset=utf-8",
        format!("{message}\n").as_bytes(),
        false,
        &[("Retry-After", "1")],
    );
    // Best effort: a fresh socket's send buffer takes a short response at once.
    let _ = std::io::Write::write(stream, &response);
    let _ = stream.shutdown(std::net::Shutdown::Write);
}
