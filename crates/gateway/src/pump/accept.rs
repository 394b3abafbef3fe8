//! Accepting sockets: the process and per-address limits (503 + Retry-After beyond
//! them), TCP_NODELAY, a slab slot and the head timeout; when to leave and rejoin
//! the listening group (the socket itself is [`super::listener`]'s).
//!
//! With `leave_when_full` (several gateway processes on one port) a full process
//! leaves the SO_REUSEPORT listening group instead of refusing: the kernel hashes
//! new connections blindly over the group's listeners, and only a closed listener
//! leaves it (one that is merely not polled still gets its share, which then waits
//! unanswered). The place is reserved before each accept, so the accept that fills
//! the process closes the listener before that client is even answered. What is
//! still in the closed listener's accept queue is moved to another listener of the
//! group when `net.ipv4.tcp_migrate_req = 1` (Linux 5.14; `myriad doctor` names it),
//! else reset by the kernel. A steering eBPF program would avoid the close, at the
//! price of a BPF map shared by processes; the close is simpler and was enough
//! (figures in docs/decisions/supervisor-and-listening-group.md).

use super::slot::{self, Slot};
use super::EventLoop;
use crate::peers::Prefix;
use connection::{Connection, Cx};
use mio::net::TcpStream;
use mio::{Interest, Token};
use std::io;
use std::sync::atomic::Ordering;

/// Sockets accepted (and answered: a request already there is read at once) in one
/// round. Each answer may fan out (a presence join to a room's watchers), so an
/// unbounded backlog made rounds of hundreds of ms under a connect storm, with every
/// keep-alive request of the loop waiting behind it; past this many the rest of the
/// backlog waits for the next round, after the sockets that became readable. 64
/// cost connects/s and CPU per connect (docs/decisions/presence-events.md, 9).
pub(super) const ACCEPTS_PER_ROUND: u32 = 256;

impl EventLoop {
    /// Accepts what the listener holds, up to the round's [`ACCEPTS_PER_ROUND`];
    /// what is left sets `accepts_left`, which brings the loop back at once.
    pub(super) fn accept_all(&mut self) {
        if self.drain.is_some() {
            return; // the listener is shut (draining)
        }
        if self.gateway.config.leave_when_full {
            return self.accept_steered();
        }
        loop {
            if !self.accept_budget() {
                return;
            }
            let Some(accepted) = self.listener.accept() else {
                return;
            };
            match accepted {
                Ok((stream, addr)) => self.on_accept(stream, addr, false),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE / ENFILE: out of descriptors. Leave the rest in the backlog
                    // and retry on the next tick (edge-triggered: no new event would come).
                    tracing::warn!(loop_id = self.id, error = %e, "accept failed; pausing accepts for a tick");
                    self.listener.pause();
                    return;
                }
            }
        }
    }

    /// [`EventLoop::accept_all`] for a process that shares its port: a place is
    /// reserved before each accept; when none is left the listener is closed first.
    fn accept_steered(&mut self) {
        loop {
            if !self.listener.is_listening() || !self.accept_budget() {
                return;
            }
            if !self.gateway.reserve() {
                return self.leave_group();
            }
            let Some(accepted) = self.listener.accept() else {
                self.gateway.unreserve();
                return; // not listening: checked above
            };
            match accepted {
                Ok((stream, addr)) => {
                    if self.gateway.connections() >= self.gateway.config.max_connections {
                        // This accept filled the process: leave before answering it.
                        self.leave_group();
                    }
                    self.on_accept(stream, addr, true);
                }
                Err(e) => {
                    self.gateway.unreserve();
                    match e.kind() {
                        io::ErrorKind::WouldBlock => return,
                        io::ErrorKind::Interrupted => continue,
                        _ => {
                            tracing::warn!(loop_id = self.id, error = %e, "accept failed; pausing accepts for a tick");
                            self.listener.pause();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Whether this round may accept one more socket; if not, the listener is
    /// marked as still holding some (edge-triggered: no event would say so again).
    fn accept_budget(&mut self) -> bool {
        if self.accepted_in_round >= ACCEPTS_PER_ROUND {
            self.accepts_left = true;
            return false;
        }
        self.accepted_in_round += 1;
        true
    }

    /// Called every tick with `leave_when_full`: leaves the group when another loop
    /// filled the process, rejoins once below the low-water mark.
    pub(super) fn steer(&mut self) {
        if self.drain.is_some() {
            return; // draining: never rejoin
        }
        let open = self.gateway.connections();
        let config = &self.gateway.config;
        if self.listener.is_listening() && open >= config.max_connections {
            self.leave_group();
        } else if !self.listener.is_listening() && open < config.rejoin_below() {
            match self.listener.rebind(config.tcp_nodelay) {
                Ok(socket) => {
                    if let Err(e) = self.listener.join(&self.registry, socket) {
                        tracing::warn!(loop_id = self.id, error = %e, "cannot register the listener again");
                        return;
                    }
                    self.metrics.listening.store(1, Ordering::Relaxed);
                    tracing::info!(
                        loop_id = self.id,
                        connections = open,
                        "room again: rejoined the listening group"
                    );
                    // Edge-triggered: connections queued before the register give no event.
                    self.accept_all();
                }
                Err(e) => {
                    tracing::warn!(loop_id = self.id, error = %e, "cannot rejoin the listening group")
                }
            }
        }
    }

    /// Closes this loop's listener: SO_REUSEPORT stops hashing clients to it.
    fn leave_group(&mut self) {
        if self.listener.leave(&self.registry) {
            self.metrics.listening.store(0, Ordering::Relaxed);
            tracing::info!(
                loop_id = self.id,
                connections = self.gateway.connections(),
                "full: left the listening group"
            );
        }
    }

    /// Admits an accepted socket (its process place already taken when `reserved`).
    fn on_accept(&mut self, mut stream: TcpStream, addr: std::net::SocketAddr, reserved: bool) {
        // Loopback peers are not counted (`Prefix::of` is `None`): local load
        // generators and a reverse proxy on the same host, for which one address is
        // every client.
        let peer = Prefix::of(addr.ip());
        let admitted = if reserved {
            self.gateway.admit_reserved(peer)
        } else {
            self.gateway.admit(peer)
        };
        let ip_key = match admitted {
            Ok(handle) => handle,
            Err(why) => {
                // A TLS client cannot read a plain 503: it only sees the close.
                if self.tls.is_none() {
                    reject(&mut stream, why);
                }
                return;
            }
        };
        // The listener has TCP_NODELAY and Linux copies it to accepted sockets; the
        // first accept checks that once, so the storm path saves a setsockopt each.
        if self.gateway.config.tcp_nodelay {
            self.listener.set_nodelay(&stream);
        }
        let Some(index) = self.conns.vacant() else {
            self.gateway.release(ip_key);
            return reject(&mut stream, "too many connections in this loop");
        };
        let mut conn = Connection::new();
        conn.set_peer_loopback(addr.ip().to_canonical().is_loopback());
        conn.set_beat_phase(crate::wheel::beat_phase_of(addr.ip()));
        self.conns.insert(Slot {
            conn,
            out: None,
            stream: Some(stream),
            ip_key,
        });
        self.metrics.connects.fetch_add(1, Ordering::Relaxed);
        self.metrics.connections.fetch_add(1, Ordering::Relaxed);
        self.listener.count_accept();
        debug_assert_eq!(slot::untoken(self.conns.token(index)).0, index);
        if !self.tls_open(index) {
            return self.close(index);
        }
        let generation = self.conns.gen(index);
        self.open_core(index);
        // Read before registering: the request is usually in the socket already when
        // accept returns (the client sends it with the handshake's last ACK), so it
        // is answered now rather than after the next epoll_wait, and the client's
        // next connect starts sooner (the C floor with this change: median storm
        // +3 to +24 % in 3 interleaved pairs; docs/decisions/wake-ups.md). Nothing
        // is lost by registering afterwards: EPOLL_CTL_ADD reports what is ready at
        // that moment, edge-triggered included. A read that finds nothing costs one
        // recv.
        if self.conns.gen(index) != generation {
            return; // closed while opening
        }
        self.on_readable(index);
        if self.conns.gen(index) != generation {
            return; // closed while answering
        }
        let Some(stream) = self.conns[index].stream.as_mut() else {
            return;
        };
        if let Err(e) = self.registry.register(
            stream,
            Token(index),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            tracing::warn!(error = %e, "register failed");
            self.close(index);
        }
    }

    /// Starts the core's head timeout without putting it in the wheel yet: most
    /// clients send their request at once and get a new timer (a heartbeat) before
    /// the next tick, which would leave the head timeout's entry stale in the wheel
    /// for its whole duration (4 B and slot-vector slack per connection, the
    /// second largest share of an idle connection's memory). [`EventLoop::arm_fresh`]
    /// schedules the ones still waiting on the next tick.
    fn open_core(&mut self, index: usize) {
        let (slot, credentials, token) = self.conns.for_core(index).expect("just opened");
        let mut cx = Cx {
            now: self.timers.now(),
            config: &self.config,
            queued: 0,
            out: &mut self.outbox,
            credentials,
            key: token,
        };
        slot.conn.handle_open(&mut cx);
        if let Some(tick) = self.outbox.take_timer() {
            self.timers.open(token, tick);
        }
        // Opening only arms the timer; anything else is applied as usual.
        if !self.outbox.is_empty() {
            self.settle(index, false);
        }
    }

    /// Puts the head timeouts of connections opened since the last tick into the
    /// wheel, unless the connection has set another timer since (then that one is
    /// in the wheel already).
    pub(super) fn arm_fresh(&mut self) {
        for (token, tick) in self.timers.take_fresh() {
            let Some(index) = self.conns.live(token) else {
                continue;
            };
            if self.conns[index].conn.deadline() == tick {
                let at = self.timers.schedule(token, tick);
                if at != tick {
                    self.conns[index].conn.reschedule(at);
                }
            }
        }
    }
}

impl EventLoop {
    /// A burst of connections leaves freed but resident chunks in the malloc heaps
    /// (what grew during the burst and was outgrown or dropped): measured at
    /// 15,000 idle SSE connections, `malloc_trim` gave back ~100 KB, ~7 B per
    /// connection (docs/decisions/connection-budget.md). Once per second (the loop's
    /// give-back tick), after at least [`TRIM_EVERY`] accepts, those pages go back
    /// to the kernel.
    ///
    /// [`TRIM_EVERY`]: super::listener::TRIM_EVERY
    pub(super) fn trim_after_accepts(&mut self) {
        if self.listener.trim_due() {
            super::trim_heap();
        }
    }
}

/// Answers a connection we will not keep (over a limit) and drops it.
fn reject(stream: &mut TcpStream, why: &str) {
    let mut response = Vec::with_capacity(160);
    wire::write_error_response(&mut response, 503, why, false, &[("Retry-After", "1")]);
    // Best effort: a fresh socket's send buffer takes a short response at once.
    let _ = io::Write::write(stream, &response);
    let _ = stream.shutdown(std::net::Shutdown::Write);
}
