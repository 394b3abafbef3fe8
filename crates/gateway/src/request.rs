//! What a parsed request head turns into: a subscription on one of the four transports,
//! a long-poll, or an API call with a body. Also the WebSocket frames of a subscribed
//! connection. Socket-free decisions come from `wire`; this module picks and records.

use crate::api;
use crate::conn::{PendingRequest, State, KEEP_ALIVE, WS_CLOSE_SENT};
use crate::event_loop::EventLoop;
use crate::output::Part;
use bytes::Bytes;
use std::sync::atomic::Ordering;
use wire::{BodyKind, Opcode, RequestHead, Route, Transport, WsFrame};

impl EventLoop {
    pub(crate) fn handle_head(&mut self, index: usize, head: RequestHead) {
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        conn.set(KEEP_ALIVE, head.keep_alive);
        let route = match wire::route(&head) {
            Ok(route) => route,
            Err(e) => {
                // Without a body the framing is intact and keep-alive may go on.
                let keep = head.keep_alive && head.body == BodyKind::None;
                // `headers()` carries Allow for 405 and Upgrade for 426 (RFC 9110).
                let response = wire::response(
                    e.status(),
                    "text/plain; charset=utf-8",
                    format!("{e}\n").as_bytes(),
                    keep,
                    e.headers(),
                );
                self.respond(index, response, keep);
                return;
            }
        };
        match route {
            Route::Subscribe {
                user, transport, ..
            } => {
                if head.body != BodyKind::None {
                    self.fail(index, 400, "a subscription request has no body");
                    return;
                }
                self.subscribe(index, user, transport, &head);
            }
            Route::Poll { user, since, .. } => {
                if head.body != BodyKind::None {
                    self.fail(index, 400, "a poll request has no body");
                    return;
                }
                self.poll_request(index, user, since.map(|s| s.seq));
            }
            route => self.start_api(index, route, &head),
        }
    }

    fn start_api(&mut self, index: usize, route: Route, head: &RequestHead) {
        let limit = api::body_limit(&self.shared, &route);
        let Some(limit) = limit else {
            if head.body != BodyKind::None {
                self.fail(index, 400, "this request takes no body");
            } else {
                self.handle_body(index, route, Vec::new());
            }
            return;
        };
        match head.body {
            BodyKind::None | BodyKind::Length(0) => self.handle_body(index, route, Vec::new()),
            BodyKind::Length(n) if n > limit as u64 => {
                self.fail(index, 413, &format!("body larger than {limit} bytes"));
            }
            kind => {
                if head.expect_continue {
                    let cont = Bytes::from_static(wire::CONTINUE_100);
                    self.send(index, &[Part::Shared(&cont)], false);
                }
                let Some(conn) = self.conns.get_mut(index) else {
                    return;
                };
                let pending = conn.pending.get_or_insert_with(Default::default);
                pending.request = Some(Box::new(PendingRequest {
                    route,
                    decoder: wire::BodyDecoder::new(kind, limit),
                    body: Vec::new(),
                }));
                conn.state = State::Body;
                self.set_timer(index, self.shared.config.head_timeout);
            }
        }
    }

    pub(crate) fn handle_body(&mut self, index: usize, route: Route, body: Vec<u8>) {
        let reply = api::handle(&self.shared, &route, &body, self.id);
        let published = api::published_count(&route, &reply);
        if published > 0 {
            self.metrics
                .messages_in
                .fetch_add(published, Ordering::Relaxed);
            // Deliveries for this loop's own connections were queued without a wake-up;
            // the loop drains them after this round of events, together with whatever
            // the other requests of the round published (one coalesced write each).
            self.own_deliveries = true;
        }
        let Some(conn) = self.conns.get(index) else {
            return;
        };
        let keep = conn.has(KEEP_ALIVE);
        self.respond(
            index,
            wire::response(reply.status, reply.content_type, &reply.body, keep, &[]),
            keep,
        );
    }

    /// Turns the connection into a subscription of `user` (SPEC A1, A2, A4). Login and the
    /// history replay happen under one router lock, so no message falls between them.
    fn subscribe(&mut self, index: usize, user: u64, transport: Transport, head: &RequestHead) {
        let (head_bytes, state) = match transport {
            Transport::Stream => {
                let mut bytes = wire::stream_head();
                bytes.extend_from_slice(&wire::welcome_chunk(user));
                (bytes, State::Stream)
            }
            Transport::Sse => (
                wire::sse_head(self.shared.config.sse_retry.as_millis() as u32),
                State::Sse,
            ),
            Transport::WebSocket => {
                let Some(ws) = &head.websocket else {
                    self.fail(index, 400, "bad WebSocket upgrade");
                    return;
                };
                (wire::ws_handshake_response(&ws.key), State::WebSocket)
            }
        };
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        conn.state = state;
        // Streams never go back to requests: free any pipelined input now.
        conn.pending = None;
        // Log in before the client can see the response, so a publish it triggers
        // after reading the welcome always finds it.
        let resume = if state == State::Sse {
            head.last_event_id.map(|s| s.seq)
        } else {
            None
        };
        let history = self.login_and_read(index, user, resume);
        let head_bytes = Bytes::from(head_bytes);
        if !self.send(index, &[Part::Shared(&head_bytes)], false) {
            return;
        }
        if let Some(history) = history {
            if history.gap {
                let first = history.messages.first().map_or(history.last + 1, |m| m.0);
                let gap = Bytes::from(wire::sse_gap(first));
                self.send(index, &[Part::Shared(&gap)], false);
            }
            for (seq, msg) in &history.messages {
                let id = Bytes::from(wire::sse_id(*seq));
                let data = Bytes::from(wire::sse_data(&msg.payload));
                self.send(index, &[Part::Shared(&id), Part::Shared(&data)], false);
            }
        }
        self.set_heartbeat(index);
    }

    /// `GET /poll/<id>?since=<seq>` (SPEC A3): answers at once from history, or waits.
    /// Without `since` the request waits for the next message.
    fn poll_request(&mut self, index: usize, user: u64, since: Option<u64>) {
        self.login(index, user);
        let since = since.unwrap_or_else(|| self.shared.router.lock().last_seq(user));
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        conn.pending.get_or_insert_with(Default::default).poll_since = since;
        let has_news = {
            let router = self.shared.router.lock();
            let h = router.history_since(user, since);
            !h.messages.is_empty() || h.gap
        };
        if has_news {
            self.answer_poll(index);
        } else {
            conn_state(self, index, State::PollWaiting);
            self.set_timer(index, self.shared.config.poll_timeout);
        }
    }

    /// Answers a long-poll with what history holds after its `since` (possibly nothing,
    /// on timeout), then serves any pipelined request.
    pub(crate) fn answer_poll(&mut self, index: usize) {
        let Some(conn) = self.conns.get(index) else {
            return;
        };
        let since = conn.pending.as_ref().map_or(0, |p| p.poll_since);
        let (user, keep) = (conn.user, conn.has(KEEP_ALIVE));
        let body = {
            let router = self.shared.router.lock();
            let h = router.history_since(user, since);
            let messages: Vec<(u64, &[u8])> = h
                .messages
                .iter()
                .map(|(s, m)| (*s, &m.payload[..]))
                .collect();
            wire::poll_body(&messages, h.last.max(since), h.gap)
        };
        let response = wire::response(
            200,
            "application/json",
            &body,
            keep,
            &[
                ("Cache-Control", "no-cache"),
                ("Access-Control-Allow-Origin", "*"),
            ],
        );
        self.respond(index, response, keep);
        if let Some(conn) = self.conns.get_mut(index) {
            conn.tidy_pending();
        }
        if keep {
            self.resume_input(index);
        }
    }

    pub(crate) fn handle_ws_frame(&mut self, index: usize, frame: WsFrame) {
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        if let Err(e) = conn.ws.handle_frame(&frame) {
            self.ws_fail(index, e.close_code(), &e.to_string());
            return;
        }
        match frame.opcode {
            Opcode::Ping => {
                let pong = Bytes::from(wire::ws_pong(&frame.payload));
                self.send(index, &[Part::Shared(&pong)], false);
            }
            Opcode::Close => {
                if conn.has(WS_CLOSE_SENT) {
                    self.close(index);
                    return;
                }
                // Echo the peer's status code (RFC 6455 5.5.1), then close.
                let code = match frame.payload.len() {
                    0 => 1000,
                    _ => u16::from_be_bytes([frame.payload[0], frame.payload[1]]),
                };
                conn.set(WS_CLOSE_SENT, true);
                let close = Bytes::from(wire::ws_close(code, ""));
                if self.send(index, &[Part::Shared(&close)], false) {
                    self.start_closing(index);
                }
            }
            // Client messages are accepted and ignored for now; pongs need nothing.
            Opcode::Text | Opcode::Binary | Opcode::Continuation | Opcode::Pong => {}
        }
    }

    /// A protocol error on a WebSocket: close frame with the RFC 6455 code, then close.
    pub(crate) fn ws_fail(&mut self, index: usize, code: u16, reason: &str) {
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        conn.set(WS_CLOSE_SENT, true);
        // A close reason is at most 123 bytes; ours are short ASCII.
        let reason: String = reason.chars().take(120).collect();
        let close = Bytes::from(wire::ws_close(code, &reason));
        if self.send(index, &[Part::Shared(&close)], false) {
            self.start_closing(index);
        }
    }
}

fn conn_state(lp: &mut EventLoop, index: usize, state: State) {
    if let Some(conn) = lp.conns.get_mut(index) {
        conn.state = state;
    }
}
