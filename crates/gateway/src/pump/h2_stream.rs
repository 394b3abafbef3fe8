//! HTTP/2 streams as virtual connections (see `h2`): a complete request becomes a slot
//! with a core of its own; what that core writes is read as an HTTP/1.1 response
//! (`wire::h2::ResponseReader`) and framed on the stream's connection.
//!
//! Flow control for slow readers (crates/tls/README.md): a DATA frame leaves only
//! within both the stream's and the connection's send window. What the windows do not
//! allow waits in the stream slot's own output queue (`Slot::out`, body bytes), so the
//! core sees it as queued output and applies `--slow-policy` to that stream alone:
//! `disconnect` resets it (RST_STREAM CANCEL), `drop` skips deliveries and the
//! sequence gap shows it. Other streams go on. When the *socket* does not take the
//! connection's output (its queue is over `--max-queued`), the whole connection is the
//! slow consumer: with `disconnect` it is closed, with `drop` streams queue (each
//! bounded by `--max-queued`) until it drains.

use super::h2::{H2Layer, NONE};
use super::output::OutQueue;
use super::slot::Slot;
use super::EventLoop;
use bytes::Bytes;
use connection::{Connection, SlowPolicy};
use std::io;
use wire::h2::{self as frames, code, Framing, Part};

/// DATA frames into `out`, within `budget` bytes and the peer's frame size; then
/// `WouldBlock`, so `OutQueue::flush` stops there.
struct DataWriter<'a> {
    out: &'a mut Vec<u8>,
    id: u32,
    budget: usize,
    max_frame: usize,
}

impl io::Write for DataWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(self.budget).min(self.max_frame);
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        frames::write_data(self.out, self.id, false, &buf[..n]);
        self.budget -= n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl EventLoop {
    fn h2_layer(&mut self) -> &mut H2Layer {
        self.h2
            .as_mut()
            .expect("an HTTP/2 stream on a loop without HTTP/2")
    }

    /// Stream `id` of connection `parent` has its header block: a virtual slot and a
    /// core for it, which reads the request as an HTTP/1.1 head and answers what it
    /// refuses (a key, a token, a route, a stated size) before any body is held.
    pub(super) fn h2_request(&mut self, parent: usize, id: u32) {
        let h2 = self.h2_layer();
        let Some(conn) = h2.conns[parent].as_deref_mut() else {
            return;
        };
        let loopback = conn.loopback;
        let Some(stream) = conn.stream_by_id(id) else {
            return;
        };
        let head = std::mem::take(&mut stream.head);
        let Some(index) = self.conns.vacant() else {
            return self.h2_refuse(parent, id, code::REFUSED_STREAM);
        };
        let h2 = self.h2_layer();
        if h2.parent.len() <= index {
            h2.parent.resize(index + 1, NONE);
        }
        h2.parent[index] = parent as u32;
        if let Some(stream) = h2.conns[parent]
            .as_deref_mut()
            .and_then(|c| c.stream_by_id(id))
        {
            stream.slot = index as u32;
        }
        let mut conn = Connection::new();
        conn.set_peer_loopback(loopback);
        conn.set_multiplexed();
        self.conns.insert(Slot {
            conn,
            out: None,
            stream: None,
            ip_key: 0,
        });
        self.with_core(index, |conn, cx| conn.handle_open(cx));
        if self.conns.contains(index) && self.h2_layer().parent_of(index) == Some(parent) {
            self.with_core(index, |conn, cx| conn.handle_bytes(cx, &head));
        }
    }

    /// Stream `id` of connection `parent` staged body bytes, or its request ended:
    /// they go to its core in the head's framing, and the stream's credit goes back
    /// to the peer now that the core has them.
    pub(super) fn h2_body(&mut self, parent: usize, id: u32) {
        let Some(conn) = self.h2_layer().conns[parent].as_deref_mut() else {
            return;
        };
        let Some(stream) = conn.stream_by_id(id) else {
            return;
        };
        if stream.slot == NONE {
            return;
        }
        let index = stream.slot as usize;
        let staged = std::mem::take(&mut stream.staged);
        let flow = std::mem::take(&mut stream.staged_flow);
        let end = stream.remote_closed && !stream.end_fed;
        stream.end_fed |= end;
        let chunked = stream.framing == Framing::Chunked;
        stream.recv_window += i64::from(flow);
        let mut bytes = Vec::with_capacity(staged.len() + 16);
        if chunked && !staged.is_empty() {
            bytes.extend_from_slice(format!("{:x}\r\n", staged.len()).as_bytes());
            bytes.extend_from_slice(&staged);
            bytes.extend_from_slice(b"\r\n");
        } else {
            bytes.extend_from_slice(&staged);
        }
        if end && chunked {
            bytes.extend_from_slice(b"0\r\n\r\n");
        }
        if flow > 0 && !end {
            let mut credit = Vec::with_capacity(13);
            frames::write_window_update(&mut credit, id, flow);
            if !self.h2_write(parent, &credit, false) {
                return;
            }
        }
        if !bytes.is_empty() && self.conns.contains(index) {
            self.with_core(index, |conn, cx| conn.handle_bytes(cx, &bytes));
        }
    }

    /// Resets stream `id` with `code` (no core ever ran for it).
    fn h2_refuse(&mut self, parent: usize, id: u32, code: u32) {
        if let Some(conn) = self.h2_layer().conns[parent].as_deref_mut() {
            conn.streams.retain(|s| s.id != id);
        }
        let mut out = Vec::with_capacity(13);
        frames::write_rst_stream(&mut out, id, code);
        if self.h2_write(parent, &out, false) {
            self.h2_finish_if_idle(parent);
        }
    }

    /// The peer reset stream `id`: its virtual connection closes (logout), no answer.
    pub(super) fn h2_reset(&mut self, parent: usize, id: u32) {
        let Some(conn) = self.h2_layer().conns[parent].as_deref_mut() else {
            return;
        };
        let Some(pos) = conn.streams.iter().position(|s| s.id == id) else {
            return;
        };
        let stream = conn.streams.swap_remove(pos);
        if stream.slot != NONE {
            self.close(stream.slot as usize);
        }
        self.h2_finish_if_idle(parent);
    }

    /// Windows opened on connection `parent`: queued stream data moves.
    pub(super) fn h2_pump(&mut self, parent: usize) {
        let Some(conn) = self
            .h2
            .as_ref()
            .and_then(|h| h.conns.get(parent)?.as_deref())
        else {
            return;
        };
        let waiting: Vec<usize> = conn
            .streams
            .iter()
            .filter(|s| s.slot != NONE)
            .map(|s| s.slot as usize)
            .filter(|&i| self.conns.get(i).is_some_and(|s| s.out.is_some()))
            .collect();
        for index in waiting {
            if !self.conns.contains(parent) {
                return;
            }
            self.h2_flush_stream(index);
        }
    }

    /// Connection `index` is going: its streams' virtual connections close first.
    pub(super) fn h2_close_streams(&mut self, index: usize) {
        let Some(conn) = self
            .h2
            .as_mut()
            .and_then(|h| h.conns.get_mut(index)?.as_deref_mut())
        else {
            return;
        };
        let streams = std::mem::take(&mut conn.streams);
        for stream in streams {
            if stream.slot != NONE {
                self.close(stream.slot as usize);
            }
        }
    }

    /// Slot `index` is being freed: a stream leaves its connection (reset with CANCEL
    /// unless its response ended), a connection leaves the table.
    pub(super) fn h2_forget(&mut self, index: usize) {
        let Some(h2) = self.h2.as_mut() else {
            return;
        };
        if let Some(conn) = h2.conns.get_mut(index) {
            *conn = None;
        }
        let Some(parent) = h2.parent_of(index) else {
            return;
        };
        h2.parent[index] = NONE;
        let Some(conn) = h2.conns[parent].as_deref_mut() else {
            return;
        };
        let pos = conn.streams.iter().position(|s| s.slot == index as u32);
        let stream = pos.map(|pos| conn.streams.swap_remove(pos));
        let gone = conn.gone;
        // A POST waiting for this stream hears it went.
        self.h2_orphans(parent);
        let Some(stream) = stream else {
            return;
        };
        if !gone {
            let mut out = Vec::with_capacity(13);
            frames::write_rst_stream(&mut out, stream.id, code::CANCEL);
            if self.h2_write(parent, &out, false) {
                self.h2_finish_if_idle(parent);
            }
        }
    }

    /// Sends what stream slot `index`'s core wrote: HEADERS, then DATA within the
    /// windows, the rest queued on the stream; END_STREAM closes the stream's slot.
    /// False if the slot was closed.
    pub(super) fn h2_stream_send(&mut self, index: usize, coalesce: bool) -> bool {
        let h2 = self
            .h2
            .as_mut()
            .expect("stream send on a loop without HTTP/2");
        let Some(parent) = h2.parent_of(index) else {
            self.outbox.clear_bytes();
            self.close(index);
            return false;
        };
        h2.gathered.clear();
        for piece in self.outbox.pieces() {
            h2.gathered.extend_from_slice(self.outbox.slice(piece));
        }
        self.outbox.clear_bytes();
        // SPEC D4: the connection is judged on what its socket refused, not on what a
        // merged delivery pass queued without a try (50 streams' frames per message).
        if self.conns[parent].queued_bytes() > self.config.max_queued {
            self.flush(parent);
            if !self.conns.contains(index) {
                self.discard_stale_outbox();
                return false; // the write failed: closed with its connection
            }
        }
        let h2 = self
            .h2
            .as_mut()
            .expect("stream send on a loop without HTTP/2");
        let mut out = std::mem::take(&mut h2.out);
        let mut body = std::mem::take(&mut h2.body);
        out.clear();
        body.clear();
        let H2Layer {
            conns, gathered, ..
        } = h2;
        let conn = conns[parent]
            .as_deref_mut()
            .expect("a stream's connection is open");
        let pos = conn
            .streams
            .iter()
            .position(|s| s.slot == index as u32)
            .expect("an open stream slot is in its connection");
        let id = conn.streams[pos].id;
        let mut ended = false;
        let mut refused = false;
        let read = conn.streams[pos].reader.feed(gathered, |part| match part {
            Part::Head { status, headers } => {
                refused = status == 401;
                let list: Vec<(&[u8], &[u8])> = headers.iter().map(|(n, v)| (&n[..], *v)).collect();
                frames::write_headers(&mut out, id, status, &list, false);
            }
            Part::Body(b) => body.extend_from_slice(b),
            Part::End => ended = true,
        });
        let mut finished = false;
        if let Err(e) = read {
            tracing::warn!(error = %e, "http/2 stream response not understood");
            frames::write_rst_stream(&mut out, id, code::INTERNAL_ERROR);
            conn.streams.swap_remove(pos);
            finished = true;
        } else {
            let slot_queued = self.conns[index].out.is_some();
            let parent_blocked = self.conns[parent].queued_bytes() > self.config.max_queued;
            let stream = &mut conn.streams[pos];
            let mut sent = 0;
            if !slot_queued && !parent_blocked {
                let budget = stream.window.min(conn.window).max(0) as usize;
                let budget = budget.min(body.len());
                let max_frame = conn.max_frame as usize;
                let all = budget == body.len();
                for chunk in body[..budget].chunks(max_frame) {
                    sent += chunk.len();
                    frames::write_data(&mut out, id, ended && all && sent == budget, chunk);
                }
                if ended && all && budget == 0 {
                    frames::write_data(&mut out, id, true, &[]);
                }
                stream.window -= sent as i64;
                conn.window -= sent as i64;
            }
            let rest = &body[sent..];
            if !rest.is_empty() {
                let slot = &mut self.conns[index];
                slot.out
                    .get_or_insert_with(Box::<OutQueue>::default)
                    .push(Bytes::copy_from_slice(rest));
                self.writer.add_queued(rest.len());
            }
            if ended {
                if self.conns[index].out.is_none() {
                    if !stream.remote_closed {
                        // Answered before the request's end (a refusal): the client
                        // may stop sending (RFC 9113 8.1).
                        frames::write_rst_stream(&mut out, id, code::NO_ERROR);
                    }
                    conn.streams.swap_remove(pos);
                    finished = true;
                } else {
                    stream.end_queued = true;
                }
            }
            if parent_blocked && self.config.slow_policy == SlowPolicy::Disconnect {
                // The socket does not take the connection's output: the whole
                // connection is the slow consumer.
                self.h2_restore(out, body);
                self.close(parent);
                return false;
            }
        }
        // Refused credentials count for the whole connection, as on HTTP/1.1: each
        // stream is a new try at a signature check.
        let too_many = refused && conn.auth_failed();
        let alive = out.is_empty() || self.h2_write(parent, &out, coalesce);
        self.h2_restore(out, body);
        if too_many && alive {
            // The goaway closes the streams it still lists; a finished one is not.
            if finished && self.conns.contains(index) {
                self.close(index);
            }
            self.h2_goaway(parent, code::ENHANCE_YOUR_CALM);
            return false;
        }
        if finished || !alive {
            if self.conns.contains(index) {
                self.close(index);
                self.h2_finish_if_idle(parent);
            } else {
                self.discard_stale_outbox();
            }
            return false;
        }
        true
    }

    /// The stream's slot closed with its connection while this call's outbox was set
    /// aside: what the core asked for besides bytes belongs to a closed slot.
    fn discard_stale_outbox(&mut self) {
        self.outbox.take_timer();
        self.outbox.take_resume();
        self.outbox.take_close();
        let mut stale = Vec::new();
        self.outbox.take_requests(&mut stale);
    }

    fn h2_restore(&mut self, out: Vec<u8>, body: Vec<u8>) {
        if let Some(h2) = self.h2.as_mut() {
            h2.out = out;
            h2.body = body;
        }
    }

    /// Moves stream slot `index`'s queued body bytes into DATA frames as far as the
    /// windows and the connection's socket allow (the stream's `flush`).
    pub(super) fn h2_flush_stream(&mut self, index: usize) {
        let Some(h2) = self.h2.as_mut() else {
            return;
        };
        let Some(parent) = h2.parent_of(index) else {
            return;
        };
        let mut out = std::mem::take(&mut h2.out);
        out.clear();
        let Some(conn) = h2.conns[parent].as_deref_mut() else {
            return;
        };
        let Some(pos) = conn.streams.iter().position(|s| s.slot == index as u32) else {
            return;
        };
        let Some(mut queue) = self.conns[index].out.take() else {
            return;
        };
        let stream = &mut conn.streams[pos];
        let blocked = self.conns[parent].queued_bytes() > self.config.max_queued;
        let budget = if blocked {
            0
        } else {
            stream.window.min(conn.window).max(0) as usize
        };
        let before = queue.bytes();
        let mut writer = DataWriter {
            out: &mut out,
            id: stream.id,
            budget,
            max_frame: conn.max_frame as usize,
        };
        let _ = queue.flush(&mut writer);
        let moved = before - queue.bytes();
        stream.window -= moved as i64;
        conn.window -= moved as i64;
        self.writer.remove_queued(moved);
        let mut finished = false;
        if queue.is_empty() {
            if stream.end_queued {
                frames::write_data(&mut out, stream.id, true, &[]);
                if !stream.remote_closed {
                    frames::write_rst_stream(&mut out, stream.id, code::NO_ERROR);
                }
                conn.streams.swap_remove(pos);
                finished = true;
            }
        } else {
            self.conns[index].out = Some(queue);
        }
        let alive = out.is_empty() || self.h2_write(parent, &out, false);
        if let Some(h2) = self.h2.as_mut() {
            h2.out = out;
        }
        // A finished stream's slot goes even when its last write failed (that closed
        // the connection, which no longer lists this stream).
        if finished && self.conns.contains(index) {
            self.close(index);
        }
        if finished && alive {
            self.h2_finish_if_idle(parent);
        }
    }
}
