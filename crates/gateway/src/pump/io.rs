//! Bytes between sockets and cores: reading into a core, then applying what the core
//! left in the outbox — bytes to the socket or its queue, the timer to the wheel,
//! requests to the bus (their replies go straight back to the core), input to
//! resume after the current event, and closing.

use super::output::{write_now, OutQueue};
use super::slot;
use super::EventLoop;
use crate::core::{Connection, Cx};
use bus::{ConnRef, Reply, Request};
use std::io::{self, Read};
use std::sync::atomic::Ordering;

impl EventLoop {
    /// Reads until the socket is drained, handing every read to the core.
    pub(super) fn on_readable(&mut self, index: usize) {
        self.read_socket(index);
        self.run_resumes();
    }

    /// Reads until the socket is drained — or until the connection's queued output
    /// (replies, pongs, deliveries) is over `max_queued`: a client that does not read
    /// what it asked for is not read either (SPEC D4). `flush` brings it back once
    /// the queue is under the limit again.
    fn read_socket(&mut self, index: usize) {
        let mut scratch = std::mem::take(&mut self.scratch);
        while let Some(slot) = self.slots.get_mut(index) {
            if slot.queued_bytes() > self.config.max_queued {
                break;
            }
            let Some(stream) = slot.stream.as_mut() else {
                break; // an HTTP/2 stream: its connection reads
            };
            match stream.read(&mut scratch) {
                Ok(0) => {
                    self.close(index);
                    break;
                }
                Ok(n) => {
                    if self.tls.is_some() {
                        self.tls_read(index, &mut scratch[..n]);
                    } else {
                        self.with_core(index, |conn, cx| conn.handle_bytes(cx, &scratch[..n]));
                    }
                    // A short read drained the socket; new data brings a new edge.
                    if n < scratch.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.close(index);
                    break;
                }
            }
        }
        self.scratch = scratch;
    }

    /// Runs one core call on connection `index`, then applies its outbox.
    pub(super) fn with_core(&mut self, index: usize, call: impl FnOnce(&mut Connection, &mut Cx)) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let mut cx = Cx {
            now: self.now,
            config: &self.config,
            queued: slot.queued_bytes(),
            out: &mut self.outbox,
        };
        call(&mut slot.conn, &mut cx);
        self.settle(index, false);
    }

    /// Applies the outbox of connection `index` until the core has nothing more to
    /// say. With `coalesce`, bytes are queued and written later by `flush_dirty`.
    ///
    /// Only the last timer the core set goes to the wheel, once, when the core is
    /// done: a subscription's login arms a head timeout while its reply is awaited,
    /// and the reply (usually answered within this call) arms the heartbeat — two
    /// wheel entries per idle connection, one of them stale for the whole head
    /// timeout, were 4 B and slot slack of every new connection's memory.
    pub(super) fn settle(&mut self, index: usize, coalesce: bool) {
        let mut timer = None;
        loop {
            if !self.outbox.pieces().is_empty() && !self.send(index, coalesce) {
                return; // the write failed and the connection is closed
            }
            let token = slot::token(index, self.gens[index]);
            if let Some(tick) = self.outbox.take_timer() {
                timer = Some(tick);
            }
            if self.outbox.take_resume() {
                self.resume.push(token);
            }
            let close = self.outbox.take_close();
            let mut requests = std::mem::take(&mut self.requests);
            self.outbox.take_requests(&mut requests);
            for request in requests.drain(..) {
                if let Some(reply) = self.dispatch(index, request) {
                    let slot = &mut self.slots[index];
                    let mut cx = Cx {
                        now: self.now,
                        config: &self.config,
                        queued: slot.queued_bytes(),
                        out: &mut self.outbox,
                    };
                    slot.conn.handle_reply(&mut cx, reply);
                }
            }
            self.requests = requests;
            if close {
                return self.close(index);
            }
            if self.outbox.is_empty() {
                break;
            }
        }
        if let Some(tick) = timer {
            let token = slot::token(index, self.gens[index]);
            let at = self.wheel.schedule(token, tick);
            if at != tick {
                self.slots[index].conn.reschedule(at);
            }
        }
    }

    /// Sends one request of connection `index` over the bus. `/stats` is answered
    /// here: the document is this process's.
    fn dispatch(&mut self, index: usize, request: Request) -> Option<Reply> {
        if let Request::Stats = request {
            return Some(Reply::Stats((self.gateway.stats)()));
        }
        let publishes = matches!(
            request,
            Request::Publish { .. } | Request::PublishBatch { .. }
        );
        let conn = ConnRef {
            loop_id: self.id,
            token: slot::token(index, self.gens[index]),
        };
        let reply = self.gateway.bus.call(conn, request);
        self.gateway.settle_wakes();
        if publishes {
            // Deliveries for this loop's own connections were queued without a
            // wake-up; drain them after this round of events, together with whatever
            // else the round published (one coalesced write per connection).
            self.own_mail = true;
        }
        if let Some(reply) = &reply {
            self.count_reply(reply);
        }
        reply
    }

    pub(super) fn count_reply(&self, reply: &Reply) {
        if let Reply::Published { messages, .. } | Reply::NotStored { messages, .. } = reply {
            self.metrics
                .messages_in
                .fetch_add(*messages, Ordering::Relaxed);
        }
    }

    /// Sends the outbox's bytes: straight to the socket when nothing waits, else
    /// behind the queued output; with `coalesce` only queued. False if the write
    /// failed (the connection is then closed).
    fn send(&mut self, index: usize, coalesce: bool) -> bool {
        if self.slots[index].stream.is_none() {
            return self.h2_stream_send(index, coalesce);
        }
        if self.tls.is_some() {
            return self.tls_send(index, coalesce);
        }
        let slot = &mut self.slots[index];
        let len = self.outbox.len();
        if let Some(queue) = slot.out.as_mut() {
            queue.push_outbox(&self.outbox, 0);
            self.queued += len;
        } else if coalesce {
            let mut queue = Box::<OutQueue>::default();
            queue.push_outbox(&self.outbox, 0);
            slot.out = Some(queue);
            self.queued += len;
            self.dirty.push(index);
        } else {
            let stream = slot.stream.as_mut().expect("checked at the top");
            match write_now(stream, &self.outbox) {
                Ok((n, rest)) => {
                    self.metrics
                        .bytes_out
                        .fetch_add(n as u64, Ordering::Relaxed);
                    match rest {
                        Some(queue) => {
                            self.queued += queue.bytes();
                            slot.out = Some(queue);
                        }
                        None if slot.conn.is_closing() => half_close(stream),
                        None => {}
                    }
                }
                Err(_) => {
                    self.outbox.clear_bytes();
                    self.close(index);
                    return false;
                }
            }
        }
        self.outbox.clear_bytes();
        true
    }

    /// Writes queued output; drops the queue once it is empty, and half-closes a
    /// closing connection whose last bytes are out.
    pub(super) fn flush(&mut self, index: usize) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let Some(queue) = slot.out.as_mut() else {
            return;
        };
        let Some(stream) = slot.stream.as_mut() else {
            return self.h2_flush_stream(index);
        };
        let before = queue.bytes();
        let result = queue.flush(stream);
        let after = queue.bytes();
        self.queued = self.queued + after - before;
        if before > self.config.max_queued && after <= self.config.max_queued {
            // Reading and held input paused over the limit may go on (`read_socket`,
            // `run_resumes`); at the next resume pass, never inside this flush.
            let token = slot::token(index, self.gens[index]);
            self.resume.push(token);
            self.reread.push(token);
        }
        match result {
            Ok(n) => {
                self.metrics
                    .bytes_out
                    .fetch_add(n as u64, Ordering::Relaxed);
                if after == 0 {
                    slot.out = None;
                    if slot.conn.is_closing() {
                        if let Some(stream) = slot.stream.as_ref() {
                            half_close(stream);
                        }
                    }
                }
            }
            Err(_) => self.close(index),
        }
    }

    /// Reads held input again for connections whose call or poll was answered, and
    /// sockets whose reading paused over `max_queued` and may go on. A connection
    /// still over the limit waits: `flush` queues it again when it drains.
    pub(super) fn run_resumes(&mut self) {
        loop {
            while let Some(token) = self.resume.pop() {
                if let Some(index) = self.live(token) {
                    if self.slots[index].queued_bytes() <= self.config.max_queued {
                        self.with_core(index, |conn, cx| conn.handle_bytes(cx, &[]));
                    }
                }
            }
            let Some(token) = self.reread.pop() else {
                return;
            };
            if let Some(index) = self.live(token) {
                self.read_socket(index);
                // An HTTP/2 connection's socket drained: its streams' data moves.
                self.h2_pump(index);
            }
        }
    }

    /// Closes connection `index` now: the core logs out, the slot is freed and the
    /// socket closed (which also removes it from epoll).
    pub(super) fn close(&mut self, index: usize) {
        self.h2_close_streams(index);
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let mut cx = Cx {
            now: self.now,
            config: &self.config,
            queued: 0,
            out: &mut self.outbox,
        };
        slot.conn.handle_close(&mut cx);
        self.outbox.clear_bytes();
        self.outbox.take_timer();
        self.outbox.take_resume();
        self.outbox.take_close();
        let mut requests = std::mem::take(&mut self.requests);
        self.outbox.take_requests(&mut requests);
        for request in requests.drain(..) {
            // A logout: nothing to do with its reply.
            self.dispatch(index, request);
        }
        self.requests = requests;
        let slot = self.slots.remove(index);
        self.tls_forget(index);
        self.h2_forget(index);
        self.queued -= slot.queued_bytes();
        self.gens[index] = self.gens[index].wrapping_add(1);
        if slot.stream.is_none() {
            return; // an HTTP/2 stream: no socket, not counted as a connection
        }
        self.gateway.release(slot.ip_key);
        self.metrics.closes.fetch_add(1, Ordering::Relaxed);
        self.metrics.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// FIN after our last bytes; the peer's EOF (or the linger timeout) closes.
fn half_close(stream: &mio::net::TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
}
