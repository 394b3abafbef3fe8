//! [`Gateway`]: what the event loops of one process share — the bus, the loops'
//! mailboxes, the connection limits, the counters and the `/stats` document.

use crate::config::ServerConfig;
use crate::pump::{LoopCell, RUN_ELSEWHERE_MAX};
use bus::{Bus, Mailbox};
use observe::metrics::ProcessMetrics;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The per-address key of connections no per-address limit applies to (loopback
/// peers; an IPv6 address whose folded key is 0 shares this exemption).
pub const NOT_COUNTED: u32 = 0;

/// The `/stats` document of this process (gateway counters and the router's).
pub type StatsFn = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

pub struct Gateway {
    pub config: ServerConfig,
    pub bus: Arc<dyn Bus>,
    /// Indexed by loop id.
    pub mailboxes: Vec<Arc<Mailbox>>,
    /// The loops' states, indexed by loop id (filled by `Server::start`).
    pub(crate) loops: Box<[LoopCell]>,
    pub metrics: Arc<ProcessMetrics>,
    pub stats: StatsFn,
    /// Set by `Server::shutdown`: every loop closes its connections and ends.
    pub stop: AtomicBool,
    /// Set by `Server::drain`: every loop stops accepting and tells its clients to
    /// reconnect, spread until `drain_until`, then ends.
    pub draining: AtomicBool,
    pub drain_until: Mutex<Option<std::time::Instant>>,
    /// Open client connections of this process, for `max_connections`.
    connections: AtomicUsize,
    /// Connections per source address, only when `max_per_ip` is set.
    per_ip: Mutex<HashMap<u32, u32>>,
}

impl Gateway {
    pub fn new(
        config: ServerConfig,
        bus: Arc<dyn Bus>,
        mailboxes: Vec<Arc<Mailbox>>,
        metrics: Arc<ProcessMetrics>,
        stats: StatsFn,
    ) -> Gateway {
        Gateway {
            config,
            bus,
            loops: mailboxes.iter().map(|_| LoopCell::new(None)).collect(),
            mailboxes,
            metrics,
            stats,
            stop: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            drain_until: Mutex::new(None),
            connections: AtomicUsize::new(0),
            per_ip: Mutex::new(HashMap::new()),
        }
    }

    /// After a bus call on a loop's thread: each mailbox the call left unwoken
    /// ([`bus::mailbox`]) is run here and now when its loop sleeps and the mail
    /// is small — the message is written without waking that loop — else its loop
    /// is woken as before. Only `try_lock`: a loop never waits for another here.
    pub fn settle_wakes(&self) {
        if !bus::mailbox::take_deferred() {
            return;
        }
        for (id, mailbox) in self.mailboxes.iter().enumerate() {
            if !mailbox.take_unwoken() {
                continue;
            }
            let ran = mailbox.weight() <= RUN_ELSEWHERE_MAX
                && self.loops[id]
                    .try_lock()
                    .is_some_and(|mut cell| cell.as_mut().map(|l| l.drain_for_another()).is_some());
            if !ran {
                mailbox.wake();
            }
        }
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }

    /// Reserves a connection slot for a client at `ip_key`; `Err` says which limit
    /// refused it.
    pub fn admit(&self, ip_key: u32) -> Result<(), &'static str> {
        if !self.reserve() {
            return Err("too many connections");
        }
        self.admit_reserved(ip_key)
    }

    /// Takes one place under `max_connections`, before a socket is even accepted
    /// (a gateway that leaves its listening group when full must know before the
    /// accept, not after, or the client it accepted would be refused).
    pub fn reserve(&self) -> bool {
        let before = self.connections.fetch_add(1, Ordering::AcqRel);
        if before >= self.config.max_connections {
            self.connections.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Gives back a [`Gateway::reserve`] that found no socket to accept.
    pub fn unreserve(&self) {
        self.connections.fetch_sub(1, Ordering::AcqRel);
    }

    /// The per-address check for a client whose place is reserved; on `Err` the place
    /// is given back.
    pub fn admit_reserved(&self, ip_key: u32) -> Result<(), &'static str> {
        if self.config.max_per_ip > 0 && ip_key != NOT_COUNTED {
            let mut map = self.per_ip.lock();
            let n = map.entry(ip_key).or_insert(0);
            if *n as usize >= self.config.max_per_ip {
                drop(map);
                self.unreserve();
                return Err("too many connections from this address");
            }
            *n += 1;
        }
        Ok(())
    }

    /// Gives back what [`Gateway::admit`] reserved.
    pub fn release(&self, ip_key: u32) {
        self.connections.fetch_sub(1, Ordering::AcqRel);
        if self.config.max_per_ip > 0 && ip_key != NOT_COUNTED {
            let mut map = self.per_ip.lock();
            if let Some(n) = map.get_mut(&ip_key) {
                *n -= 1;
                if *n == 0 {
                    map.remove(&ip_key);
                }
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
    use bus::{ConnRef, Reply, Request};

    struct NoBus;
    impl Bus for NoBus {
        fn call(&self, _: ConnRef, _: Request) -> Option<Reply> {
            None
        }
    }

    #[test]
    fn the_per_address_limit_counts_remote_peers_only() {
        let config = ServerConfig {
            max_per_ip: 2,
            ..Default::default()
        };
        let gateway = Gateway::new(
            config,
            Arc::new(NoBus),
            Vec::new(),
            ProcessMetrics::new(1),
            Arc::new(|| serde_json::json!({})),
        );
        let remote = ip_key("192.0.2.7".parse().unwrap());
        assert_eq!(gateway.admit(remote), Ok(()));
        assert_eq!(gateway.admit(remote), Ok(()));
        assert!(gateway.admit(remote).is_err(), "the third is refused");
        gateway.release(remote);
        assert_eq!(gateway.admit(remote), Ok(()), "room again after a close");
        for _ in 0..10 {
            assert_eq!(
                gateway.admit(NOT_COUNTED),
                Ok(()),
                "loopback is not counted"
            );
        }
        assert_eq!(gateway.connections(), 12);
    }
}
