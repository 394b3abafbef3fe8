//! flood's event loop: one thread, one mio poll, every connection of this process.
//!
//! Memory budget (≤ 256 B per open idle connection, measured by RSS): a connection is a
//! 64-byte slab entry (socket fd, connection number, phase, [`Scanner`], TLS box);
//! reads go into one shared scratch buffer; requests are built in one shared buffer.
//! Only connections still waiting for their response head also sit in a deadline
//! queue. There is no task, channel, timer or buffer per connection.
//!
//! `https://` and `wss://`: a connection also owns a boxed [`ClientSession`] (the `tls`
//! crate, rustls underneath): ~4 KB while it handshakes, ~250 B once established (the
//! lean TLS 1.3 phase), decrypting in place in the shared scratch buffer. A failure
//! before the handshake completes counts as a `handshake` failure.
//!
//! Not here: argument parsing, child processes, printing (see `flood/mod.rs`), HTTP/2
//! (`h2` runs on tokio, see `flood/h2.rs`).

use super::lifecycle::{self, Backend, Tally};
use super::plan::Plan;
use super::request::{build_request, open_socket, send, write_once};
use super::resume::{Since, Track};
use super::scan::{Scanner, Transport};
use super::stamp::{self, LatencyAt};
use super::stats::{ProcSummary, Sample};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

mod ending;
mod read;
mod reconnect;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use tls::ClientSession;

/// The shared read buffer: one per process, never per connection.
const SCRATCH: usize = 64 * 1024;
const CONNECTING: u8 = 0;
const AWAIT_HEAD: u8 = 1;
const OPEN: u8 = 2;
/// TLS handshake under way (the request goes once it is established).
const HANDSHAKE: u8 = 3;

/// One connection: see the module doc for the budget.
struct Conn {
    /// A plain std socket (4 bytes), registered through its fd: mio's own stream
    /// type carries extra bookkeeping in debug builds.
    sock: TcpStream,
    /// Global connection number minus the plan offset; unique in this process, so it
    /// also tells deadline-queue entries which occupant of a slot they belong to.
    local: u32,
    phase: u8,
    scan: Scanner,
    /// TLS targets only; boxed so plain connections pay 8 bytes.
    tls: Option<Box<ClientSession>>,
}

pub struct Engine<'a> {
    plan: &'a Plan,
    poll: Poll,
    slab: Vec<Option<Conn>>,
    free: Vec<u32>,
    /// (slot, local number, deadline) of connections started, in start order.
    pending: VecDeque<(u32, u32, Instant)>,
    tally: Tally,
    events: Events,
    scratch: Vec<u8>,
    req: Vec<u8>,
    /// TLS: ciphertext to write, plaintext read (shared, never per connection).
    tls_out: Vec<u8>,
    plain: Vec<u8>,
    mask_seed: u32,
    /// `--reconnect` only: resume state per connection number (empty otherwise).
    tracks: Vec<Track>,
    /// Connection numbers waiting to reconnect, by when.
    waiting: BinaryHeap<Reverse<(Instant, u32)>>,
    /// False once the run closes: nothing is reconnected any more.
    reconnecting: bool,
}

impl<'a> Engine<'a> {
    pub fn new(plan: &'a Plan) -> io::Result<Self> {
        Ok(Engine {
            plan,
            poll: Poll::new()?,
            // Reserved up front: pages are touched only as slots fill, so RSS still
            // measures what connections use, and no doubling copy happens mid-ramp.
            slab: Vec::with_capacity(plan.count as usize),
            free: Vec::new(),
            pending: VecDeque::new(),
            tally: Tally::new(),
            events: Events::with_capacity(1024),
            scratch: vec![0; SCRATCH],
            req: Vec::with_capacity(512),
            tls_out: Vec::new(),
            plain: Vec::new(),
            mask_seed: 0x9e37_79b9,
            tracks: if plan.reconnect {
                vec![Track::default(); plan.count as usize]
            } else {
                Vec::new()
            },
            waiting: BinaryHeap::new(),
            reconnecting: plan.reconnect,
        })
    }

    /// Run the plan to its end; `on_sample` gets one [`Sample`] per second.
    pub fn run(mut self, stop: &AtomicBool, on_sample: &mut dyn FnMut(Sample)) -> ProcSummary {
        lifecycle::run(self.plan, &mut self, stop, on_sample)
    }

    /// Start connect number `offset + local`; failures are counted, never returned.
    fn connect(&mut self, local: u64) {
        let retry = self.tracks.get(local as usize).is_some_and(|t| t.retry);
        if !retry {
            self.tally.counts.attempted += 1;
        }
        let plan = self.plan;
        let g = plan.offset + local;
        let target = &plan.targets[(g % plan.targets.len() as u64) as usize];
        let source = (!plan.sources.is_empty())
            .then(|| plan.sources[(g % plan.sources.len() as u64) as usize]);
        let tls = match (&plan.tls, target.tls) {
            (Some(config), true) => {
                // make_plan checked the name, so a session can always be made.
                let session = tls::server_name(&target.server_name)
                    .ok()
                    .and_then(|name| ClientSession::new(config.clone(), name).ok());
                match session {
                    Some(s) => Some(Box::new(s)),
                    None => return self.attempt_failed(local as u32, |f| f.handshake += 1),
                }
            }
            _ => None,
        };
        let sock = match open_socket(target.addr, source) {
            Ok(s) => s,
            Err(e) => return self.attempt_failed(local as u32, |f| f.count_io(&e)),
        };
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slab.push(None);
                (self.slab.len() - 1) as u32
            }
        };
        let fd = sock.as_raw_fd();
        if plan.latency_at == LatencyAt::Socket {
            if let Err(e) = stamp::enable(fd) {
                return self.attempt_failed(local as u32, |f| f.count_io(&e));
            }
        }
        if let Err(e) = self.poll.registry().register(
            &mut SourceFd(&fd),
            Token(slot as usize),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            self.free.push(slot);
            return self.attempt_failed(local as u32, |f| f.count_io(&e));
        }
        let mut scan = Scanner::new(0);
        if plan.rooms.is_some() || plan.transport == Transport::Pusher {
            scan.stamped_only();
        }
        if let Some(track) = self.tracks.get_mut(local as usize) {
            track.connecting();
            scan.track();
        }
        self.slab[slot as usize] = Some(Conn {
            sock,
            local: local as u32,
            phase: CONNECTING,
            scan,
            tls,
        });
        self.pending
            .push_back((slot, local as u32, Instant::now() + plan.connect_timeout));
        self.tally.inflight += 1;
    }

    /// `closed`: the event said the peer's FIN came (see [`Engine::read`]).
    fn handle_event(&mut self, slot: usize, writable: bool, readable: bool, closed: bool) {
        let Some(Some(conn)) = self.slab.get(slot) else {
            return;
        };
        if conn.phase == CONNECTING && writable {
            match conn.sock.take_error() {
                Ok(Some(e)) | Err(e) => return self.fail(slot, Some(e)),
                Ok(None) => {}
            }
            match conn.sock.peer_addr() {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
                Err(e) => return self.fail(slot, Some(e)),
            }
            if let Some(t) = self.slab[slot].as_mut().and_then(|c| c.tls.as_mut()) {
                // TLS first: the ClientHello; the request follows the handshake.
                self.tls_out.clear();
                let sent = t
                    .poll_output(&mut self.tls_out)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e));
                let conn = self.slab[slot].as_mut().expect("occupied slot");
                conn.phase = HANDSHAKE;
                if let Err(e) = sent.and_then(|_| write_once(&mut &conn.sock, &self.tls_out)) {
                    return self.fail(slot, Some(e));
                }
            } else if let Err(e) = self.send_request(slot) {
                return self.fail(slot, Some(e));
            }
        }
        if readable || closed {
            self.read(slot, closed);
        }
    }

    /// Write the request for this connection (fits an empty socket buffer at once).
    fn send_request(&mut self, slot: usize) -> io::Result<()> {
        let plan = self.plan;
        // The caller checked the slot is occupied.
        let conn = self.slab[slot].as_mut().expect("occupied slot");
        let g = plan.offset + u64::from(conn.local);
        let since = match self.tracks.get(conn.local as usize) {
            Some(track) => Some(track.pos),
            None => (plan.transport == Transport::Poll).then(|| Since {
                epoch: None,
                seq: conn.scan.last(),
            }),
        };
        build_request(
            &mut self.req,
            plan.transport,
            &plan.target(g).host,
            |out| plan.path(g, out),
            since,
            &plan.headers,
        );
        if conn.phase != OPEN {
            conn.phase = AWAIT_HEAD;
        }
        send(
            &conn.sock,
            conn.tls.as_deref_mut(),
            &self.req,
            &mut self.tls_out,
        )
    }
}

impl Backend for Engine<'_> {
    fn start(&mut self, local: u64) {
        self.connect(local);
    }

    fn turn(&mut self, wait: Duration) -> io::Result<()> {
        let mut events = std::mem::replace(&mut self.events, Events::with_capacity(0));
        let r = self.poll.poll(&mut events, Some(wait));
        if r.is_ok() {
            for ev in events.iter() {
                self.handle_event(
                    ev.token().0,
                    ev.is_writable(),
                    ev.is_readable(),
                    ev.is_read_closed(),
                );
            }
        }
        self.events = events;
        r
    }

    fn expire(&mut self, now: Instant) {
        Engine::expire(self, now);
        self.reconnect_due(now);
    }

    fn stop_reconnects(&mut self) {
        self.reconnecting = false;
        self.waiting.clear();
    }

    fn reconnects_waiting(&self) -> usize {
        self.waiting.len()
    }

    fn drop_pending(&mut self) {
        Engine::drop_pending(self);
    }

    fn close_some(&mut self, n: u64, cursor: usize) -> usize {
        Engine::close_some(self, n, cursor)
    }

    fn with_tally<R>(&mut self, f: impl FnOnce(&mut Tally) -> R) -> R {
        f(&mut self.tally)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_entry_fits_the_budget() {
        // 64 bytes of slab per connection; the rest of the 256 B budget is the slab
        // free list and allocator slack (epoll items and sockets are kernel memory).
        // A TLS connection adds its boxed session (~232 B) once established.
        assert!(
            std::mem::size_of::<Option<Conn>>() <= 64,
            "{}",
            std::mem::size_of::<Option<Conn>>()
        );
    }
}
