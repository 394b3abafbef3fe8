//! What the event loops of one process share: the router, the store, the inboxes that
//! carry delivery batches between loops, and the counters behind the limits.
//!
//! Lock order: `router` before any `inbox`; `store` is never held with `router`.

use crate::config::ServerConfig;
use bytes::Bytes;
use observe::metrics::ProcessMetrics;
use parking_lot::Mutex;
use router::{ConnRef, Message, PublishCounts, Router};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use store::Store;

/// A message for some connections of one loop: one batch per publish and loop, so
/// deliveries cross threads in bulk, never one by one.
pub struct Delivery {
    pub msg: Arc<Message>,
    pub published: Instant,
    /// (connection token, the recipient user's sequence number for this message)
    pub targets: Vec<(u32, u64)>,
}

pub enum Command {
    Deliver(Delivery),
    Shutdown,
}

/// A loop's mailbox: commands queue here and the loop's waker is poked once per batch.
pub struct LoopHandle {
    inbox: Mutex<Vec<Command>>,
    waker: mio::Waker,
}

impl LoopHandle {
    pub fn new(waker: mio::Waker) -> LoopHandle {
        LoopHandle {
            inbox: Mutex::new(Vec::new()),
            waker,
        }
    }

    pub fn send(&self, cmd: Command) {
        self.push(cmd, true);
    }

    /// Queues without waking: for the loop's own inbox, which it drains right away.
    pub fn send_quiet(&self, cmd: Command) {
        self.push(cmd, false);
    }

    fn push(&self, cmd: Command, wake: bool) {
        let mut inbox = self.inbox.lock();
        let was_empty = inbox.is_empty();
        inbox.push(cmd);
        drop(inbox);
        if was_empty && wake {
            // A wake failure means the loop's poll is gone: the loop is shutting down.
            let _ = self.waker.wake();
        }
    }

    /// Swaps the queued commands into `into` (which must be empty).
    pub fn drain(&self, into: &mut Vec<Command>) {
        std::mem::swap(&mut *self.inbox.lock(), into);
    }
}

/// A connection token as the router and the wheel see it: slab index and generation.
pub fn token(index: usize, gen: u8) -> u32 {
    ((index as u32) << 8) | gen as u32
}

/// The inverse of [`token`].
pub fn untoken(token: u32) -> (usize, u8) {
    ((token >> 8) as usize, token as u8)
}

/// Slab slots per loop at most: 24 bits of the token are the index.
pub const MAX_SLOTS_PER_LOOP: usize = 1 << 24;

pub struct Shared {
    pub config: ServerConfig,
    pub router: Mutex<Router>,
    pub store: Mutex<Box<dyn Store>>,
    pub metrics: Arc<ProcessMetrics>,
    pub loops: Vec<LoopHandle>,
    /// Open client connections of this process, for `max_connections`.
    pub connections: AtomicUsize,
    /// Connections per source address, only when `max_per_ip` is set.
    pub per_ip: Mutex<HashMap<u32, u32>>,
    pub shutdown: AtomicBool,
}

impl Shared {
    /// Publishes `payload` to `subject`: plans the fan-out under the router lock and hands
    /// every loop its batch before releasing it, so each loop receives the deliveries of
    /// one user in sequence order whichever loop published them. `from` is the calling
    /// loop, which drains its own inbox right after (no wake-up needed for it).
    pub fn publish(&self, subject: u64, payload: Bytes, from: u16) -> PublishCounts {
        let msg = Arc::new(Message { subject, payload });
        let published = Instant::now();
        let mut per_loop: Vec<Vec<(u32, u64)>> =
            (0..self.loops.len()).map(|_| Vec::new()).collect();
        let mut router = self.router.lock();
        let counts = router.handle_publish(msg.clone(), published, &mut |conn: ConnRef, seq| {
            per_loop[conn.shard as usize].push((conn.token, seq));
        });
        for (shard, targets) in per_loop.into_iter().enumerate() {
            if !targets.is_empty() {
                let delivery = Command::Deliver(Delivery {
                    msg: msg.clone(),
                    published,
                    targets,
                });
                if from == shard as u16 {
                    self.loops[shard].send_quiet(delivery);
                } else {
                    self.loops[shard].send(delivery);
                }
            }
        }
        drop(router);
        counts
    }

    /// Reserves a connection slot; false when the process is full.
    pub fn admit(&self) -> bool {
        let before = self.connections.fetch_add(1, Ordering::AcqRel);
        if before >= self.config.max_connections {
            self.connections.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    pub fn release(&self) {
        self.connections.fetch_sub(1, Ordering::AcqRel);
    }

    /// Counts a connection from `ip_key`; false when that address is at its limit.
    pub fn admit_ip(&self, ip_key: u32) -> bool {
        if self.config.max_per_ip == 0 {
            return true;
        }
        let mut map = self.per_ip.lock();
        let n = map.entry(ip_key).or_insert(0);
        if *n as usize >= self.config.max_per_ip {
            return false;
        }
        *n += 1;
        true
    }

    pub fn release_ip(&self, ip_key: u32) {
        if self.config.max_per_ip == 0 {
            return;
        }
        let mut map = self.per_ip.lock();
        if let Some(n) = map.get_mut(&ip_key) {
            *n -= 1;
            if *n == 0 {
                map.remove(&ip_key);
            }
        }
    }
}

/// A 32-bit key for a peer address (IPv4 as is, IPv6 folded), for per-address limits.
pub fn ip_key(addr: std::net::IpAddr) -> u32 {
    match addr {
        std::net::IpAddr::V4(v4) => u32::from(v4),
        std::net::IpAddr::V6(v6) => {
            let o = v6.octets();
            o.chunks(4).fold(0u32, |acc, c| {
                acc ^ u32::from_be_bytes([c[0], c[1], c[2], c[3]])
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        let t = token(MAX_SLOTS_PER_LOOP - 1, 255);
        assert_eq!(untoken(t), (MAX_SLOTS_PER_LOOP - 1, 255));
        assert_eq!(untoken(token(0, 7)), (0, 7));
    }
}
