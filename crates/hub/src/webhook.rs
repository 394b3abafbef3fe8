//! `--webhook URL`: membership events POSTed to a back-end (docs/protocol.md
//! "Presence events"), from a thread of its own so delivery to clients never
//! waits on it.
//!
//! Events wait in a bounded queue ([`QUEUE`]; when full the oldest is dropped and
//! counted). The thread sends them in batches of up to [`BATCH`] events, at most
//! [`BATCH_WAIT`] after the first one came: `{"time_ms":…,"events":[…]}` with
//! `X-Myriad-Signature: sha256=<hex HMAC-SHA256(secret, body)>`. A batch that
//! is not answered 2xx is sent again (the same body) after 100 ms, 200 ms, …
//! up to [`MAX_BACKOFF`], until it is: events reach the back-end in order, and
//! under a long outage the queue keeps the newest.
//!
//! The same batches go in Pusher's format for a Pusher app ([`Style`], its
//! channels only: `--pusher-webhook ID=URL`, one sender per app):
//! `{"time_ms":…,"events":[{"name":"member_added","channel":"presence-a",
//! "user_id":"alice"},…]}` with `X-Pusher-Key` and `X-Pusher-Signature`; Pusher
//! clients' `client-*` events go too, as `client_event` ([`Webhook::client_event`]).
//!
//! Plain `http://` only (a TLS-terminating proxy goes in front for `https`): one
//! request per connection, `Connection: close`, written by hand over std's TCP.

pub use crate::webhook_style::{PusherHook, Style};
use anyhow::{bail, Context};
use parking_lot::{Condvar, Mutex};
use router::PresenceEvent;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Events waiting at most; past it the oldest go.
pub const QUEUE: usize = 100_000;
/// Events per POST at most.
pub const BATCH: usize = 100;
/// How long the first event of a batch waits for others.
pub const BATCH_WAIT: Duration = Duration::from_secs(1);
/// The longest wait between two tries of a batch.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Connect, write and read timeout of one POST.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The sender's side: a queue and its counters.
pub struct Webhook {
    shared: Arc<Shared>,
    style: Arc<Style>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    /// (event as JSON, when it was taken) oldest first.
    queue: VecDeque<serde_json::Value>,
    /// Set when the first event of the next batch came.
    since: Option<Instant>,
    sent_batches: u64,
    sent_events: u64,
    retries: u64,
    dropped: u64,
    stop: bool,
}

/// Where a POST goes: `host:port` and the path with its query.
struct Target {
    host: String,
    path: String,
}

impl Webhook {
    /// Starts the sender thread for `url`, in `style`'s format and signature.
    pub fn start(url: &str, style: Style) -> anyhow::Result<Webhook> {
        let target = parse_url(url)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        });
        let thread = shared.clone();
        let style = Arc::new(style);
        let headers = style.clone();
        std::thread::Builder::new()
            .name("myriad-webhook".into())
            .spawn(move || run(&thread, &target, &headers))
            .context("cannot start the webhook thread")?;
        Ok(Webhook { shared, style })
    }

    /// The format this webhook speaks.
    pub fn style(&self) -> &Style {
        &self.style
    }

    /// Queues `events` (never blocks: a full queue drops its oldest); `info` is a
    /// user's presence info (the router's, under its lock).
    pub fn push(
        &self,
        events: &[PresenceEvent],
        info: &dyn Fn(u64) -> Option<String>,
        time_ms: u64,
    ) {
        self.queue(
            events
                .iter()
                .filter_map(|e| self.style.event(e, info, time_ms)),
        );
    }

    fn queue(&self, events: impl Iterator<Item = serde_json::Value>) {
        let mut state = self.shared.state.lock();
        for event in events {
            if state.queue.len() == QUEUE {
                state.queue.pop_front();
                state.dropped += 1;
            }
            state.queue.push_back(event);
        }
        state.since.get_or_insert_with(Instant::now);
        self.shared.wake.notify_one();
    }

    /// A message published on `channel`, read as a Pusher envelope: when it is a
    /// client event of this webhook's app, Pusher's `client_event`
    /// ([`PusherHook::client_event`]). The router shard that owns the channel sees
    /// each publish once, so each event is posted once whatever gateway it came
    /// through.
    pub fn client_event(&self, channel: &str, published: &wire::pusher::Published) {
        let Some(event) = self
            .style
            .pusher()
            .and_then(|p| p.client_event(channel, published))
        else {
            return;
        };
        self.queue(std::iter::once(event));
    }

    /// `/stats`'s `webhook` object.
    pub fn stats_json(&self) -> serde_json::Value {
        let state = self.shared.state.lock();
        serde_json::json!({
            "queued": state.queue.len(),
            "sent_batches": state.sent_batches,
            "sent_events": state.sent_events,
            "retries": state.retries,
            "dropped": state.dropped,
        })
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.shared.state.lock().stop = true;
        self.shared.wake.notify_one();
    }
}

/// The sender thread: a batch when it is full or its first event waited
/// [`BATCH_WAIT`], then tries until it is taken.
fn run(shared: &Shared, target: &Target, style: &Style) {
    loop {
        let events: Vec<serde_json::Value> = {
            let mut state = shared.state.lock();
            loop {
                if state.stop {
                    return;
                }
                match state.since {
                    Some(t) if state.queue.len() >= BATCH || t.elapsed() >= BATCH_WAIT => break,
                    Some(t) => {
                        let _ = shared.wake.wait_for(&mut state, BATCH_WAIT - t.elapsed());
                    }
                    None => shared.wake.wait(&mut state),
                }
            }
            let n = state.queue.len().min(BATCH);
            let events = state.queue.drain(..n).collect();
            state.since = (!state.queue.is_empty()).then(Instant::now);
            events
        };
        let n = events.len() as u64;
        let body = serde_json::json!({
            "time_ms": crate::presence::unix_ms(),
            "events": events,
        })
        .to_string();
        let headers = style.headers(&body);
        let mut backoff = Duration::from_millis(100);
        loop {
            match post(target, &body, &headers) {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "webhook POST failed");
                    let mut state = shared.state.lock();
                    state.retries += 1;
                    let _ = shared.wake.wait_while_for(&mut state, |s| !s.stop, backoff);
                    if state.stop {
                        return;
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        let mut state = shared.state.lock();
        state.sent_batches += 1;
        state.sent_events += n;
    }
}

/// One POST; `Ok` on a 2xx answer.
fn post(target: &Target, body: &str, signature_headers: &str) -> anyhow::Result<()> {
    // `signature_headers`: the style's signature header line(s).
    let addr = target
        .host
        .to_socket_addrs()?
        .next()
        .with_context(|| format!("{} resolves to no address", target.host))?;
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n{signature_headers}\r\n\
         Connection: close\r\n\r\n",
        target.path,
        target.host,
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    // The answer's head is all that is read: its status says taken or not.
    let mut answer = [0u8; ANSWER_HEAD];
    let mut got = 0;
    loop {
        match answer_status(&answer[..got]) {
            Answer::Status(code) if (200..300).contains(&code) => return Ok(()),
            Answer::Status(code) => bail!("answered {code}"),
            Answer::Bad(why) => bail!("answered something that is not HTTP: {why}"),
            Answer::Partial if got == answer.len() => {
                bail!("an answer head over {ANSWER_HEAD} bytes")
            }
            Answer::Partial => {}
        }
        match stream.read(&mut answer[got..])? {
            0 => bail!("closed before answering"),
            n => got += n,
        }
    }
}

/// Most bytes of a receiver's answer read for its status line.
const ANSWER_HEAD: usize = 1024;

/// What the bytes of a receiver's answer so far say.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// Its status code (the status line is complete).
    Status(u16),
    /// Not enough bytes yet.
    Partial,
    /// Not an HTTP/1.x answer.
    Bad(httparse::Error),
}

/// Reads a receiver's answer with httparse (the fuzz target `webhook_answer` runs it
/// on arbitrary bytes): its status is known once the status line is complete, even
/// before the headers are (only the status line is parsed; headers are not kept).
pub fn answer_status(bytes: &[u8]) -> Answer {
    let Some(end) = bytes.windows(2).position(|w| w == b"\r\n") else {
        return Answer::Partial;
    };
    // The status line alone, as a head with no headers.
    let mut line = bytes[..end + 2].to_vec();
    line.extend_from_slice(b"\r\n");
    let mut response = httparse::Response::new(&mut []);
    match response.parse(&line) {
        Ok(httparse::Status::Complete(_)) => response.code.map_or(Answer::Partial, Answer::Status),
        Ok(httparse::Status::Partial) => Answer::Partial,
        Err(e) => Answer::Bad(e),
    }
}

/// `http://host[:port][/path]`.
fn parse_url(url: &str) -> anyhow::Result<Target> {
    let Some(rest) = url.strip_prefix("http://") else {
        bail!("{url}: only http:// URLs (put a TLS-terminating proxy in front for https)");
    };
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if host.is_empty() {
        bail!("{url}: no host");
    }
    let host = match host.contains(':') {
        true => host.to_string(),
        false => format!("{host}:80"),
    };
    Ok(Target {
        host,
        path: path.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_judged_by_its_status_line() {
        assert_eq!(answer_status(b"HTTP/1.1 20"), Answer::Partial);
        assert_eq!(
            answer_status(b"HTTP/1.1 204 No Content\r\nDate"),
            Answer::Status(204)
        );
        assert_eq!(
            answer_status(b"HTTP/1.0 500 Oops\r\n\r\n"),
            Answer::Status(500)
        );
        assert!(matches!(answer_status(b"SSH-2.0-x\r\n"), Answer::Bad(_)));
    }

    #[test]
    fn urls_are_http_with_a_host_and_a_path() {
        let t = parse_url("http://127.0.0.1:9000/hooks/presence?x=1").unwrap();
        assert_eq!(
            (t.host.as_str(), t.path.as_str()),
            ("127.0.0.1:9000", "/hooks/presence?x=1")
        );
        let t = parse_url("http://example.com").unwrap();
        assert_eq!((t.host.as_str(), t.path.as_str()), ("example.com:80", "/"));
        assert!(parse_url("https://example.com/").is_err());
        assert!(parse_url("http:///x").is_err());
    }

    #[test]
    fn a_full_queue_drops_its_oldest_and_counts_them() {
        // Port 9 (discard) on loopback: nothing listens, every POST fails.
        let webhook = Webhook::start("http://127.0.0.1:9/", Style::myriad("s")).unwrap();
        let event = PresenceEvent {
            kind: router::EventKind::MemberAdded,
            channel: "room".into(),
            user: Some(1),
        };
        let events = vec![event; QUEUE + 10];
        webhook.push(&events, &|_| None, 1);
        let stats = webhook.stats_json();
        assert_eq!(stats["dropped"], 10, "{stats}");
        assert!(stats["queued"].as_u64().unwrap() <= QUEUE as u64, "{stats}");
        assert_eq!(stats["sent_batches"], 0, "{stats}");
    }
}
