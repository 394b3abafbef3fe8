//! A script interpreter for fuzzing the connection core: each byte string is read as
//! a sequence of operations — input bytes (raw or from a table of well-formed
//! requests and frames, possibly split), bus replies to the requests the core made,
//! deliveries, timer firings, blocked output, closes — and the properties the core
//! promises are checked after every step:
//!
//! - it never panics;
//! - it never emits bytes after it closed (a close requested, or the closing state);
//! - every timer it arms is in the future;
//! - every request that wants a reply is one the core can be answered for;
//! - an HTTP/2 stream's control (`handle_control`, op 7 with bit 6) is answered with
//!   a status of the documented table, or goes to the bus as one join, whose
//!   reply answers it 200 or (the router refused it) 409.
//!
//! Shared by the bounded fuzzer in the test suite (`core_fuzz.rs`) and the
//! coverage-guided target (`fuzz/fuzz_targets/core.rs`).

use bus::{HistoryRead, Message, Reply, Request};
use bytes::Bytes;
use connection::{
    Config, Connection, ControlAnswer, Credentials, Cx, Frames, Outbox, SlowPolicy, State,
    WsHeartbeat,
};
use std::collections::VecDeque;
use std::sync::Arc;

/// Well-formed pieces that take the core deep into its states.
pub const FRAGMENTS: &[&[u8]] = &[
    b"GET /sub/7 HTTP/1.1\r\nHost: t\r\n\r\n",
    b"GET /sse/7 HTTP/1.1\r\nLast-Event-ID: 3\r\n\r\n",
    b"GET /sub/7 HTTP/1.1\r\nAccept: text/event-stream\r\n\r\n",
    b"GET /ws/9 HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    b"GET /poll/7?since=2 HTTP/1.1\r\n\r\n",
    b"GET /poll/7 HTTP/1.1\r\n\r\n",
    b"POST /pub/1 HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
    b"POST /pub/1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    b"POST /pub HTTP/1.1\r\nContent-Length: 26\r\n\r\n{\"subject\":1,\"data\":\"x\"}\n\n",
    b"PUT /subscriptions/1/2 HTTP/1.1\r\n\r\n",
    b"POST /subscriptions HTTP/1.1\r\nContent-Length: 8\r\n\r\n1 2\n3 4\n",
    b"GET /subscribers/2 HTTP/1.1\r\n\r\n",
    b"GET /stats HTTP/1.1\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n",
    b"GET /healthz HTTP/1.0\r\n\r\n",
    b"POST /pub/1 HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
    b"\x81\x85\x01\x02\x03\x04ig`hn",
    // Resume positions with epochs (SPEC B6) and a client publish frame (C7).
    b"GET /ws/9?since=0 HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    b"GET /sub/7?since=5-2 HTTP/1.1\r\n\r\n",
    b"GET /poll/7?since=5-9 HTTP/1.1\r\nOrigin: http://x\r\n\r\n",
    b"\x81\x99\x00\x00\x00\x00{\"publish\":7,\"data\":\"hi\"}",
    // A token refresh frame (the refresh of issue 39's token lifetime).
    b"\x81\x93\x00\x00\x00\x00{\"refresh\":\"a.b.c\"}",
    b"\x89\x80\x01\x02\x03\x04",
    b"\x01\x81\x01\x02\x03\x04`",
    b"\x80\x81\x01\x02\x03\x04c",
    b"\x88\x82\x01\x02\x03\x04\x02\xea",
    b"\x81\x01x",
    // Channels (docs/protocol.md "Channels"): named in requests, a composite
    // Last-Event-ID, a framed WebSocket's control frames, a channel's publish and
    // history.
    b"GET /sse/7?channel=room:1&channel=news HTTP/1.1\r\nLast-Event-ID: 5-2__5-9\r\n\r\n",
    b"GET /sub?channel=room:1 HTTP/1.1\r\n\r\n",
    b"GET /poll?channel=news&channel=room:1&since=5-1_ HTTP/1.1\r\n\r\n",
    b"GET /ws/9?channel=news&since=1-1_2-2 HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    b"\x81\x96\x00\x00\x00\x00{\"subscribe\":\"room:1\"}",
    b"\x81\x98\x00\x00\x00\x00{\"unsubscribe\":\"room:1\"}",
    b"\x81\xa0\x00\x00\x00\x00{\"publish\":\"room:1\",\"data\":\"hi\"}",
    b"POST /pub/room:1 HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
    b"GET /history/news?limit=2 HTTP/1.1\r\n\r\n",
    // HTTP/2 streams (policy bit 3): a session's streams and the POSTs for them.
    b"GET /sse?session=tab&channel=news HTTP/1.1\r\nLast-Event-ID: 5-2_6-1_\r\n\r\n",
    b"GET /sub/7?session=tab HTTP/1.1\r\n\r\n",
    b"POST /subscribe?session=tab&channel=room:1&since=5-1 HTTP/1.1\r\n\r\n",
    b"POST /unsubscribe?session=tab&channel=news HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    b"GARBAGE\r\n\r\n",
    b"\r\n",
    // Presence queries (docs/protocol.md "Presence").
    b"GET /presence/room:1 HTTP/1.1\r\n\r\n",
    b"GET /presence/42/stats HTTP/1.1\r\n\r\n",
    b"GET /online/7 HTTP/1.1\r\n\r\n",
    // A client's own token on a publish (client publish over HTTP, issue 46): in the
    // query, and as a bearer shaped like a JWT.
    b"POST /pub/room:1?token=a.b.c HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
    b"POST /pub HTTP/1.1\r\nAuthorization: Bearer a.b.c\r\nContent-Length: 26\r\n\r\n{\"subject\":1,\"data\":\"x\"}\n\n",
    // Pusher clients and API (docs/protocol.md "Pusher clients"; app key1 is known).
    b"GET /app/key1?protocol=7 HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    b"GET /app/nope?protocol=6 HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    b"\x81\xa1\x00\x00\x00\x00{\"event\":\"pusher:ping\",\"data\":{}}",
    b"\x81\xb6\x00\x00\x00\x00{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"news\"}}",
    b"\x81\xcc\x00\x00\x00\x00{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"private-a\",\"auth\":\"key1:00\"}}",
    b"\x81\xee\x00\x00\x00\x00{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"presence-a\",\"auth\":\"key1:00\",\"channel_data\":\"{\\\"user_id\\\":7}\"}}",
    b"\x81\xb9\x00\x00\x00\x00{\"event\":\"client-x\",\"channel\":\"private-a\",\"data\":{\"n\":1}}",
    b"\x81\xb8\x00\x00\x00\x00{\"event\":\"pusher:unsubscribe\",\"data\":{\"channel\":\"news\"}}",
    b"POST /apps/app1/events?auth_key=key1&auth_timestamp=0&auth_version=1.0&auth_signature=00 HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
    b"GET /apps/app1/channels/presence-a/users?auth_key=key1 HTTP/1.1\r\n\r\n",
];

/// A tiny cursor over the script.
struct Script<'a>(&'a [u8]);

impl Script<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
}

fn config(policy: u8) -> Config {
    Config {
        heartbeat: 40,
        ws_heartbeat: if policy & 4 == 0 {
            WsHeartbeat::Pong
        } else {
            WsHeartbeat::Ping
        },
        heartbeat_grid: 2,
        head_timeout: 20,
        keepalive_timeout: 10,
        poll_timeout: 30,
        linger: 4,
        max_message: 256,
        max_batch: 1024,
        max_queued: 512,
        slow_policy: if policy & 1 == 0 {
            SlowPolicy::Disconnect
        } else {
            SlowPolicy::Drop
        },
        max_channels: 64,
        sse_retry_ms: 1000,
        limits: wire::Limits::default(),
        access: Arc::new(connection::Access {
            pusher: auth::PusherApps::parse(["app1:key1:secret1"]).expect("a valid app"),
            ..Default::default()
        }),
        unix_start_ms: 0,
    }
}

fn history(seed: u8) -> HistoryRead {
    let last = u64::from(seed % 8);
    let kept = (seed >> 3) % 3;
    HistoryRead {
        messages: (0..kept)
            .map(|i| {
                let msg = Message::to_subject(1, Bytes::from_static(b"h\nx"));
                (last + 1 + u64::from(i), Arc::new(msg))
            })
            .collect(),
        last: last + u64::from(kept),
        gap: seed & 0x40 != 0,
        epoch: None,
    }
}

/// A reply for `request`: usually the matching kind, sometimes a failure or a
/// mismatched kind (a buggy or hostile router side).
fn reply_for(request: &Request, seed: u8) -> Reply {
    if seed.is_multiple_of(11) {
        return Reply::Unavailable("store down".into());
    }
    if seed.is_multiple_of(13) {
        return Reply::Done;
    }
    match request {
        Request::Login { .. } | Request::ReadHistory { .. } => Reply::History(history(seed)),
        Request::Logout { .. } | Request::Leave { .. } => Reply::Done,
        Request::ChannelHistory { .. } => Reply::History(history(seed)),
        Request::Join {
            login, channels, ..
        } => {
            // Sometimes the router refuses the last channel (the user's limit).
            let refused = (seed & 0x20 != 0).then(|| channels.last()).flatten();
            Reply::Joined {
                login: login.then(|| history(seed)),
                channels: channels
                    .iter()
                    .filter(|c| refused.is_none_or(|r| r.name != c.name))
                    .map(|c| (c.name.to_string(), history(seed.wrapping_add(1))))
                    .collect(),
                refused: refused
                    .map(|c| (c.name.to_string(), bus::Refusal::UserLimit))
                    .into_iter()
                    .collect(),
            }
        }
        Request::Publish { .. }
        | Request::PublishBatch { .. }
        | Request::PublishChannel { .. }
        | Request::PublishChannels { .. } => Reply::Published {
            messages: 1,
            connections: u64::from(seed),
            users: 1,
        },
        Request::ChangeSubscriptions { edges, .. } => Reply::Changed {
            edges: edges.len() as u64,
            changed: 1,
        },
        Request::Subscribers { .. } | Request::Subscriptions { .. } => Reply::Ids(vec![1, 2]),
        Request::Presence { of, .. } => Reply::Presence {
            of: of.clone(),
            presence: bus::Presence {
                users: vec![bus::Member::new(7, u32::from(seed))],
                count: 1,
                connections: u64::from(seed),
                cut: seed & 1 != 0,
            },
        },
        Request::Online { user } => Reply::Online {
            user: *user,
            online: vec![3, 9],
        },
        Request::Occupied { prefix } => Reply::Occupied(vec![bus::Occupied {
            name: format!("{prefix}a"),
            users: u32::from(seed),
            connections: u32::from(seed),
        }]),
        Request::Stats => Reply::Stats(serde_json::json!({"connections": 1})),
    }
}

/// The states a run passed through, as a bit set (`1 << state index`), so a fuzzer
/// can check that it reaches deep into the core.
pub type Seen = u32;

/// The bit of `state` in [`Seen`].
pub fn bit(state: State) -> Seen {
    1 << match state {
        State::Head => 0,
        State::Body => 1,
        State::Idle => 2,
        State::Calling(_) => 3,
        State::SubscribingStream | State::SubscribingSse | State::SubscribingWebSocket => 4,
        State::Polling => 5,
        State::PollWaiting => 6,
        State::Stream => 7,
        State::Sse => 8,
        State::WebSocket => 9,
        State::Closing => 10,
        State::Controlling => 11,
    }
}

/// Runs `script` against one connection and checks the properties (module doc).
pub fn run(script: &[u8]) -> Seen {
    let mut seen: Seen = 0;
    let mut s = Script(script);
    let policy = s.byte().unwrap_or(0);
    let config = config(policy);
    let mut out = Outbox::new(u32::from(s.byte().unwrap_or(1)) + 1);
    let mut conn = Connection::new();
    // Mostly a loopback peer (the API answers it); bit 1 tries a remote one (403).
    conn.set_peer_loopback(policy & 2 == 0);
    // Bit 3: an HTTP/2 stream (sessions and POSTs for them are heard).
    if policy & 8 != 0 {
        conn.set_multiplexed();
    }
    let mut now: u32 = 100;
    let mut queued = 0usize;
    let mut outstanding: VecDeque<Request> = VecDeque::new();
    let mut closed = false;
    let mut requests = Vec::new();
    // Empty unless a script ends a token's life (op 6 with bit 6 set).
    let mut credentials = Credentials::default();
    let mut step = |conn: &mut Connection,
                    now: u32,
                    queued: usize,
                    closed: &mut bool,
                    outstanding: &mut VecDeque<Request>,
                    call: &mut dyn FnMut(&mut Connection, &mut Cx)| {
        let mut cx = Cx {
            now,
            config: &config,
            queued,
            out: &mut out,
            credentials: &mut credentials,
            key: 1,
        };
        call(conn, &mut cx);
        let bytes = out.len();
        assert!(
            !(*closed && bytes > 0),
            "{bytes} bytes emitted after the connection closed"
        );
        out.clear_bytes();
        if let Some(timer) = out.take_timer() {
            assert!(timer > now, "timer {timer} armed at or before now {now}");
        }
        out.take_resume();
        out.take_session();
        out.take_control();
        let mut answers = Vec::new();
        out.take_answers(&mut answers);
        // A join's answer: done, or refused by the router (the user's limit).
        assert!(
            answers.iter().all(|a| a.status == 200 || a.status == 409),
            "{answers:?}"
        );
        out.take_requests(&mut requests);
        for request in requests.drain(..) {
            outstanding.push_back(request);
        }
        if conn.is_closing() {
            *closed = true;
        }
        // A close now: the pump frees the slot and nothing more can happen.
        out.take_close()
    };
    step(
        &mut conn,
        now,
        queued,
        &mut closed,
        &mut outstanding,
        &mut |c, cx| c.handle_open(cx),
    );
    while let Some(op) = s.byte() {
        let freed = match op % 8 {
            0 | 1 => {
                let n = usize::from(s.byte().unwrap_or(0) % 64);
                let input = s.take(n).to_vec();
                step(
                    &mut conn,
                    now,
                    queued,
                    &mut closed,
                    &mut outstanding,
                    &mut |c, cx| c.handle_bytes(cx, &input),
                )
            }
            2 => {
                let pick = usize::from(s.byte().unwrap_or(0));
                let fragment = FRAGMENTS[pick % FRAGMENTS.len()];
                let cut = usize::from(s.byte().unwrap_or(255)) % (fragment.len() + 1);
                [&fragment[..cut], &fragment[cut..]].iter().any(|part| {
                    step(
                        &mut conn,
                        now,
                        queued,
                        &mut closed,
                        &mut outstanding,
                        &mut |c, cx| c.handle_bytes(cx, part),
                    )
                })
            }
            3 => {
                let seed = s.byte().unwrap_or(0);
                match outstanding.pop_front() {
                    Some(request) => {
                        let mut reply = Some(reply_for(&request, seed));
                        step(
                            &mut conn,
                            now,
                            queued,
                            &mut closed,
                            &mut outstanding,
                            &mut |c, cx| {
                                if let Some(reply) = reply.take() {
                                    c.handle_reply(cx, reply)
                                }
                            },
                        )
                    }
                    None => false,
                }
            }
            4 => {
                let seq = u64::from(s.byte().unwrap_or(0));
                let payload: &[u8] = if seq % 3 == 0 {
                    b"line1\nline2"
                } else {
                    &[0xff; 40]
                };
                // Every other delivery is a channel's (held or not by the connection).
                let channel = ["room:1", "news", "other"][(seq % 3) as usize];
                let msg = Message::to_channel(channel, Bytes::copy_from_slice(payload));
                step(
                    &mut conn,
                    now,
                    queued,
                    &mut closed,
                    &mut outstanding,
                    &mut |c, cx| {
                        let mut frames = match seq % 2 {
                            0 => Frames::new(payload),
                            _ => Frames::of(&msg),
                        };
                        c.handle_delivery(cx, 7, seq, &mut frames);
                    },
                )
            }
            5 => {
                now = now.max(conn.deadline()).saturating_add(u32::from(op >> 4));
                step(
                    &mut conn,
                    now,
                    queued,
                    &mut closed,
                    &mut outstanding,
                    &mut |c, cx| c.handle_timeout(cx),
                )
            }
            // The loop's credentials table says the token expired, in any state.
            6 if op & 0x40 != 0 => step(
                &mut conn,
                now,
                queued,
                &mut closed,
                &mut outstanding,
                &mut |c, cx| c.handle_expired(cx),
            ),
            6 => {
                queued = usize::from(s.byte().unwrap_or(0)) * 4;
                false
            }
            // A POST on the same HTTP/2 connection names this stream, or the
            // stream a POST named answers it.
            7 if op & 0x40 != 0 && op & 0x80 == 0 => {
                let pick = s.byte().unwrap_or(0);
                let control = wire::StreamControl {
                    session: "tab".into(),
                    channel: ["room:1", "news", "gap", "x y"][usize::from(pick % 4)].into(),
                    since: [None, Some("5-1"), Some("x")][usize::from(pick / 4 % 3)]
                        .map(str::to_string),
                    subscribe: pick & 0x20 == 0,
                    presence: pick & 0x40 != 0,
                };
                step(
                    &mut conn,
                    now,
                    queued,
                    &mut closed,
                    &mut outstanding,
                    &mut |c, cx| {
                        if pick & 0x40 != 0 {
                            c.handle_control_answer(cx, &ControlAnswer::no_stream("news"));
                            return;
                        }
                        let joins = cx.out.len();
                        match c.handle_control(cx, &control) {
                            Some(a) => {
                                assert!(matches!(a.status, 200 | 400 | 403 | 404 | 409), "{a:?}")
                            }
                            None => assert_eq!(cx.out.len(), joins, "a join writes nothing yet"),
                        }
                    },
                )
            }
            _ if op & 0x80 != 0 => {
                step(
                    &mut conn,
                    now,
                    queued,
                    &mut closed,
                    &mut outstanding,
                    &mut |c, cx| c.handle_close(cx),
                );
                // The socket is gone: the pump frees the slot.
                true
            }
            _ => {
                now = now.saturating_add(u32::from(op >> 3));
                false
            }
        };
        seen |= bit(conn.state());
        if freed {
            return seen;
        }
    }
    seen
}
