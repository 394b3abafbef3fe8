//! The connection core's test harness, without sockets and without sleeping: bytes,
//! replies, deliveries and ticks in; exact bytes, bus requests, timers and closes
//! out. Shared by the core's test modules.

use super::*;
use bus::HistoryRead;
use bytes::Bytes;
use router::Message;
use std::sync::Arc;

/// One connection, its settings and a virtual clock.
pub(super) struct Harness {
    pub(super) conn: Connection,
    pub(super) config: Config,
    pub(super) out: Outbox,
    pub(super) now: Tick,
    /// Bytes "the socket has not taken" for the next call.
    pub(super) queued: usize,
    /// The loop's side table, holding this one connection (key [`KEY`]).
    pub(super) credentials: Credentials,
}

/// The harness connection's key in its [`Credentials`].
pub(super) const KEY: u32 = 0x0101;

/// What one call produced.
#[derive(Debug, Default)]
pub(super) struct Step {
    pub(super) bytes: Vec<u8>,
    pub(super) requests: Vec<Request>,
    pub(super) timer: Option<Tick>,
    pub(super) close: bool,
    pub(super) resume: bool,
}

impl Step {
    pub(super) fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

pub(super) fn config() -> Config {
    Config {
        heartbeat: 400,
        ws_heartbeat: WsHeartbeat::Pong,
        heartbeat_grid: 10,
        head_timeout: 200,
        keepalive_timeout: 100, // 1 s
        poll_timeout: 600,
        linger: 40,
        max_message: 1024,
        max_batch: 4096,
        max_queued: 1000,
        slow_policy: SlowPolicy::Disconnect,
        max_channels: 64,
        sse_retry_ms: 2000,
        limits: wire::Limits::default(),
        access: Default::default(),
        unix_start_ms: 0,
    }
}

impl Harness {
    pub(super) fn new() -> Harness {
        let mut h = Harness {
            conn: Connection::new(),
            config: config(),
            out: Outbox::new(42),
            now: 1000,
            queued: 0,
            credentials: Credentials::default(),
        };
        h.conn.set_peer_loopback(true);
        let step = h.step(|c, cx| c.handle_open(cx));
        assert_eq!(step.timer, Some(1200), "the head timeout starts at accept");
        h
    }

    pub(super) fn step(&mut self, call: impl FnOnce(&mut Connection, &mut Cx)) -> Step {
        let mut cx = Cx {
            now: self.now,
            config: &self.config,
            queued: self.queued,
            out: &mut self.out,
            credentials: &mut self.credentials,
            key: KEY,
        };
        call(&mut self.conn, &mut cx);
        let mut step = Step {
            bytes: self.out.take_all_bytes(),
            timer: self.out.take_timer(),
            close: self.out.take_close(),
            resume: self.out.take_resume(),
            ..Step::default()
        };
        self.out.take_requests(&mut step.requests);
        step
    }

    pub(super) fn bytes(&mut self, input: &[u8]) -> Step {
        self.step(|c, cx| c.handle_bytes(cx, input))
    }

    pub(super) fn reply(&mut self, reply: Reply) -> Step {
        self.step(|c, cx| c.handle_reply(cx, reply))
    }

    pub(super) fn deliver(&mut self, seq: u64, payload: &[u8]) -> (Outcome, Step) {
        let mut outcome = Outcome::Skipped;
        let step =
            self.step(|c, cx| outcome = c.handle_delivery(cx, 7, seq, &mut Frames::new(payload)));
        (outcome, step)
    }

    /// Moves the clock to the connection's deadline and fires its timer.
    pub(super) fn fire_timer(&mut self) -> Step {
        self.now = self.conn.deadline();
        self.step(|c, cx| c.handle_timeout(cx))
    }

    /// Subscribes as `user` with `request` and answers the login with `history`.
    pub(super) fn subscribed(request: &str, history: HistoryRead) -> (Harness, Step) {
        let mut h = Harness::new();
        let step = h.bytes(request.as_bytes());
        assert!(
            step.bytes.is_empty(),
            "nothing is sent before the login reply"
        );
        assert!(matches!(step.requests[..], [Request::Login { .. }]));
        let step = h.reply(Reply::History(history));
        (h, step)
    }
}

pub(super) fn history(last: u64, messages: &[(u64, &'static str)], gap: bool) -> HistoryRead {
    HistoryRead {
        messages: messages
            .iter()
            .map(|&(seq, text)| {
                let msg = Message::to_subject(1, Bytes::from_static(text.as_bytes()));
                (seq, Arc::new(msg))
            })
            .collect(),
        last,
        gap,
        epoch: None,
    }
}
