//! Deliveries and heartbeats: a batch from the router becomes bytes on sockets.
//!
//! Each message is encoded once per transport and loop (shared `Bytes`); only the SSE
//! `id:` line is per recipient, formatted on the stack. A connection with nothing queued
//! is written at once; when several batches arrive together, they are queued first and
//! every connection is flushed with one writev (coalescing).

use crate::config::SlowPolicy;
use crate::conn::State;
use crate::event_loop::EventLoop;
use crate::output::Part;
use crate::shared::{self, Delivery};
use bytes::Bytes;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The shared encodings of one message, made on first use.
#[derive(Default)]
struct Encoded {
    chunk: Option<Bytes>,
    sse: Option<Bytes>,
    ws: Option<Bytes>,
}

impl EventLoop {
    pub(crate) fn deliver(&mut self, delivery: Delivery, coalesce: bool) {
        let mut enc = Encoded::default();
        let payload = &delivery.msg.payload;
        let mut delivered = 0u64;
        let mut polls = Vec::new();
        for &(token, seq) in &delivery.targets {
            let (index, gen) = shared::untoken(token);
            let Some(conn) = self.conns.get(index) else {
                continue;
            };
            if conn.gen != gen {
                continue; // planned for a connection that has closed since
            }
            let state = conn.state;
            if state == State::PollWaiting {
                polls.push(index);
                continue;
            }
            if !state.is_subscription() {
                continue; // a poll connection between requests: history keeps it
            }
            if !self.admit_output(index, payload.len() + 32) {
                continue;
            }
            let sent = match state {
                State::Stream => {
                    // One chunk per message, newline-terminated so line readers (curl,
                    // classic comet clients) see one message per line.
                    let chunk = enc.chunk.get_or_insert_with(|| {
                        Bytes::from(wire::chunk(&[payload, &b"\n"[..]].concat()))
                    });
                    self.send(index, &[Part::Shared(chunk)], coalesce)
                }
                State::Sse => {
                    let data = enc
                        .sse
                        .get_or_insert_with(|| Bytes::from(wire::sse_data(payload)));
                    let mut line = [0u8; 32];
                    let len = sse_id_line(&mut line, seq);
                    self.send(
                        index,
                        &[Part::Copy(&line[..len]), Part::Shared(data)],
                        coalesce,
                    )
                }
                _ => {
                    let frame = enc
                        .ws
                        .get_or_insert_with(|| Bytes::from(wire::ws_text_frame(payload)));
                    self.send(index, &[Part::Shared(frame)], coalesce)
                }
            };
            delivered += sent as u64;
        }
        for index in polls {
            self.answer_poll(index);
            delivered += 1;
        }
        self.metrics
            .messages_out
            .fetch_add(delivered, Ordering::Relaxed);
        self.metrics
            .record_delivery_latency(Instant::now().saturating_duration_since(delivery.published));
    }

    /// Applies the slow-consumer policy (SPEC D4) before queueing `extra` more bytes.
    fn admit_output(&mut self, index: usize, extra: usize) -> bool {
        let Some(conn) = self.conns.get(index) else {
            return false;
        };
        let queued = conn.queued_bytes();
        if queued == 0 || queued + extra <= self.shared.config.max_queued {
            return true;
        }
        self.metrics.slow_drops.fetch_add(1, Ordering::Relaxed);
        match self.shared.config.slow_policy {
            SlowPolicy::Drop => false,
            SlowPolicy::Disconnect => {
                self.close(index);
                false
            }
        }
    }

    /// A heartbeat on an idle subscription; skipped while output is queued anyway.
    pub(crate) fn heartbeat(&mut self, index: usize) {
        let Some(conn) = self.conns.get(index) else {
            return;
        };
        if conn.out.is_none() {
            let beat: &'static [u8] = match conn.state {
                State::Stream => wire::STREAM_HEARTBEAT,
                State::Sse => wire::SSE_HEARTBEAT,
                _ => HEARTBEAT_PING.get_or_init(|| wire::ws_ping(b"")).as_slice(),
            };
            let beat = Bytes::from_static(beat);
            if !self.send(index, &[Part::Shared(&beat)], false) {
                return;
            }
        }
        self.set_heartbeat(index);
    }
}

/// The WebSocket heartbeat frame, built once per process.
static HEARTBEAT_PING: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

/// Writes "id: <seq>\n" into `buf` and returns its length (no allocation per delivery).
fn sse_id_line(buf: &mut [u8; 32], seq: u64) -> usize {
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    // 4 + 20 digits + 1 fits in 32 bytes.
    writeln!(cursor, "id: {seq}").expect("fits in 32 bytes");
    cursor.position() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_id_line_matches_the_codec() {
        let mut buf = [0u8; 32];
        for seq in [0, 7, u64::MAX] {
            let n = sse_id_line(&mut buf, seq);
            assert_eq!(&buf[..n], &wire::sse_id(seq)[..]);
        }
    }
}
