//! Bytes between sockets and cores: reading into a core, then applying what the core
//! left in the outbox — bytes to the socket or its queue, the timer to the wheel,
//! bus requests to the round's calls (sent at the end of the round, their replies
//! back to the core: [`EventLoop::send_calls`]), input to resume, and closing.

use super::output::{write_now, OutQueue};
use super::send_batch::{SendBatch, Sent};
use super::{askers, Call, EventLoop};
use bus::{ConnRef, Reply, Request};
use connection::{Connection, Cx};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

impl EventLoop {
    /// Reads until the socket is drained, handing every read to the core.
    pub(super) fn on_readable(&mut self, index: usize) {
        self.read_socket(index);
    }

    /// Reads until the socket is drained — or until the connection's queued output
    /// (replies, pongs, deliveries) is over `max_queued`: a client that does not read
    /// what it asked for is not read either (SPEC D4). `flush` brings it back once
    /// the queue is under the limit again. A full read that left a bus call waits
    /// for the call's reply (`finish_round` reads on).
    fn read_socket(&mut self, index: usize) {
        let mut scratch = std::mem::take(&mut self.scratch);
        while let Some(slot) = self.conns.get_mut(index) {
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
                    // The core asked the bus: read on once it is answered (what
                    // follows a WebSocket upgrade is frames, not held input).
                    let token = self.conns.token(index);
                    if self.calls.last().is_some_and(|call| call.token == token) {
                        self.reread.push(token);
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

    /// Runs one core call on connection `index`, then applies its outbox. True if
    /// that armed the connection's timer (see [`EventLoop::settle`]).
    pub(super) fn with_core(
        &mut self,
        index: usize,
        call: impl FnOnce(&mut Connection, &mut Cx),
    ) -> bool {
        let Some((slot, credentials, key)) = self.conns.for_core(index) else {
            return false;
        };
        let mut cx = Cx {
            now: self.timers.now(),
            config: &self.config,
            queued: slot.queued_bytes(),
            out: &mut self.outbox,
            credentials,
            key,
        };
        call(&mut slot.conn, &mut cx);
        self.settle(index, false)
    }

    /// Applies the outbox of connection `index`. With `coalesce`, bytes are queued
    /// and written later by `flush_dirty`. Bus requests join the round's calls
    /// ([`EventLoop::send_calls`]): no bus call is made here, so nothing a call
    /// causes runs inside a write, a delivery or a close.
    ///
    /// The core's timer goes to the wheel now, unless the core also made a call:
    /// then once its reply is in (a subscription's login arms a head timeout while
    /// the reply is awaited, and the reply arms the heartbeat — one wheel entry per
    /// new connection instead of two, one of them stale for the whole head timeout:
    /// 4 B and slot slack of every new connection's memory). True if a timer was
    /// put in the wheel.
    pub(super) fn settle(&mut self, index: usize, coalesce: bool) -> bool {
        // First: a write below may close the slot, and these outlive it.
        self.h2_take_relays(index);
        if !self.outbox.pieces().is_empty() && !self.send(index, coalesce) {
            // The write failed and the connection is closed: its close took the
            // outbox's requests, its logout included.
            return false;
        }
        let timer = self.outbox.take_timer();
        if self.outbox.take_resume() {
            self.resume.push(self.conns.token(index));
        }
        let close = self.outbox.take_close();
        self.outbox.take_requests(&mut self.requests);
        let calls = !self.requests.is_empty();
        self.queue_calls(index, timer.is_some());
        if close {
            self.close(index);
            return false;
        }
        match timer {
            Some(tick) if !calls => {
                self.arm(index, tick);
                true
            }
            _ => false,
        }
    }

    /// Puts connection `index`'s timer for `tick` in the wheel; a tick the wheel
    /// moves (past a full revolution's slot) is told back to the core.
    fn arm(&mut self, index: usize, tick: u32) {
        let token = self.conns.token(index);
        let at = self.timers.schedule(token, tick);
        if at != tick {
            self.conns[index].conn.reschedule(at);
        }
    }

    /// Moves the requests taken from connection `index`'s outbox to the round's
    /// calls, in the order the core made them; with `arm`, the last one arms the
    /// connection's timer once it is answered.
    fn queue_calls(&mut self, index: usize, arm: bool) {
        let token = self.conns.token(index);
        let last = self.requests.len();
        self.calls.extend(
            self.requests
                .drain(..)
                .enumerate()
                .map(|(i, request)| Call {
                    token,
                    request,
                    arm: arm && i + 1 == last,
                }),
        );
    }

    /// Sends the round's bus calls, in order; each reply goes back to its
    /// connection's core, whose new calls are sent in turn until none is left. A
    /// call returns its reply and nothing else: the mailboxes it filled are settled
    /// after the round (`handoff`).
    pub(super) fn send_calls(&mut self) {
        while !self.calls.is_empty() {
            let mut calls = std::mem::take(&mut self.calls);
            for call in calls.drain(..) {
                // A round's end under a storm is hundreds of calls: a back-end's
                // query is read and answered between them.
                self.worked(askers::EVENT);
                let reply = self.dispatch(call.token, call.request);
                let Some(index) = self.conns.live(call.token) else {
                    continue;
                };
                let armed = match reply {
                    Some(reply) => self.with_core(index, |conn, cx| conn.handle_reply(cx, reply)),
                    None => false,
                };
                // The timer the core set with this call, unless its reply armed a
                // newer one.
                if call.arm && !armed && self.conns.live(call.token).is_some() {
                    self.arm(index, self.conns[index].conn.deadline());
                }
            }
            if self.calls.is_empty() {
                self.calls = calls; // keeps its capacity
            }
        }
    }

    /// Sends one request of connection `token` over the bus. `/stats` is answered
    /// here: the document is this process's.
    fn dispatch(&mut self, token: u32, request: Request) -> Option<Reply> {
        if askers::is_query(&request) {
            self.note_asker(token);
        }
        if let Request::Stats = request {
            return Some(Reply::Stats((self.gateway.stats)()));
        }
        let conn = ConnRef {
            loop_id: self.id,
            token,
        };
        self.called = true;
        let reply = self.gateway.bus.call(conn, request);
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
        if self.conns[index].stream.is_none() {
            return self.h2_stream_send(index, coalesce);
        }
        if self.tls.is_some() {
            return self.tls_send(index, coalesce);
        }
        let slot = &mut self.conns[index];
        let len = self.outbox.len();
        if let Some(queue) = slot.out.as_mut() {
            queue.push_outbox(&self.outbox, 0);
            self.writer.add_queued(len);
        } else if coalesce {
            let mut queue = Box::<OutQueue>::default();
            queue.push_outbox(&self.outbox, 0);
            slot.out = Some(queue);
            self.writer.add_queued(len);
            self.writer.mark_dirty(index);
        } else {
            if self.writer.batching() {
                // Sent with the rest of the slice (`submit_sends`); a closing
                // connection is written now, to half-close after its last bytes.
                let closing = slot.conn.is_closing();
                let stream = slot.stream.as_ref().expect("checked at the top");
                let fd = stream.as_raw_fd();
                if !closing && self.writer.gather(index, fd, &self.outbox) {
                    self.outbox.clear_bytes();
                    return true;
                }
                // Written now: what is gathered (maybe this connection's earlier
                // bytes) leaves first.
                self.submit_sends();
                if !self.conns.contains(index) {
                    self.outbox.clear_bytes();
                    return false; // its gathered send failed: closed
                }
            }
            let slot = &mut self.conns[index];
            let stream = slot.stream.as_mut().expect("checked at the top");
            match write_now(stream, &self.outbox) {
                Ok((n, rest)) => {
                    self.metrics
                        .bytes_out
                        .fetch_add(n as u64, Ordering::Relaxed);
                    match rest {
                        Some(queue) => {
                            self.writer.add_queued(queue.bytes());
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

    /// Submits the sends gathered in the writer's ring and applies what became of each:
    /// bytes counted, the rest queued behind the socket, a failed send closed.
    pub(super) fn submit_sends(&mut self) {
        let Some(batch) = self.writer.take_gathered() else {
            return;
        };
        let mut done = self.submit_batch(batch);
        for sent in done.drain(..) {
            let index = sent.index;
            match sent.written {
                Ok(n) => {
                    self.metrics
                        .bytes_out
                        .fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(_) => {
                    self.close(index);
                    continue;
                }
            }
            let Some(rest) = sent.rest else {
                continue;
            };
            let slot = &mut self.conns[index];
            debug_assert!(slot.out.is_none(), "a gathered connection had a queue");
            self.writer.add_queued(rest.bytes());
            slot.out = Some(rest);
            if sent.untried {
                self.flush(index);
            }
        }
        self.writer.recycle(done);
    }

    /// Submits `batch` (taken out of the writer, see [`Writer::submit`]) and counts
    /// its sends. Give the result back to the writer when done with it.
    ///
    /// [`Writer::submit`]: super::writer::Writer::submit
    fn submit_batch(&mut self, batch: SendBatch) -> Vec<Sent> {
        let (done, tried) = self.writer.submit(batch);
        self.metrics
            .batched_sends
            .fetch_add(tried as u64, Ordering::Relaxed);
        done
    }

    /// Flushes the queued output of connections `indexes` with one io_uring submit
    /// (see `flush` for one connection; HTTP/2 streams are flushed one by one).
    pub(super) fn flush_batched(&mut self, indexes: std::ops::Range<usize>) {
        let Some(mut batch) = self.writer.take_for_flush(indexes.len()) else {
            for i in indexes {
                self.flush(self.writer.dirty_at(i));
            }
            return;
        };
        for i in indexes {
            let index = self.writer.dirty_at(i);
            let Some(slot) = self.conns.get(index) else {
                continue;
            };
            match (&slot.out, &slot.stream) {
                (Some(queue), Some(stream)) => batch.add_queue(index, stream.as_raw_fd(), queue),
                (Some(_), None) => self.flush(index),
                (None, _) => {}
            }
        }
        let mut done = self.submit_batch(batch);
        for sent in done.drain(..) {
            let index = sent.index;
            let queue = self.conns[index]
                .out
                .as_mut()
                .expect("queued output was sent");
            let before = queue.bytes();
            if let Ok(n) = sent.written {
                queue.consume(n);
            }
            // All it asked went, or nothing was tried: the socket may take more, and
            // no writable edge would come to say so.
            let more = matches!(sent.written, Ok(n) if n == sent.asked) && !queue.is_empty();
            self.flushed(index, before, sent.written);
            if more || sent.untried {
                self.flush(index);
            }
        }
        self.writer.recycle(done);
    }

    /// Writes queued output; drops the queue once it is empty, and half-closes a
    /// closing connection whose last bytes are out.
    pub(super) fn flush(&mut self, index: usize) {
        let Some(slot) = self.conns.get_mut(index) else {
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
        self.flushed(index, before, result);
    }

    /// After queued output of connection `index` was written (`before`: bytes
    /// queued before): the loop's count, reading resumed under the limit, the queue
    /// dropped once empty, a closing connection half-closed, a failed one closed.
    fn flushed(&mut self, index: usize, before: usize, result: io::Result<usize>) {
        let Some(queue) = self.conns[index].out.as_ref() else {
            return;
        };
        let after = queue.bytes();
        self.writer.requeued(before, after);
        if before > self.config.max_queued && after <= self.config.max_queued {
            // Reading and held input paused over the limit may go on (`read_socket`,
            // `run_resumes`); at the next resume pass, never inside this flush.
            let token = self.conns.token(index);
            self.resume.push(token);
            self.reread.push(token);
        }
        match result {
            Ok(n) => {
                self.metrics
                    .bytes_out
                    .fetch_add(n as u64, Ordering::Relaxed);
                if after == 0 {
                    let slot = &mut self.conns[index];
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
                if let Some(index) = self.conns.live(token) {
                    if self.conns[index].queued_bytes() <= self.config.max_queued {
                        self.with_core(index, |conn, cx| conn.handle_bytes(cx, &[]));
                    }
                }
            }
            let Some(token) = self.reread.pop() else {
                return;
            };
            if let Some(index) = self.conns.live(token) {
                self.read_socket(index);
                // An HTTP/2 connection's socket drained: its streams' data moves.
                self.h2_pump(index);
            }
        }
    }

    /// Closes connection `index` now: the core's logout joins the round's calls, the
    /// slot is freed and the socket closed (which also removes it from epoll).
    pub(super) fn close(&mut self, index: usize) {
        // Bytes gathered for this connection leave before its socket closes.
        if self.writer.holds(index) {
            self.submit_sends();
        }
        self.h2_close_streams(index);
        let Some((slot, credentials, key)) = self.conns.for_core(index) else {
            return;
        };
        let mut cx = Cx {
            now: self.timers.now(),
            config: &self.config,
            queued: 0,
            out: &mut self.outbox,
            credentials,
            key,
        };
        slot.conn.handle_close(&mut cx);
        self.outbox.clear_bytes();
        self.outbox.take_timer();
        self.outbox.take_resume();
        self.outbox.take_close();
        // The logout is sent with the round's calls, after whatever fan-out or
        // write closed this connection.
        self.outbox.take_requests(&mut self.requests);
        self.queue_calls(index, false);
        let slot = self.conns.remove(index);
        self.tls_forget(index);
        self.h2_forget(index);
        self.writer.remove_queued(slot.queued_bytes());
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
