//! flood's event loop: one thread, one mio poll, every connection of this process.
//!
//! Memory budget (≤ 256 B per open idle connection, measured by RSS): a connection is a
//! 56-byte slab entry (socket fd, connection number, phase, [`Scanner`]); reads
//! go into one shared scratch buffer; requests are built in one shared buffer. Only
//! connections still waiting for their response head also sit in a deadline queue.
//! There is no task, channel, timer or buffer per connection.
//!
//! Not here: argument parsing, child processes, printing (see `flood/mod.rs`).

use super::scan::{Event, Scanner, Transport};
use super::stats::{hist_pairs, new_hist, FailCounts, ProcSummary, Sample};
use super::target::{ip, user_of, Target};
use crate::sys;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use socket2::{Domain, Socket, Type};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The shared read buffer: one per process, never per connection.
const SCRATCH: usize = 64 * 1024;
/// With `--rate 0`, connects started per loop turn (keeps the loop responsive).
const BURST: u32 = 1024;
/// `IP_BIND_ADDRESS_NO_PORT` (linux/in.h): choose the port at connect time, so each
/// source address gets a full port range per destination rather than one overall.
const IP_BIND_ADDRESS_NO_PORT: libc::c_int = 24;

/// How to close when the hold ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CloseMode {
    /// Close every connection at once (a mass disconnect).
    All,
    /// Close evenly over --close-secs.
    Gradual,
}

/// Everything one process needs to run its share.
#[derive(Clone, Debug)]
pub struct Plan {
    pub targets: Vec<Target>,
    pub transport: Transport,
    pub sources: Vec<Ipv4Addr>,
    pub users: Option<(u64, u64)>,
    pub first_user: u64,
    /// This process's connections are global numbers `offset .. offset + count`.
    pub offset: u64,
    pub count: u64,
    /// Connects per second; 0 = as fast as possible.
    pub rate: f64,
    pub hold: Option<Duration>,
    pub close: CloseMode,
    pub close_secs: f64,
    pub max_time: Duration,
    pub connect_timeout: Duration,
    pub max_inflight: usize,
    /// Extra request header lines ("Name: value").
    pub headers: Vec<String>,
}

const CONNECTING: u8 = 0;
const AWAIT_HEAD: u8 = 1;
const OPEN: u8 = 2;

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
}

/// Running totals of this process.
#[derive(Default)]
struct Counts {
    attempted: u64,
    opened: u64,
    open: u64,
    peak_open: u64,
    closed: u64,
    messages: u64,
    bytes: u64,
    fail: FailCounts,
}

pub struct Engine<'a> {
    plan: &'a Plan,
    poll: Poll,
    slab: Vec<Option<Conn>>,
    free: Vec<u32>,
    /// (slot, local number, deadline) of connections started, in start order.
    pending: VecDeque<(u32, u32, Instant)>,
    inflight: usize,
    counts: Counts,
    hist_tick: hdrhistogram::Histogram<u64>,
    hist_all: hdrhistogram::Histogram<u64>,
    scratch: Vec<u8>,
    req: Vec<u8>,
    mask_seed: u32,
    start: Instant,
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
            inflight: 0,
            counts: Counts::default(),
            hist_tick: new_hist(),
            hist_all: new_hist(),
            scratch: vec![0; SCRATCH],
            req: Vec::with_capacity(512),
            mask_seed: 0x9e37_79b9,
            start: Instant::now(),
        })
    }

    /// Run the plan to its end; `on_sample` gets one [`Sample`] per second.
    pub fn run(mut self, stop: &AtomicBool, on_sample: &mut dyn FnMut(Sample)) -> ProcSummary {
        let plan = self.plan;
        let mut events = Events::with_capacity(1024);
        let mut cpu = sys::CpuMeter::new();
        let rss_base = sys::rss_bytes();
        let mut sum = ProcSummary {
            rss_base,
            rss_at_peak: rss_base,
            ..Default::default()
        };
        let mut next: u64 = 0;
        let mut tokens = 1.0f64;
        let mut last_turn = Instant::now();
        let mut next_tick = self.start + Duration::from_secs(1);
        let mut hold_from: Option<Instant> = None;
        let mut closing: Option<(Instant, u64, usize)> = None; // (start, open then, cursor)
        let mut first_connect: Option<Instant> = None;
        let mut last_open = self.start;
        loop {
            let now = Instant::now();
            let stopping = stop.load(Ordering::Relaxed) || sys::interrupted();
            if closing.is_none() && (stopping || now - self.start >= plan.max_time) {
                // An interrupt closes at once: the user wants the summary now.
                let mode = if stopping { CloseMode::All } else { plan.close };
                closing = Some((now, self.counts.open, 0));
                next = plan.count;
                self.drop_pending();
                if mode == CloseMode::All {
                    self.close_all();
                }
            }
            // Ramp with a token bucket.
            if closing.is_none() && next < plan.count {
                let dt = now.duration_since(last_turn).as_secs_f64();
                let budget = if plan.rate > 0.0 {
                    tokens = (tokens + plan.rate * dt).min((plan.rate / 20.0).max(1.0));
                    tokens as u32
                } else {
                    BURST
                };
                let mut started = 0;
                while started < budget && next < plan.count && self.inflight < plan.max_inflight {
                    first_connect.get_or_insert(now);
                    self.connect(next);
                    next += 1;
                    started += 1;
                }
                if plan.rate > 0.0 {
                    tokens -= f64::from(started);
                }
            }
            last_turn = now;
            let ramp_done = next >= plan.count && self.inflight == 0;
            if ramp_done && closing.is_none() {
                let from = *hold_from.get_or_insert(now);
                let hold_over = plan.hold.is_some_and(|h| now - from >= h);
                if hold_over || self.counts.open == 0 {
                    closing = Some((now, self.counts.open, 0));
                    if plan.close == CloseMode::All || self.counts.open == 0 {
                        self.close_all();
                    }
                }
            }
            if let Some((since, open_then, cursor)) = closing.as_mut() {
                if plan.close == CloseMode::Gradual && self.counts.open > 0 {
                    let frac = (now.duration_since(*since).as_secs_f64()
                        / plan.close_secs.max(0.001))
                    .min(1.0);
                    let want_closed = (*open_then as f64 * frac).ceil() as u64;
                    let closed_so_far = open_then.saturating_sub(self.counts.open);
                    *cursor = self.close_some(want_closed.saturating_sub(closed_so_far), *cursor);
                }
                if self.counts.open == 0 && self.inflight == 0 {
                    break;
                }
            }
            // Sleep until the next token, tick, or close step; never long.
            let wait =
                if closing.is_some() || (next < plan.count && self.inflight < plan.max_inflight) {
                    Duration::from_millis(2)
                } else {
                    next_tick
                        .saturating_duration_since(now)
                        .min(Duration::from_millis(50))
                };
            if let Err(e) = self.poll.poll(&mut events, Some(wait)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    tracing::error!("flood poll failed: {e}");
                    break;
                }
            }
            let opened_before = self.counts.opened;
            for ev in events.iter() {
                self.handle_event(
                    ev.token().0,
                    ev.is_writable(),
                    ev.is_readable() || ev.is_read_closed(),
                );
            }
            if self.counts.opened > opened_before {
                last_open = Instant::now();
            }
            self.expire(Instant::now());
            if Instant::now() >= next_tick {
                next_tick += Duration::from_secs(1);
                let s = self.sample(&mut cpu);
                if s.open >= sum.open_at_rss_peak && s.open > 0 {
                    sum.open_at_rss_peak = s.open;
                    sum.rss_at_peak = s.rss;
                }
                on_sample(s);
            }
        }
        let last = self.sample(&mut cpu);
        on_sample(last);
        let c = &self.counts;
        sum.attempted = c.attempted;
        sum.opened = c.opened;
        sum.peak_open = c.peak_open;
        sum.failed = c.fail.total();
        sum.fail = c.fail;
        sum.closed = c.closed;
        sum.messages = c.messages;
        sum.bytes = c.bytes;
        sum.first_connect_s = first_connect.map_or(0.0, |t| (t - self.start).as_secs_f64());
        sum.last_open_s = (last_open - self.start).as_secs_f64();
        sum.elapsed_s = self.start.elapsed().as_secs_f64();
        sum.hist = hist_pairs(&self.hist_all);
        sum
    }

    fn sample(&mut self, cpu: &mut sys::CpuMeter) -> Sample {
        let (u, s) = cpu.sample();
        let c = &self.counts;
        let out = Sample {
            t: self.start.elapsed().as_secs_f64(),
            attempted: c.attempted,
            open: c.open,
            failed: c.fail.total(),
            closed: c.closed,
            messages: c.messages,
            bytes: c.bytes,
            rss: sys::rss_bytes(),
            cpu_user: u,
            cpu_sys: s,
            fail: c.fail,
            hist: hist_pairs(&self.hist_tick),
        };
        self.hist_tick.reset();
        out
    }

    /// Start connect number `offset + local`; failures are counted, never returned.
    fn connect(&mut self, local: u64) {
        self.counts.attempted += 1;
        let plan = self.plan;
        let g = plan.offset + local;
        let target = &plan.targets[(g % plan.targets.len() as u64) as usize];
        let source = (!plan.sources.is_empty())
            .then(|| plan.sources[(g % plan.sources.len() as u64) as usize]);
        let sock = match open_socket(target.addr, source) {
            Ok(s) => s,
            Err(e) => return self.counts.fail.count_io(&e),
        };
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slab.push(None);
                (self.slab.len() - 1) as u32
            }
        };
        let fd = sock.as_raw_fd();
        if let Err(e) = self.poll.registry().register(
            &mut SourceFd(&fd),
            Token(slot as usize),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            self.free.push(slot);
            return self.counts.fail.count_io(&e);
        }
        self.slab[slot as usize] = Some(Conn {
            sock,
            local: local as u32,
            phase: CONNECTING,
            scan: Scanner::new(0),
        });
        self.pending
            .push_back((slot, local as u32, Instant::now() + plan.connect_timeout));
        self.inflight += 1;
    }

    fn handle_event(&mut self, slot: usize, writable: bool, readable: bool) {
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
            if let Err(e) = self.send_request(slot) {
                return self.fail(slot, Some(e));
            }
        }
        if readable {
            self.read(slot);
        }
    }

    /// Write the request for this connection (fits an empty socket buffer at once).
    fn send_request(&mut self, slot: usize) -> io::Result<()> {
        let plan = self.plan;
        // The caller checked the slot is occupied.
        let conn = self.slab[slot].as_mut().expect("occupied slot");
        let g = plan.offset + u64::from(conn.local);
        let target = &plan.targets[(g % plan.targets.len() as u64) as usize];
        let user = user_of(g, plan.users, plan.first_user);
        build_request(
            &mut self.req,
            plan.transport,
            target,
            user,
            conn.scan.last(),
            &plan.headers,
        );
        conn.phase = AWAIT_HEAD.max(conn.phase);
        let n = conn.sock.write(&self.req)?;
        if n != self.req.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "request did not fit the socket buffer",
            ));
        }
        Ok(())
    }

    fn read(&mut self, slot: usize) {
        let transport = self.plan.transport;
        loop {
            let Some(Some(conn)) = self.slab.get_mut(slot) else {
                return;
            };
            if conn.phase == CONNECTING {
                return;
            }
            let n = match conn.sock.read(&mut self.scratch) {
                Ok(0) => return self.end(slot, None),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return self.end(slot, Some(e)),
            };
            self.counts.bytes += n as u64;
            let now_us = sys::unix_micros();
            let (counts, hist_tick, hist_all) =
                (&mut self.counts, &mut self.hist_tick, &mut self.hist_all);
            let mut head: Option<u16> = None;
            let (mut end, mut bad, mut body_done) = (false, false, false);
            let (sock, seed) = (&conn.sock, &mut self.mask_seed);
            conn.scan
                .handle_bytes(transport, &self.scratch[..n], &mut |e| match e {
                    Event::Head(s) => head = Some(s),
                    Event::Message => counts.messages += 1,
                    Event::Stamp(ts) => {
                        let lat = now_us.saturating_sub(ts).max(1);
                        hist_tick.saturating_record(lat);
                        hist_all.saturating_record(lat);
                    }
                    Event::Ping(p) => {
                        // Answer at once: a pong is tiny and the socket buffer is nearly empty.
                        *seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                        let _ = (&*sock).write(&ws_frame(0xA, p, *seed));
                    }
                    Event::End => end = true,
                    Event::BodyDone { .. } => body_done = true,
                    Event::Malformed => bad = true,
                });
            if let Some(status) = head {
                let good = if transport == Transport::Ws {
                    status == 101
                } else {
                    status == 200
                };
                if !good {
                    return self.fail_status(slot);
                }
                if conn.phase == AWAIT_HEAD {
                    conn.phase = OPEN;
                    counts.open += 1;
                    counts.opened += 1;
                    counts.peak_open = counts.peak_open.max(counts.open);
                    self.inflight -= 1;
                }
            }
            if bad {
                return self.fail_status(slot);
            }
            if end {
                if transport == Transport::Ws {
                    let _ = conn.sock.write(&ws_frame(0x8, &[], self.mask_seed));
                }
                return self.end(slot, None);
            }
            if body_done {
                conn.scan.next_response();
                if let Err(e) = self.send_request(slot) {
                    return self.end(slot, Some(e));
                }
            }
        }
    }

    /// Counts an open connection as closed and removes it; false if it never opened.
    fn close_if_open(&mut self, slot: usize) -> bool {
        let phase = self.slab[slot].as_ref().map_or(OPEN, |c| c.phase);
        if phase != OPEN {
            return false;
        }
        self.remove(slot);
        self.counts.open -= 1;
        self.counts.closed += 1;
        true
    }

    /// The peer ended the connection (or it broke).
    fn end(&mut self, slot: usize, err: Option<io::Error>) {
        if !self.close_if_open(slot) {
            match err {
                Some(e) => self.fail(slot, Some(e)),
                None => {
                    self.counts.fail.closed_early += 1;
                    self.remove_pending(slot);
                }
            }
        }
    }

    fn fail_status(&mut self, slot: usize) {
        // Bad framing after a good head: the connection was open, now closed.
        if !self.close_if_open(slot) {
            self.counts.fail.bad_status += 1;
            self.remove_pending(slot);
        }
    }

    /// A connection that never opened failed.
    fn fail(&mut self, slot: usize, err: Option<io::Error>) {
        match err {
            Some(e) => self.counts.fail.count_io(&e),
            None => self.counts.fail.timeout += 1,
        }
        self.remove_pending(slot);
    }

    fn remove_pending(&mut self, slot: usize) {
        self.inflight -= 1;
        self.remove(slot);
    }

    fn remove(&mut self, slot: usize) {
        if let Some(conn) = self.slab[slot].take() {
            let _ = self
                .poll
                .registry()
                .deregister(&mut SourceFd(&conn.sock.as_raw_fd()));
            self.free.push(slot as u32);
        }
    }

    /// Fail connections whose response head did not come in time.
    fn expire(&mut self, now: Instant) {
        while let Some(&(slot, local, deadline)) = self.pending.front() {
            if deadline > now {
                break;
            }
            self.pending.pop_front();
            if self.pending.is_empty() && self.pending.capacity() > 4096 {
                // The ramp is over: give the queue's memory back so RSS shows connections.
                self.pending = VecDeque::new();
            }
            let waiting =
                matches!(&self.slab[slot as usize], Some(c) if c.local == local && c.phase != OPEN);
            if waiting {
                self.fail(slot as usize, None);
            }
        }
    }

    /// The run is ending: connections still waiting for a response head are cancelled.
    fn drop_pending(&mut self) {
        while let Some((slot, local, _)) = self.pending.pop_front() {
            let waiting =
                matches!(&self.slab[slot as usize], Some(c) if c.local == local && c.phase != OPEN);
            if waiting {
                // Not the server's fault: the run ended while this one was in flight.
                self.counts.fail.cancelled += 1;
                self.remove_pending(slot as usize);
            }
        }
    }

    fn close_all(&mut self) {
        self.close_some(u64::MAX, 0);
    }

    /// Close up to `n` open connections scanning from `cursor`; returns the new cursor.
    fn close_some(&mut self, n: u64, mut cursor: usize) -> usize {
        let mut done = 0;
        while done < n && cursor < self.slab.len() {
            if matches!(&self.slab[cursor], Some(c) if c.phase == OPEN) {
                self.remove(cursor);
                self.counts.open -= 1;
                self.counts.closed += 1;
                done += 1;
            }
            cursor += 1;
        }
        cursor
    }
}

/// A non-blocking socket bound to `source` (if any), with its connect started.
fn open_socket(addr: SocketAddr, source: Option<Ipv4Addr>) -> io::Result<std::net::TcpStream> {
    let sock = Socket::new(Domain::IPV4, Type::STREAM.nonblocking().cloexec(), None)?;
    sock.set_nodelay(true)?;
    if let Some(src) = source {
        let one: libc::c_int = 1;
        // SAFETY: setsockopt reads an int we own; an unknown option only returns an error.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_IP,
                IP_BIND_ADDRESS_NO_PORT,
                &one as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        sock.bind(&SocketAddr::new(ip(src), 0).into())?;
    }
    match sock.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(sock.into())
}

/// The request head for one connection.
pub fn build_request(
    out: &mut Vec<u8>,
    t: Transport,
    target: &Target,
    user: u64,
    since: u64,
    headers: &[String],
) {
    out.clear();
    out.extend_from_slice(b"GET ");
    target.path(user, out);
    if t == Transport::Poll {
        let sep = if out.contains(&b'?') { '&' } else { '?' };
        out.extend_from_slice(format!("{sep}since={since}").as_bytes());
    }
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(target.host.as_bytes());
    out.extend_from_slice(b"\r\nUser-Agent: myriad-flood\r\n");
    out.extend_from_slice(match t {
        Transport::Stream => b"Accept: */*\r\n".as_slice(),
        Transport::Sse => b"Accept: text/event-stream\r\nCache-Control: no-cache\r\n",
        Transport::Ws => {
            b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        }
        Transport::Poll => b"Accept: application/json\r\nConnection: keep-alive\r\n",
    });
    for h in headers {
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// A masked client frame (RFC 6455 §5.3: clients always mask). `payload` ≤ 125 bytes.
fn ws_frame(opcode: u8, payload: &[u8], key: u32) -> Vec<u8> {
    let len = payload.len().min(125);
    let mask = key.to_be_bytes();
    let mut f = Vec::with_capacity(6 + len);
    f.push(0x80 | opcode);
    f.push(0x80 | len as u8);
    f.extend_from_slice(&mask);
    f.extend(
        payload[..len]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ mask[i % 4]),
    );
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_entry_fits_the_budget() {
        // 56 bytes of slab per connection; the rest of the 256 B budget is the slab
        // free list and allocator slack (epoll items and sockets are kernel memory).
        assert!(
            std::mem::size_of::<Option<Conn>>() <= 56,
            "{}",
            std::mem::size_of::<Option<Conn>>()
        );
    }

    #[test]
    fn requests_per_transport() {
        let t = Target::parse("http://127.0.0.1:1/poll/%d").unwrap();
        let mut out = Vec::new();
        build_request(&mut out, Transport::Poll, &t, 9, 4, &["X-A: b".into()]);
        let s = String::from_utf8(out.clone()).unwrap();
        assert!(
            s.starts_with("GET /poll/9?since=4 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n"),
            "{s}"
        );
        assert!(s.ends_with("X-A: b\r\n\r\n"));
        build_request(&mut out, Transport::Ws, &t, 9, 0, &[]);
        assert!(String::from_utf8(out)
            .unwrap()
            .contains("Upgrade: websocket"));
    }

    #[test]
    fn client_frames_are_masked() {
        let f = ws_frame(0xA, b"abc", 0x01020304);
        assert_eq!(&f[..2], &[0x8A, 0x83]);
        let unmasked: Vec<u8> = f[6..]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ f[2 + i % 4])
            .collect();
        assert_eq!(unmasked, b"abc");
    }
}
