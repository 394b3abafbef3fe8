//! flood over HTTP/2 (`--h2`): `--connections` streams (stream, SSE or long-poll),
//! `--streams-per-connection` of them multiplexed on each TCP connection — h2c (prior
//! knowledge) for `http://`, TLS with ALPN `h2` for `https://`.
//!
//! Why tokio here, when the rest of flood is a mio loop: HTTP/2 is a stateful
//! connection protocol (HPACK tables, SETTINGS, per-stream and per-connection flow
//! control windows, PING), and its well-kept Rust implementation, the `h2` crate, is
//! async over tokio's `AsyncRead`/`AsyncWrite`. Driving it from the mio loop would
//! mean polling it with a hand-made waker through in-memory pipes — an executor in
//! miniature. That is a real option for the gateway, where every byte per connection
//! counts (crates/tls/README.md weighs it); for a load generator the well-trodden
//! path wins: a current-thread tokio runtime on this same thread, stepped by the shared
//! run loop (`lifecycle`): [`Backend::turn`] runs the runtime for the loop's wait. No
//! extra threads, so one flood process still uses one core. TLS is tokio-rustls.
//!
//! Each stream is a task: it sends its GET, waits for the head, then feeds the body's
//! DATA to the same response [`Scanner`] as HTTP/1.1 (after a synthetic head, so the
//! body is scanned raw: SSE events by their lines, stream messages by their `ts=`
//! stamps, long-poll messages by their `"seq":` keys), returning flow-control credit
//! as it reads. A long-poll stream asks again with `since` when its response ends.
//! Closing a stream aborts its task, which resets the stream (RST_STREAM); connections
//! end with the run.

use super::lifecycle::{self, Backend, Tally};
use super::plan::Plan;
use super::request::open_socket;
use super::scan::{Event, Scanner, Transport};
use super::stats::{ProcSummary, Sample};
use super::target::Target;
use anyhow::Context;
use bytes::Bytes;
use host::sys;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, LocalSet};

// Stream states (0: not started yet).
/// Started, no response head yet (counted in-flight).
const WAITING: u8 = 1;
const OPEN: u8 = 2;
const DONE: u8 = 3;

/// Each stream's receive window: a burst of messages before credit must come back.
const STREAM_WINDOW: u32 = 256 * 1024;
/// The connection's receive window at most (`STREAM_WINDOW` × streams below it).
const MAX_CONN_WINDOW: u32 = 16 << 20;

/// One stream's bookkeeping (16 bytes; the task itself lives in the runtime).
#[derive(Default)]
struct Slot {
    state: u8,
    task: Option<AbortHandle>,
}

/// What tasks and the run loop share (one thread: `Rc<RefCell<_>>`).
struct Run {
    tally: Tally,
    streams: Vec<Slot>,
}

type RunRef = Rc<RefCell<Run>>;

/// Why an attempt failed before its response head.
#[derive(Clone, Copy)]
enum Fail {
    Io(i32),
    Handshake,
    Status,
    Reset,
}

fn fail(shared: &RunRef, local: u64, why: Fail) {
    let mut s = shared.borrow_mut();
    let Run { tally, streams } = &mut *s;
    let slot = &mut streams[local as usize];
    if slot.state != WAITING {
        return;
    }
    slot.state = DONE;
    slot.task = None;
    tally.inflight -= 1;
    let f = &mut tally.counts.fail;
    match why {
        Fail::Io(code) => f.count_io(&io::Error::from_raw_os_error(code)),
        Fail::Handshake => f.handshake += 1,
        Fail::Status => f.bad_status += 1,
        Fail::Reset => f.reset += 1,
    }
}

/// A stream that was open ended (server end of stream, reset, connection loss).
fn ended(shared: &RunRef, local: u64, why: Fail) {
    let mut s = shared.borrow_mut();
    let state = s.streams[local as usize].state;
    if state == OPEN {
        s.streams[local as usize] = Slot {
            state: DONE,
            task: None,
        };
        s.tally.closed();
    } else if state == WAITING {
        drop(s);
        fail(shared, local, why);
    }
}

struct H2<'a> {
    plan: &'a Plan,
    /// The same plan, shared by tasks (8 bytes each rather than a copy).
    shared_plan: Rc<Plan>,
    rt: tokio::runtime::Runtime,
    local: LocalSet,
    shared: RunRef,
    /// Per TCP connection: the channel that hands it streams to open.
    conns: Vec<Option<mpsc::UnboundedSender<u64>>>,
    /// (stream, deadline) of streams started, in start order.
    pending: VecDeque<(u64, Instant)>,
    headers: Rc<Vec<(http::HeaderName, http::HeaderValue)>>,
}

/// Run the plan over HTTP/2 in this process.
pub fn run(
    plan: &Plan,
    stop: &AtomicBool,
    on_sample: &mut dyn FnMut(Sample),
) -> anyhow::Result<ProcSummary> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let headers = plan
        .headers
        .iter()
        .map(|h| {
            let (k, v) = h
                .split_once(':')
                .with_context(|| format!("--header {h:?}: expected \"Name: value\""))?;
            Ok((
                http::HeaderName::from_bytes(k.trim().as_bytes())
                    .with_context(|| format!("--header {h:?}: bad name"))?,
                http::HeaderValue::from_str(v.trim())
                    .with_context(|| format!("--header {h:?}: bad value"))?,
            ))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let k = u64::from(plan.streams_per_conn.max(1));
    let mut b = H2 {
        plan,
        shared_plan: Rc::new(plan.clone()),
        rt,
        local: LocalSet::new(),
        shared: Rc::new(RefCell::new(Run {
            tally: Tally::new(),
            streams: Vec::with_capacity(plan.count as usize),
        })),
        conns: Vec::with_capacity(plan.count.div_ceil(k) as usize),
        pending: VecDeque::new(),
        headers: Rc::new(headers),
    };
    let sum = lifecycle::run(plan, &mut b, stop, on_sample);
    // Dropping the runtime with its tasks closes every connection.
    Ok(sum)
}

impl Backend for H2<'_> {
    fn start(&mut self, local: u64) {
        let plan = self.plan;
        {
            let mut s = self.shared.borrow_mut();
            s.tally.counts.attempted += 1;
            s.tally.inflight += 1;
            if s.streams.len() <= local as usize {
                s.streams.resize_with(local as usize + 1, Slot::default);
            }
            s.streams[local as usize].state = WAITING;
        }
        self.pending
            .push_back((local, Instant::now() + plan.connect_timeout));
        let ci = (local / u64::from(plan.streams_per_conn.max(1))) as usize;
        if self.conns.len() <= ci {
            self.conns.resize_with(ci + 1, || None);
        }
        // Tasks are created in the runtime's context (the LocalSet runs them in `turn`).
        let _rt = self.rt.enter();
        let tx = self.conns[ci].get_or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            let conn = Connection {
                plan: self.shared_plan.clone(),
                shared: self.shared.clone(),
                headers: self.headers.clone(),
                first: local,
            };
            // Spawned onto the LocalSet; it runs during the next `turn`.
            self.local.spawn_local(conn.run(rx));
            tx
        });
        let _ = tx.send(local);
    }

    fn turn(&mut self, wait: Duration) -> io::Result<()> {
        // The sleep is made inside the runtime (its timer needs the runtime's context).
        self.rt.block_on(
            self.local
                .run_until(async move { tokio::time::sleep(wait).await }),
        );
        Ok(())
    }

    fn expire(&mut self, now: Instant) {
        while let Some(&(local, deadline)) = self.pending.front() {
            if deadline > now {
                break;
            }
            self.pending.pop_front();
            let task = {
                let mut s = self.shared.borrow_mut();
                let slot = &mut s.streams[local as usize];
                if slot.state != WAITING {
                    continue;
                }
                slot.state = DONE;
                s.tally.inflight -= 1;
                s.tally.counts.fail.timeout += 1;
                s.streams[local as usize].task.take()
            };
            if let Some(t) = task {
                t.abort();
            }
        }
        if self.pending.is_empty() && self.pending.capacity() > 4096 {
            self.pending = VecDeque::new();
        }
    }

    fn drop_pending(&mut self) {
        while let Some((local, _)) = self.pending.pop_front() {
            let task = {
                let mut s = self.shared.borrow_mut();
                if s.streams[local as usize].state != WAITING {
                    continue;
                }
                s.streams[local as usize].state = DONE;
                s.tally.inflight -= 1;
                s.tally.counts.fail.cancelled += 1;
                s.streams[local as usize].task.take()
            };
            if let Some(t) = task {
                t.abort();
            }
        }
    }

    fn close_some(&mut self, n: u64, mut cursor: usize) -> usize {
        let mut done = 0;
        let mut s = self.shared.borrow_mut();
        while done < n && cursor < s.streams.len() {
            if s.streams[cursor].state == OPEN {
                if let Some(t) = s.streams[cursor].task.take() {
                    t.abort(); // drops the stream: RST_STREAM
                }
                s.streams[cursor].state = DONE;
                s.tally.closed();
                done += 1;
            }
            cursor += 1;
        }
        if s.tally.counts.open == 0 {
            // Everything is closed: let connections go (their tasks end with the run).
            drop(s);
            self.conns.clear();
        }
        cursor
    }

    fn with_tally<R>(&mut self, f: impl FnOnce(&mut Tally) -> R) -> R {
        f(&mut self.shared.borrow_mut().tally)
    }
}

/// One TCP connection: connect, TLS, HTTP/2 handshake, then a task per stream.
struct Connection {
    plan: Rc<Plan>,
    shared: RunRef,
    headers: Rc<Vec<(http::HeaderName, http::HeaderValue)>>,
    /// Its first stream decides target and source address.
    first: u64,
}

impl Connection {
    async fn run(self, mut rx: mpsc::UnboundedReceiver<u64>) {
        let plan = &self.plan;
        let g = plan.offset + self.first;
        let target = plan.targets[(g % plan.targets.len() as u64) as usize].clone();
        let source = (!plan.sources.is_empty())
            .then(|| plan.sources[(g % plan.sources.len() as u64) as usize]);
        let send = match self.establish(&target, source).await {
            Ok(s) => s,
            Err(why) => {
                // Every stream handed to this connection, now and later, fails.
                while let Some(local) = rx.recv().await {
                    fail(&self.shared, local, why);
                }
                return;
            }
        };
        let target = Rc::new(target);
        while let Some(local) = rx.recv().await {
            if self.shared.borrow().streams[local as usize].state != WAITING {
                continue; // timed out or cancelled while the connection was made
            }
            let stream = Stream {
                plan: self.plan.clone(),
                shared: self.shared.clone(),
                headers: self.headers.clone(),
                target: target.clone(),
                local,
            };
            let handle = tokio::task::spawn_local(stream.run(send.clone())).abort_handle();
            self.shared.borrow_mut().streams[local as usize].task = Some(handle);
        }
    }

    async fn establish(
        &self,
        target: &Target,
        source: Option<std::net::Ipv4Addr>,
    ) -> Result<h2::client::SendRequest<Bytes>, Fail> {
        let io_fail = |e: io::Error| Fail::Io(e.raw_os_error().unwrap_or(libc::EIO));
        let sock = open_socket(target.addr, source).map_err(io_fail)?;
        let tcp = tokio::net::TcpStream::from_std(sock).map_err(io_fail)?;
        tcp.writable().await.map_err(io_fail)?;
        if let Some(e) = tcp.take_error().map_err(io_fail)? {
            return Err(io_fail(e));
        }
        let mut builder = h2::client::Builder::new();
        // Room for a burst of messages per stream before credit must come back, and
        // the same for every stream of the connection at once (the crate's default
        // connection window, 64 KB, would be shared by all of them).
        let streams = self.plan.streams_per_conn.max(1);
        builder
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(
                STREAM_WINDOW.saturating_mul(streams).min(MAX_CONN_WINDOW),
            )
            // The crate closes a connection (GOAWAY ENHANCE_YOUR_CALM) once unread
            // DATA frames under 256 bytes add up to a budget of framing overhead, by
            // default half the connection window, at least 25,600 B: ~200 SSE events
            // waiting for their stream tasks. A broadcast to 50 streams of a
            // connection puts 50 small frames per message on it, so a burst of a few
            // messages closed connections whose client was reading (docs/protocol.md, Transports).
            // Flow control already bounds what a connection buffers; the budget guards
            // servers against small-frame floods, which a load generator does not need.
            .data_frame_budget(usize::MAX);
        let send = match (&self.plan.tls, target.tls) {
            (Some(config), true) => {
                let name = tls::server_name(&target.server_name).map_err(|_| Fail::Handshake)?;
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|_| Fail::Handshake)?;
                if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                    return Err(Fail::Handshake); // the server does not speak HTTP/2 here
                }
                let (send, conn) = builder.handshake(tls).await.map_err(|_| Fail::Handshake)?;
                tokio::task::spawn_local(async move {
                    let _ = conn.await;
                });
                send
            }
            _ => {
                let (send, conn) = builder.handshake(tcp).await.map_err(|_| Fail::Handshake)?;
                tokio::task::spawn_local(async move {
                    let _ = conn.await;
                });
                send
            }
        };
        Ok(send)
    }
}

/// One subscription stream.
struct Stream {
    plan: Rc<Plan>,
    shared: RunRef,
    headers: Rc<Vec<(http::HeaderName, http::HeaderValue)>>,
    target: Rc<Target>,
    local: u64,
}

impl Stream {
    async fn run(self, send: h2::client::SendRequest<Bytes>) {
        let why = match self.exchange(send).await {
            Ok(()) => Fail::Reset, // only used if it never opened
            Err(w) => w,
        };
        ended(&self.shared, self.local, why);
    }

    fn request(&self, since: u64) -> http::Request<()> {
        let plan = &self.plan;
        let mut path = Vec::new();
        plan.path(plan.offset + self.local, &mut path);
        let mut path = String::from_utf8_lossy(&path).into_owned();
        if plan.transport == Transport::Poll {
            let sep = if path.contains('?') { '&' } else { '?' };
            path.push_str(&format!("{sep}since={since}"));
        }
        let scheme = if self.target.tls { "https" } else { "http" };
        let accept = match plan.transport {
            Transport::Sse => "text/event-stream",
            Transport::Poll => "application/json",
            _ => "*/*",
        };
        let mut b = http::Request::builder()
            .uri(format!("{scheme}://{}{path}", self.target.host))
            .header("user-agent", "myriad-flood")
            .header("accept", accept);
        for (k, v) in self.headers.iter() {
            b = b.header(k, v);
        }
        // The URI and headers were checked (path from the URL, headers at start).
        b.body(()).unwrap_or_default()
    }

    async fn exchange(&self, send: h2::client::SendRequest<Bytes>) -> Result<(), Fail> {
        let t = self.plan.transport;
        let mut scan = Scanner::new(0);
        if self.plan.rooms.is_some() {
            scan.stamped_only();
        }
        loop {
            let mut ready = send.clone().ready().await.map_err(|_| Fail::Reset)?;
            let (resp, _) = ready
                .send_request(self.request(scan.last()), true)
                .map_err(|_| Fail::Reset)?;
            let resp = resp.await.map_err(|_| Fail::Reset)?;
            if resp.status() != http::StatusCode::OK {
                return Err(Fail::Status);
            }
            {
                let mut s = self.shared.borrow_mut();
                if s.streams[self.local as usize].state == WAITING {
                    s.streams[self.local as usize].state = OPEN;
                    s.tally.opened();
                }
            }
            // A head without framing: the scanner reads the body raw (module doc).
            scan.handle_bytes(t, b"HTTP/1.1 200 OK\r\n\r\n", &mut |_| {});
            let mut body = resp.into_body();
            while let Some(data) = body.data().await {
                let data = data.map_err(|_| Fail::Reset)?;
                let _ = body.flow_control().release_capacity(data.len());
                let now_us = sys::unix_micros();
                let mut s = self.shared.borrow_mut();
                let tally = &mut s.tally;
                tally.counts.bytes += data.len() as u64;
                scan.handle_bytes(t, &data, &mut |e| match e {
                    Event::Message => tally.counts.messages += 1,
                    Event::Stamp(ts) => tally.latency(now_us.saturating_sub(ts).max(1)),
                    _ => {}
                });
            }
            if t != Transport::Poll {
                return Ok(()); // the server ended the stream
            }
            scan.next_response();
        }
    }
}
