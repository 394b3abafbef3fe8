//! Reading a connection of the engine: its bytes through TLS and the scanner into
//! the counts and the latency histograms, and what the response says (opened,
//! failed, ended, the next long-poll request).

use super::{Conn, Engine, AWAIT_HEAD, CONNECTING, OPEN};
use crate::flood::request::{send, write_once, ws_frame};
use crate::flood::scan::{Event, Transport};
use crate::flood::stamp::{self, LatencyAt};
use host::sys;
use std::io::{self, Read};
use std::os::fd::AsRawFd;

impl Engine<'_> {
    /// Takes everything the socket of `slot` holds: decrypts it (TLS), scans it
    /// (response head, messages, stamps, pings, end), and acts on what it found.
    /// `closed`: the event reported the peer's FIN, which must be read to its EOF
    /// here — an edge-triggered socket gives no further event for it.
    pub(super) fn read(&mut self, slot: usize, closed: bool) {
        let transport = self.plan.transport;
        let stamped = self.plan.latency_at == LatencyAt::Socket;
        loop {
            let Some(Some(conn)) = self.slab.get_mut(slot) else {
                return;
            };
            if conn.phase == CONNECTING {
                return;
            }
            let got = if stamped {
                stamp::recv(conn.sock.as_raw_fd(), &mut self.scratch)
            } else {
                conn.sock.read(&mut self.scratch).map(|n| (n, None))
            };
            let (n, arrived_us) = match got {
                Ok((0, _)) => return self.end(slot, None),
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return self.end(slot, Some(e)),
            };
            self.tally.counts.bytes += n as u64;
            // TLS: decrypt in place into the shared plaintext buffer, send what the
            // session answers (handshake flight, KeyUpdate, alert), and once the
            // handshake is done, the request.
            let mut plain = std::mem::take(&mut self.plain);
            plain.clear();
            let mut peer_closed = false;
            if let Some(t) = conn.tls.as_mut() {
                self.tls_out.clear();
                let r = t.handle_input(&mut self.scratch[..n], &mut self.tls_out, &mut plain);
                let wrote = write_once(&mut &conn.sock, &self.tls_out);
                self.plain = plain;
                let st = match r {
                    Ok(st) => st,
                    Err(_) => return self.tls_failed(slot),
                };
                if let Err(e) = wrote {
                    return self.end(slot, Some(e));
                }
                if st.established {
                    if let Err(e) = self.send_request(slot) {
                        return self.fail(slot, Some(e));
                    }
                }
                peer_closed = st.peer_closed;
                plain = std::mem::take(&mut self.plain);
            }
            // Only the slot's own fields below; the borrow of `self.slab` is re-taken.
            let Some(Some(conn)) = self.slab.get_mut(slot) else {
                self.plain = plain;
                return;
            };
            let data = if conn.tls.is_some() {
                &plain[..]
            } else {
                &self.scratch[..n]
            };
            let now_us = arrived_us.unwrap_or_else(sys::unix_micros);
            let (counts, hist_tick, hist_all) = (
                &mut self.tally.counts,
                &mut self.tally.hist_tick,
                &mut self.tally.hist_all,
            );
            let mut head: Option<u16> = None;
            let (mut end, mut bad, mut body_done) = (peer_closed, false, false);
            let mut subscribed = false;
            let plan = self.plan;
            let subscribe = &plan.pusher_subscribe[..];
            let (seed, tls_out) = (&mut self.mask_seed, &mut self.tls_out);
            let Conn {
                sock,
                scan,
                tls,
                local,
                ..
            } = &mut *conn;
            let mut track = self.tracks.get_mut(*local as usize);
            scan.handle_bytes(transport, data, &mut |e| match e {
                Event::Head(s) => head = Some(s),
                Event::Message => {
                    if track.as_deref_mut().is_none_or(|t| t.on_message(transport)) {
                        counts.messages += 1;
                    }
                }
                Event::Body(b) => {
                    if let Some(t) = track.as_deref_mut() {
                        t.feed(transport, b, &mut counts.resume);
                    }
                }
                Event::Stamp(ts) => {
                    let lat = now_us.saturating_sub(ts).max(1);
                    hist_tick.saturating_record(lat);
                    hist_all.saturating_record(lat);
                }
                Event::Ping(p) => {
                    // Answer at once: a pong is tiny and the socket buffer is nearly empty.
                    *seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    let pong = ws_frame(wire::Opcode::Pong, p, *seed);
                    let _ = send(sock, tls.as_deref_mut(), &pong, tls_out);
                }
                Event::Answer(text) => {
                    *seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    let frame = ws_frame(wire::Opcode::Text, text, *seed);
                    let _ = send(sock, tls.as_deref_mut(), &frame, tls_out);
                }
                Event::Subscribe => {
                    *seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    let frame = ws_frame(wire::Opcode::Text, subscribe, *seed);
                    let _ = send(sock, tls.as_deref_mut(), &frame, tls_out);
                }
                Event::Subscribed => subscribed = true,
                Event::Refused => bad = true,
                Event::End => end = true,
                Event::BodyDone { .. } => {
                    body_done = true;
                    if let Some(t) = track.as_deref_mut() {
                        t.body_done(&mut counts.resume);
                    }
                }
                Event::Malformed => bad = true,
            });
            self.plain = plain;
            if let Some(status) = head {
                let good = if transport.is_ws() {
                    status == 101
                } else {
                    status == 200
                };
                if !good {
                    return self.fail_status(slot);
                }
                // A Pusher client is open once subscribed (below), not at the upgrade.
                if conn.phase == AWAIT_HEAD && transport != Transport::Pusher {
                    conn.phase = OPEN;
                    match self.tracks.get_mut(conn.local as usize) {
                        Some(t) if t.retry => {
                            (t.retry, t.attempt) = (false, 0);
                            self.tally.reopened();
                        }
                        _ => self.tally.opened(),
                    }
                }
            }
            if subscribed && conn.phase == AWAIT_HEAD {
                conn.phase = OPEN;
                self.tally.opened();
            }
            if bad {
                return self.fail_status(slot);
            }
            if end {
                if transport.is_ws() {
                    let close = ws_frame(wire::Opcode::Close, &[], self.mask_seed);
                    let _ = send(
                        &conn.sock,
                        conn.tls.as_deref_mut(),
                        &close,
                        &mut self.tls_out,
                    );
                }
                return self.end(slot, None);
            }
            if body_done {
                conn.scan.next_response();
                if let Err(e) = self.send_request(slot) {
                    return self.end(slot, Some(e));
                }
            }
            // A short read drained the socket, and with edge triggering later bytes
            // bring a new event: the read that would only say EAGAIN is skipped (it
            // was every other read syscall in a broadcast, one message per event).
            // Not when the FIN came with the bytes (a server's goodbye, then its
            // close): no event would come for it, and the connection would look
            // open forever and never reconnect.
            if n < self.scratch.len() && !closed {
                return;
            }
        }
    }
}
