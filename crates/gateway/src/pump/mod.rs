//! The pump: one event loop per core, a thread that owns its parts (below), a
//! scratch read buffer and the loop's [`Outbox`], and moves bytes between sockets
//! and connection cores — nothing else. Protocol decisions are the core's; who
//! receives what is the bus's.
//!
//! Readiness is edge-triggered (mio): reads go on until the socket is drained. Every
//! socket is registered once for READABLE | WRITABLE and never re-registered: with
//! edge triggering a writable edge comes only after a write hit a full buffer, so the
//! interest costs nothing while idle and saves two epoll_ctl calls per slow write
//! (measured: epoll_ctl was the top user of kernel time in the broadcast bench).
//!
//! A loop's state sits in a [`LoopCell`]: its thread holds the lock for a round of
//! events and lets go while it sleeps in `epoll_wait`. A loop that publishes a
//! small delivery for a sleeping loop takes that lock and writes it itself
//! ([`handoff`]) instead of waking the other thread: on the unicast path a message
//! crosses loops without a wake-up.
//!
//! Layout. A loop's state is parts, each a type that owns its fields and is tested
//! alone:
//! - [`conns`]: the connections — the slab of [`slot::Slot`]s (socket, core, output
//!   queue), the slots' generations behind every token, the credentials side table;
//! - [`timers`]: the clock, the 10-ms marks, the give-back second and the timing
//!   wheel (with the head timeouts not yet in it);
//! - [`writer`]: the bytes queued on the sockets, a merged pass's flush list and the
//!   io_uring ring ([`send_batch`]) with the decision to gather a pass's sends;
//! - [`listener`]: the listening socket — bind, accept, leave and rejoin the port's
//!   SO_REUSEPORT group;
//! - [`tls`]: the TLS byte transform between socket and core (`TlsLayer`);
//! - [`h2`]: HTTP/2 on TLS connections (`H2Layer`), [`h2_stream`] a virtual
//!   connection per stream, [`h2_control`] what one stream asks of another.
//!
//! [`EventLoop`] holds them and does what needs several at once, borrowing the parts
//! it uses: [`accept`] admits sockets and steers the loop in and out of the port's
//! group; [`io`] reads into cores and applies their outboxes (writes, timers, bus
//! requests, closes) and sends the round's calls; [`askers`] serves back-ends' query
//! connections ahead of the round's other work; [`inbox`] runs the mailbox (mail, late replies);
//! [`handoff`] settles, at a round's end, the mailboxes its calls filled; [`drain`]
//! is the loop's side of a graceful drain; [`output`] is the write queue.

mod accept;
mod askers;
mod conns;
mod drain;
mod h2;
mod h2_control;
mod h2_stream;
mod handoff;
mod inbox;
mod io;
mod listener;
pub mod output;
mod send_batch;
pub mod slot;
mod timers;
mod tls;
mod writer;

/// One HTTP/2 connection's frame handling on a script of bytes and time (fuzz target
/// `h2_conn`).
#[doc(hidden)]
pub use h2::script::run as h2_script;

pub use handoff::{cells, LoopCell, LoopCells, RUN_ELSEWHERE_MAX};
pub(crate) use listener::bind_reuseport;

use crate::gateway::Gateway;
use crate::wheel;
use bus::{Inbound, Request};
use connection::clock::{reached, TICK_MS};
use connection::Outbox;
use conns::Conns;
use listener::Listener;
use mio::net::TcpListener;
use mio::{Events, Poll, Registry, Token};
use observe::metrics::LoopMetrics;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timers::Timers;
use writer::Writer;

/// A bus request of one connection, made during a round and sent at its end.
struct Call {
    token: u32,
    request: Request,
    /// The connection's timer waits for this call's reply (see `io::settle`).
    arm: bool,
}

pub const LISTENER: Token = Token(usize::MAX - 1);
pub const WAKER: Token = Token(usize::MAX - 2);

/// Per-loop scratch read buffer: every connection reads here first, so an idle
/// connection owns no read buffer.
const SCRATCH: usize = 64 * 1024;
/// Slab slots reserved when the loop is made (on the starting thread): 160 KB in a
/// release build, above glibc's mmap threshold, so the slab is its own mapping from
/// the start — its untouched pages cost nothing, and it grows by `mremap`. Grown
/// from empty on the loop's thread instead, every copy below the threshold (40 B ×
/// 4 … 2,048 slots) was freed into the loop's malloc arena, where what merged into
/// the arena's top stays resident for good (`malloc_trim` does not cut a thread
/// arena's top).
const FIRST_SLOTS: usize = 4096;

pub struct EventLoop {
    id: u16,
    /// The loop's epoll, to register sockets (the thread's `Poll` waits on it).
    registry: Registry,
    /// The listening socket, in or out of the port's group (see `accept`).
    listener: Listener,
    /// The connections: slab, generations, credentials.
    conns: Conns,
    /// The clock, the 10-ms marks and the timing wheel.
    timers: Timers,
    config: connection::Config,
    gateway: Arc<Gateway>,
    /// Every loop's cell, this one's included, for the hand-off (`handoff`).
    loops: LoopCells,
    metrics: Arc<LoopMetrics>,
    outbox: Outbox,
    /// Scratch for the bus requests of one core call.
    requests: Vec<Request>,
    /// The round's bus calls, sent at its end ([`EventLoop::finish_round`]).
    calls: Vec<Call>,
    /// A bus call was made since the last settling of other loops' mailboxes.
    called: bool,
    scratch: Vec<u8>,
    inbox: Vec<Inbound>,
    /// Tokens of connections whose held input is to be read again (after a long-poll
    /// answer or an API reply): run after the current event, never inside it.
    resume: Vec<u32>,
    /// Connections whose reading paused over `max_queued` and whose queue has since
    /// drained: their sockets are read again with the resumes (see `io`).
    reread: Vec<u32>,
    /// Connections that made a back-end query, read ahead of the round's other
    /// events ([`askers`]).
    askers: askers::Askers,
    /// A delivery pass ran out of its budget: come back at once after the sockets.
    more_work: bool,
    /// Sockets this round has accepted (at most `accept::ACCEPTS_PER_ROUND`), and
    /// whether the listener was left holding more: the next round accepts them
    /// after its readable sockets.
    accepted_in_round: u32,
    accepts_left: bool,
    /// Connection count at the last memory give-back, to notice a mass disconnect.
    peak: usize,
    /// Draining: the listener has left the accept group; when the last drain step
    /// ran (see `drain`).
    drain: Option<drain::Progress>,
    /// TLS sessions when the listener is TLS (`--tls-cert`, `--tls self-signed`).
    tls: Option<self::tls::TlsLayer>,
    /// HTTP/2 connections and streams (TLS listener with `h2` offered).
    h2: Option<self::h2::H2Layer>,
    /// Queued bytes, the merged pass's flush list and the io_uring ring.
    writer: Writer,
}

impl EventLoop {
    pub fn new(
        id: u16,
        registry: Registry,
        listener: TcpListener,
        gateway: Arc<Gateway>,
        loops: LoopCells,
    ) -> std::io::Result<EventLoop> {
        let listener = Listener::new(&registry, listener)?;
        let metrics = gateway.metrics.loops[id as usize].clone();
        let config = gateway.config.core();
        let tls =
            gateway.config.tls.as_ref().map(|t| {
                self::tls::TlsLayer::new(t.config.clone(), t.ktls == crate::config::Ktls::Tx)
            });
        let max_streams = gateway.config.max_streams_per_connection;
        let h2 = (tls.is_some() && max_streams > 0).then(|| self::h2::H2Layer::new(max_streams));
        let send_batch = (gateway.config.io_uring && tls.is_none())
            .then(send_batch::SendBatch::new)
            .and_then(|ring| {
                ring.inspect_err(|e| {
                    tracing::warn!(error = %e, "--io-uring: the kernel refused io_uring; sends use writev")
                })
                .ok()
            });
        metrics.listening.store(1, Ordering::Relaxed);
        let (epoch, epoch_unix_ms) = wheel::aligned_epoch();
        // `--tick-groups`: this process's marks (and beats) ahead of the others'.
        let epoch = epoch
            .checked_sub(gateway.config.tick_offset)
            .unwrap_or(epoch);
        Ok(EventLoop {
            id,
            registry,
            listener,
            conns: Conns::with_capacity(FIRST_SLOTS),
            timers: Timers::new(epoch, epoch_unix_ms, Instant::now()),
            config,
            gateway,
            loops,
            metrics,
            outbox: Outbox::new(rand::random()),
            requests: Vec::new(),
            calls: Vec::new(),
            called: false,
            scratch: vec![0; SCRATCH],
            inbox: Vec::new(),
            resume: Vec::new(),
            reread: Vec::new(),
            askers: askers::Askers::default(),
            more_work: false,
            accepted_in_round: 0,
            accepts_left: false,
            peak: 0,
            drain: None,
            tls,
            h2,
            writer: Writer::new(send_batch),
        })
    }

    /// One round: the events `poll` returned, the mailbox, the timers. Returns how
    /// long to sleep next, or `None` when the loop is done (stop or drain).
    fn round(&mut self, events: &Events) -> Option<Duration> {
        self.set_clock(Instant::now());
        self.accepted_in_round = 0;
        let accepts_left = std::mem::take(&mut self.accepts_left);
        for event in events.iter() {
            self.worked(askers::EVENT);
            match event.token() {
                LISTENER => {
                    self.accept_all();
                    self.serve_askers();
                }
                WAKER => self.drain_mailbox(),
                Token(index) => {
                    if event.is_readable() || event.is_read_closed() || event.is_error() {
                        self.on_readable(index);
                    }
                    if event.is_writable() {
                        self.flush(index);
                    }
                }
            }
        }
        if accepts_left {
            self.accept_all();
        }
        if std::mem::take(&mut self.more_work) {
            self.drain_mailbox();
        }
        self.finish_round();
        if self.gateway.stop.load(Ordering::Acquire) {
            self.close_all();
            return None;
        }
        if self.gateway.draining.load(Ordering::Acquire) && self.drain_step() {
            return None;
        }
        let now = Instant::now();
        if let Some(lag) = self.timers.tick_due(now) {
            self.metrics.record_lag(lag);
            self.set_clock(now);
            self.run_timers();
            self.tls_tick();
            if self.listener.take_paused() {
                self.accept_all();
            }
            if self.gateway.config.leave_when_full {
                self.steer();
            }
            self.metrics
                .queued_bytes
                .store(self.writer.queued() as u64, Ordering::Relaxed);
        }
        if self.timers.second_due(now) {
            self.give_back_memory();
        }
        self.finish_round();
        Some(if self.more_work || self.accepts_left {
            Duration::ZERO
        } else {
            self.timers.until_next_tick()
        })
    }

    /// Sets the current tick from `at`, and the cores' wall clock with it (see
    /// [`Timers::set_clock`]).
    fn set_clock(&mut self, at: Instant) {
        self.config.unix_start_ms = self.timers.set_clock(at);
    }

    fn run_timers(&mut self) {
        self.arm_fresh();
        let now = self.timers.now();
        let conns = &self.conns;
        let mut due = self.timers.take_due(|token| conns.deadline(token));
        // Heartbeats due on one grid mark leave together (`--io-uring`): one submit
        // per slice instead of a `writev` and a reader's wake-up each.
        self.writer.start_pass(due.len());
        for (i, token) in due.drain(..).enumerate() {
            if i > 0 && i % inbox::SLICE == 0 {
                self.submit_sends();
            }
            // Check again: an earlier timer's work may have closed this connection,
            // or an entry scheduled twice for one tick already fired.
            if let Some(index) = self.conns.live(token) {
                if reached(self.conns[index].conn.deadline(), now) {
                    if self.h2.as_ref().is_some_and(|h| h.is_conn(index)) {
                        self.h2_timeout(index);
                    } else {
                        self.with_core(index, |conn, cx| conn.handle_timeout(cx));
                    }
                }
            }
        }
        self.submit_sends();
        self.writer.end_pass();
        self.timers.recycle_due(due);
        self.run_expiries();
        self.run_resumes();
    }

    /// Ends the connections whose token has expired by now (`connection::expiry`), and
    /// counts the loop's failed authentications into its metrics.
    fn run_expiries(&mut self) {
        let unix_now = (self.config.unix_start_ms + u64::from(self.timers.now()) * TICK_MS) / 1000;
        while let Some(token) = self.conns.pop_expired(unix_now) {
            if let Some(index) = self.conns.live(token) {
                self.with_core(index, |conn, cx| conn.handle_expired(cx));
            }
        }
        let failed = self.conns.take_failed();
        if failed > 0 {
            self.metrics
                .auth_failures
                .fetch_add(failed, Ordering::Relaxed);
        }
    }

    /// Closes every connection (shutdown), and sends their logouts.
    fn close_all(&mut self) {
        let all: Vec<usize> = self.conns.iter().map(|(i, _)| i).collect();
        for index in all {
            self.close(index);
        }
        self.send_calls();
        self.settle_wakes();
    }

    /// The end of a round, what its connections asked for settled once and in one
    /// direction: the bus calls sent (replies go back to their cores, which may ask
    /// more), held input read again, this loop's own mail written (what the round
    /// published to its own connections: one write per connection for all of it);
    /// repeated until nothing is left. Then the other loops this round left mail for
    /// are woken or handed it (`handoff`). Nothing here runs inside a bus call.
    fn finish_round(&mut self) {
        loop {
            self.send_calls();
            self.run_resumes();
            self.run_relays();
            if !self.calls.is_empty() {
                continue;
            }
            if !self.gateway.mailboxes[self.id as usize].take_unwoken() {
                break;
            }
            self.drain_mailbox();
        }
        self.settle_wakes();
    }

    /// Gives memory back after a mass disconnect (the router compacts on its own).
    fn give_back_memory(&mut self) {
        let trimmed = self
            .tls
            .as_mut()
            .is_some_and(|tls| tls.trim_after_handshakes());
        if !trimmed {
            self.trim_after_accepts();
        }
        let open = self.conns.len();
        if open > self.peak {
            self.peak = open;
        } else if self.peak >= 1024 && open < self.peak / 2 {
            self.conns.shrink();
            self.writer.shrink();
            self.timers.shrink();
            self.inbox = Vec::new();
            self.resume = Vec::new();
            if let Some(tls) = self.tls.as_mut() {
                tls.shrink();
            }
            if let Some(h2) = self.h2.as_mut() {
                h2.shrink();
            }
            trim_heap();
            self.peak = open;
        }
    }
}

/// Returns the free pages inside every malloc arena to the kernel (glibc's
/// `malloc_trim` releases whole free pages anywhere in a heap, not only at its
/// top). Cost: one walk of the free lists, milliseconds at 15,000 connections.
fn trim_heap() {
    // SAFETY: malloc_trim only returns free heap pages to the kernel.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A loop's thread: waits for events without the loop's lock, then runs a round
/// holding it (see [`LoopCell`]).
pub fn run(loops: LoopCells, id: u16, mut poll: Poll) -> std::io::Result<()> {
    let cell = &loops[id as usize];
    let mut events = Events::with_capacity(1024);
    let mut timeout = Duration::ZERO;
    loop {
        if let Err(e) = poll.poll(&mut events, Some(timeout)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                let done = cell.lock().take();
                drop(done);
                return Err(e);
            }
        }
        let mut guard = cell.lock();
        let Some(event_loop) = guard.as_mut() else {
            return Ok(());
        };
        match event_loop.round(&events) {
            Some(next) => timeout = next,
            None => {
                // Dropped outside the lock: its sockets close, its Arc<Gateway> goes.
                let done = guard.take();
                drop(guard);
                drop(done);
                return Ok(());
            }
        }
    }
}
