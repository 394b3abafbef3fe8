//! The sprites clients (issue 46; `myriad bench sprites`): the load shape of the
//! Node.js sprites server that held a million long-polls, where every client also
//! sends. Client `u` (users `1..=n`) holds a keep-alive long-poll `GET /poll/u` and,
//! on a second keep-alive connection of its own, throws a sprite every `send_every`
//! seconds (`POST /pub/<random other client>`, stamped `ts=<unix micros>`) with its
//! own JWT (HS256, `{"sub":"u","pub":["1-n"]}`): a client publish over HTTP, so the
//! server carries n / send_every publishes a second and their deliveries on top of
//! holding the polls.
//!
//! Tokio on one thread: two sockets and two small tasks per client. One process runs
//! the clients of users `first..=last` (throwing to any of the `n`), so that `2 n`
//! sockets can be spread over processes under the file limit (`sprites_child`); their
//! connections come from the given source addresses in turn (each has its own
//! ephemeral ports per destination).
//!
//! Not here: the child processes and their lines (`sprites_child`), the server, the
//! report (`myriad bench`), other transports (`flood`).

use crate::flood::stats::new_hist;
use anyhow::Context;
use hdrhistogram::Histogram;
use host::sys;
use rand::{Rng, SeedableRng};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Largest response a client reads (a poll answer holds a few sprites).
const MAX_RESPONSE: usize = 256 * 1024;
/// A request not answered within this is an error (a poll waits up to the server's
/// `--poll-timeout`, 30 s by default, so its own allowance is longer).
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
const POLL_TIMEOUT: Duration = Duration::from_secs(60);

/// What a sprites run is.
#[derive(Clone, Debug)]
pub struct SpritesArgs {
    pub addr: SocketAddr,
    /// Clients of the whole run, users `1..=clients`: the sprites' targets.
    pub clients: u64,
    /// This process's clients: users `first..=last`.
    pub first: u64,
    pub last: u64,
    /// Source addresses the connections bind to in turn (none: the kernel's choice).
    pub sources: Vec<Ipv4Addr>,
    /// The server's `--jwt-secret`: each client's token is signed with it.
    pub secret: String,
    /// Payload bytes (the stamp first).
    pub size: usize,
    /// Connects per second while opening (both connections of a client count).
    pub connect_rate: f64,
}

/// Counters the caller reads every second while the run goes on.
pub struct Counters {
    /// Long-polls logged in (their first request sent and the connection up).
    pub polling: AtomicU64,
    /// Sender connections open.
    pub senders: AtomicU64,
    /// Sprites thrown (requests written) and answered 200.
    pub sent: AtomicU64,
    pub published: AtomicU64,
    /// Answers other than 200 (429 over the rate, 403, 5xx) and failed connections.
    pub send_errors: AtomicU64,
    /// Sprites received by the polls, and polls that failed.
    pub received: AtomicU64,
    pub poll_errors: AtomicU64,
    /// Throw → receipt, microseconds, for every sprite received since the last take.
    pub latency: Mutex<Histogram<u64>>,
    /// While true, senders throw, one sprite every `every_us` each (set false to end
    /// a step: senders rest on their open connections); once `stop` is true, everyone
    /// ends. `step` counts the [`Counters::throw`] calls, so a new rate starts anew.
    pub throwing: AtomicBool,
    pub every_us: AtomicU64,
    pub step: AtomicU64,
    pub stop: AtomicBool,
    /// Wakes senders when a step starts or ends (no polling loop per client: at
    /// 100,000 clients that would be millions of wake-ups a second).
    wake: tokio::sync::Notify,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            polling: AtomicU64::new(0),
            senders: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            published: AtomicU64::new(0),
            send_errors: AtomicU64::new(0),
            received: AtomicU64::new(0),
            poll_errors: AtomicU64::new(0),
            latency: Mutex::new(new_hist()),
            throwing: AtomicBool::new(false),
            every_us: AtomicU64::new(5_000_000),
            step: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
        }
    }
}

impl Counters {
    /// Senders throw one sprite every `every` seconds each from now on (a step).
    pub fn throw(&self, every: f64) {
        let us = (every.max(0.001) * 1e6) as u64;
        self.every_us.store(us, Ordering::Relaxed);
        self.step.fetch_add(1, Ordering::Relaxed);
        self.throwing.store(true, Ordering::Relaxed);
        self.wake.notify_waiters();
    }

    /// Senders stop throwing and keep their connections (between steps).
    pub fn rest(&self) {
        self.throwing.store(false, Ordering::Relaxed);
        self.wake.notify_waiters();
    }

    /// The latency histogram since the last take.
    pub fn take_latency(&self) -> Histogram<u64> {
        let mut h = self.latency.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *h, new_hist())
    }

    /// Everyone ends: the clients' thread returns.
    pub fn end(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.wake.notify_waiters();
    }
}

/// Client `user`'s token: it may publish to every client.
pub fn token(secret: &str, user: u64, clients: u64) -> anyhow::Result<String> {
    let claims = serde_json::json!({"sub": user.to_string(), "pub": [format!("1-{clients}")]});
    let key = jsonwebtoken::EncodingKey::from_secret(secret.as_bytes());
    jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key)
        .context("signing a client token")
}

/// Runs clients `first..=last` on this thread until `counters.stop`: opens every poll
/// and sender (at `connect_rate`), then each sender throws while `counters.throwing`.
pub fn run(args: &SpritesArgs, counters: Arc<Counters>) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let pause = Duration::from_secs_f64(1.0 / args.connect_rate.max(1.0));
        for (i, user) in (args.first..=args.last).enumerate() {
            if counters.stop.load(Ordering::Relaxed) {
                break;
            }
            let token = Arc::<str>::from(token(&args.secret, user, args.clients)?);
            let source = source_of(&args.sources, i);
            let (a, c, t) = (args.clone(), counters.clone(), token.clone());
            tokio::task::spawn_local(async move { poll_loop(&a, source, user, &t, &c).await });
            tokio::time::sleep(pause).await;
            let source = source_of(&args.sources, i + 1);
            let (a, c) = (args.clone(), counters.clone());
            tokio::task::spawn_local(async move { send_loop(&a, source, user, &token, &c).await });
            tokio::time::sleep(pause).await;
        }
        while !counters.stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::Ok(())
    })
}

/// The source address of a process's `i`-th connection, if any are given.
fn source_of(sources: &[Ipv4Addr], i: usize) -> Option<Ipv4Addr> {
    (!sources.is_empty()).then(|| sources[i % sources.len()])
}

/// A connection to the server, from `source` when given.
async fn connect(addr: SocketAddr, source: Option<Ipv4Addr>) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    if let Some(ip) = source {
        socket.bind(SocketAddr::new(ip.into(), 0))?;
    }
    socket.connect(addr).await
}

/// One client's long-poll: keep-alive, each request from the last answer's `since`.
async fn poll_loop(
    args: &SpritesArgs,
    source: Option<Ipv4Addr>,
    user: u64,
    token: &str,
    c: &Counters,
) {
    let Ok(mut s) = connect(args.addr, source).await else {
        c.poll_errors.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let _ = s.set_nodelay(true);
    let mut buf = Vec::new();
    // `since=0` from the first poll: an empty answer of a user with no history yet
    // carries no `since`, and a poll without one waits for the next message only, so
    // a sprite arriving between that answer and the next poll would be missed;
    // `since=0` is answered from history at once (none is older than this run).
    let mut since = String::from("&since=0");
    let mut counted = false;
    while !c.stop.load(Ordering::Relaxed) {
        let request =
            format!("GET /poll/{user}?token={token}{since} HTTP/1.1\r\nHost: sprites\r\n\r\n");
        if s.write_all(request.as_bytes()).await.is_err() {
            break;
        }
        if !counted {
            counted = true;
            c.polling.fetch_add(1, Ordering::Relaxed);
        }
        let answer = tokio::time::timeout(POLL_TIMEOUT, read_response(&mut s, &mut buf)).await;
        let Ok(Ok((200, body))) = answer else {
            if !c.stop.load(Ordering::Relaxed) {
                c.poll_errors.fetch_add(1, Ordering::Relaxed);
            }
            break;
        };
        let now = sys::unix_micros();
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body) else {
            c.poll_errors.fetch_add(1, Ordering::Relaxed);
            break;
        };
        if let Some(messages) = v["messages"].as_array() {
            let mut h = c.latency.lock().unwrap_or_else(|e| e.into_inner());
            for m in messages {
                let stamp = m["data"].as_str().and_then(stamp_of);
                if let Some(ts) = stamp {
                    let _ = h.record(now.saturating_sub(ts).max(1));
                }
                c.received.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Some(next) = v["since"].as_str() {
            since = format!("&since={next}");
        }
    }
    if counted {
        c.polling.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One client's thrower: a keep-alive connection of its own; in each step one
/// sprite every `every_us` from a random phase, to a random other client.
async fn send_loop(
    args: &SpritesArgs,
    source: Option<Ipv4Addr>,
    user: u64,
    token: &str,
    c: &Counters,
) {
    let Ok(mut s) = connect(args.addr, source).await else {
        c.send_errors.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let _ = s.set_nodelay(true);
    let mut buf = Vec::new();
    // A first request puts the connection in keep-alive (a connection that never
    // sent a head is closed by the server's head timeout): `/healthz`, no credential.
    let hello = b"GET /healthz HTTP/1.1\r\nHost: sprites\r\n\r\n";
    let ready = match s.write_all(hello).await {
        Ok(()) => tokio::time::timeout(SEND_TIMEOUT, read_response(&mut s, &mut buf)).await,
        Err(_) => Ok(Err(anyhow::anyhow!("write failed"))),
    };
    if !matches!(ready, Ok(Ok((200, _)))) {
        c.send_errors.fetch_add(1, Ordering::Relaxed);
        return;
    }
    c.senders.fetch_add(1, Ordering::Relaxed);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(user);
    'steps: while !c.stop.load(Ordering::Relaxed) {
        loop {
            // Created before the check, so a step that starts in between still wakes it.
            let woken = c.wake.notified();
            if c.stop.load(Ordering::Relaxed) {
                break 'steps;
            }
            if c.throwing.load(Ordering::Relaxed) {
                break;
            }
            woken.await;
        }
        let step = c.step.load(Ordering::Relaxed);
        let every = Duration::from_micros(c.every_us.load(Ordering::Relaxed).max(1_000));
        let over = || {
            c.stop.load(Ordering::Relaxed)
                || !c.throwing.load(Ordering::Relaxed)
                || c.step.load(Ordering::Relaxed) != step
        };
        // From a random phase; a rest or a new step ends the wait at once (a sender
        // waiting out a long period would otherwise keep the old rate).
        let mut next = tokio::time::Instant::now() + every.mul_f64(rng.gen::<f64>());
        loop {
            let woken = c.wake.notified();
            if over() {
                break; // the step is over: what was thrown is counted, nothing more
            }
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                () = woken => continue,
            }
            if over() {
                break;
            }
            next += every;
            let to = match args.clients {
                0 | 1 => user,
                n => (user + rng.gen_range(1..n) - 1) % n + 1, // never itself
            };
            if !throw(args, &mut s, &mut buf, user, to, token, c).await {
                break 'steps;
            }
        }
    }
    c.senders.fetch_sub(1, Ordering::Relaxed);
}

/// Throws one sprite to `to` and reads its answer; false when the connection is lost.
async fn throw(
    args: &SpritesArgs,
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    user: u64,
    to: u64,
    token: &str,
    c: &Counters,
) -> bool {
    let mut body = format!("ts={} sprite {user}", sys::unix_micros()).into_bytes();
    body.resize(body.len().max(args.size), b'x');
    let head = format!(
        "POST /pub/{to} HTTP/1.1\r\nHost: sprites\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    let mut request = head.into_bytes();
    request.extend_from_slice(&body);
    c.sent.fetch_add(1, Ordering::Relaxed);
    if s.write_all(&request).await.is_err() {
        c.send_errors.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    match tokio::time::timeout(SEND_TIMEOUT, read_response(s, buf)).await {
        Ok(Ok((200, _))) => c.published.fetch_add(1, Ordering::Relaxed),
        Ok(Ok(_)) => c.send_errors.fetch_add(1, Ordering::Relaxed),
        _ => {
            c.send_errors.fetch_add(1, Ordering::Relaxed);
            return false;
        }
    };
    true
}

/// The `ts=<micros>` stamp at the start of a payload.
fn stamp_of(data: &str) -> Option<u64> {
    let rest = data.strip_prefix("ts=")?;
    let end = rest
        .find(|ch: char| !ch.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Reads one response with a `Content-Length` body: (status, body). `buf` keeps
/// what arrived beyond it.
async fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<(u16, Vec<u8>)> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 24];
        let mut r = httparse::Response::new(&mut headers);
        if let httparse::Status::Complete(head) = r.parse(buf)? {
            let status = r.code.unwrap_or(0);
            let len = r
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| std::str::from_utf8(h.value).ok())
                .and_then(|v| v.trim().parse::<usize>().ok())
                .context("a response without Content-Length")?;
            anyhow::ensure!(head + len <= MAX_RESPONSE, "response too large");
            while buf.len() < head + len {
                read_more(s, buf).await?;
            }
            let body = buf[head..head + len].to_vec();
            buf.drain(..head + len);
            return Ok((status, body));
        }
        anyhow::ensure!(buf.len() < MAX_RESPONSE, "response head too large");
        read_more(s, buf).await?;
    }
}

async fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<()> {
    let mut chunk = [0u8; 8192];
    let n = s.read(&mut chunk).await?;
    anyhow::ensure!(n > 0, "closed by the server");
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_read_from_the_payload_start() {
        assert_eq!(stamp_of("ts=123 sprite 4"), Some(123));
        assert_eq!(stamp_of("ts=9"), Some(9));
        assert_eq!(stamp_of("sprite"), None);
        assert_eq!(stamp_of("ts=x"), None);
    }
}
