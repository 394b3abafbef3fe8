//! Accepting sockets: the process and per-address limits (503 + Retry-After beyond
//! them), TCP_NODELAY, a slab slot and the head timeout.

use super::slot::{self, Slot, MAX_SLOTS_PER_LOOP};
use super::EventLoop;
use crate::core::Connection;
use crate::gateway::ip_key;
use mio::net::TcpStream;
use mio::{Interest, Token};
use std::io;
use std::sync::atomic::Ordering;

impl EventLoop {
    pub(super) fn accept_all(&mut self) {
        if self.drain.is_some() {
            return; // the listener is shut (draining)
        }
        loop {
            match self.listener.accept() {
                Ok((stream, addr)) => self.on_accept(stream, addr),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE / ENFILE: out of descriptors. Leave the rest in the backlog
                    // and retry on the next tick (edge-triggered: no new event would come).
                    tracing::warn!(loop_id = self.id, error = %e, "accept failed; pausing accepts for a tick");
                    self.accept_paused = true;
                    return;
                }
            }
        }
    }

    fn on_accept(&mut self, mut stream: TcpStream, addr: std::net::SocketAddr) {
        let ip_key = if self.gateway.config.max_per_ip > 0 {
            ip_key(addr.ip())
        } else {
            0
        };
        if let Err(why) = self.gateway.admit(ip_key) {
            return reject(&mut stream, why);
        }
        // The listener has TCP_NODELAY and Linux copies it to accepted sockets; the
        // first accept checks that once, so the storm path saves a setsockopt each.
        if self.gateway.config.tcp_nodelay && !self.nodelay_inherited {
            if stream.nodelay().unwrap_or(false) {
                self.nodelay_inherited = true;
            } else {
                let _ = stream.set_nodelay(true);
            }
        }
        let entry = self.slots.vacant_entry();
        let index = entry.key();
        if index >= MAX_SLOTS_PER_LOOP {
            self.gateway.release(ip_key);
            return reject(&mut stream, "too many connections in this loop");
        }
        if self.gens.len() <= index {
            self.gens.resize(index + 1, 0);
        }
        let mut conn = Connection::new();
        conn.set_peer_loopback(addr.ip().to_canonical().is_loopback());
        let slot = entry.insert(Slot {
            conn,
            out: None,
            stream,
            ip_key,
        });
        if let Err(e) = self.poll.registry().register(
            &mut slot.stream,
            Token(index),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            tracing::warn!(error = %e, "register failed");
            self.slots.remove(index);
            self.gateway.release(ip_key);
            return;
        }
        self.metrics.connects.fetch_add(1, Ordering::Relaxed);
        self.metrics.connections.fetch_add(1, Ordering::Relaxed);
        debug_assert_eq!(slot::untoken(slot::token(index, self.gens[index])).0, index);
        self.with_core(index, |conn, cx| conn.handle_open(cx));
    }
}

/// Answers a connection we will not keep (over a limit) and drops it.
fn reject(stream: &mut TcpStream, why: &str) {
    let mut response = Vec::with_capacity(160);
    wire::write_error_response(&mut response, 503, why, false, &[("Retry-After", "1")]);
    // Best effort: a fresh socket's send buffer takes a short response at once.
    let _ = io::Write::write(stream, &response);
    let _ = stream.shutdown(std::net::Shutdown::Write);
}
