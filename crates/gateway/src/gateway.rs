//! [`Gateway`]: what the event loops of one process share — the bus, the loops'
//! mailboxes, the connection limits, the counters and the `/stats` document.

use crate::config::ServerConfig;
use crate::peers::{PeerTable, Prefix};
use bus::{Bus, Mailbox};
use observe::metrics::ProcessMetrics;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The per-address handle of connections no per-address limit applies to (loopback
/// peers, or no `--max-per-ip`): decided from the address ([`Prefix::of`]), never
/// from a key's value.
pub const NOT_COUNTED: u32 = 0;

/// The `/stats` document of this process (gateway counters and the router's).
pub type StatsFn = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

pub struct Gateway {
    pub config: ServerConfig,
    pub bus: Arc<dyn Bus>,
    /// Indexed by loop id.
    pub mailboxes: Vec<Arc<Mailbox>>,
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
    /// Connections per client prefix, only when `max_per_ip` is set: this
    /// process's own table, or the one a supervisor shares among its gateways.
    peers: Option<Arc<PeerTable>>,
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
            bus,
            mailboxes,
            metrics,
            stats,
            stop: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            drain_until: Mutex::new(None),
            connections: AtomicUsize::new(0),
            peers: config.peers.clone().filter(|_| config.max_per_ip > 0),
            config,
        }
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }

    /// Reserves a connection slot for a client of `peer` (`None`: not counted);
    /// returns the connection's per-address handle, or which limit refused it.
    pub fn admit(&self, peer: Option<Prefix>) -> Result<u32, &'static str> {
        if !self.reserve() {
            return Err("too many connections");
        }
        self.admit_reserved(peer)
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
    pub fn admit_reserved(&self, peer: Option<Prefix>) -> Result<u32, &'static str> {
        let (Some(table), Some(peer)) = (&self.peers, peer) else {
            return Ok(NOT_COUNTED);
        };
        let limit = self.config.max_per_ip.min(u32::MAX as usize) as u32;
        table.admit(peer, limit).map_err(|why| {
            self.unreserve();
            match why {
                crate::peers::Refused::PerAddress => "too many connections from this address",
                crate::peers::Refused::TableFull => "too many client addresses at once",
            }
        })
    }

    /// Gives back what [`Gateway::admit`] reserved.
    pub fn release(&self, handle: u32) {
        self.connections.fetch_sub(1, Ordering::AcqRel);
        if let (Some(table), true) = (&self.peers, handle != NOT_COUNTED) {
            table.release(handle);
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
        let table = PeerTable::private(crate::peers::capacity_for(100)).unwrap();
        let config = ServerConfig {
            max_per_ip: 2,
            peers: Some(Arc::new(table)),
            ..Default::default()
        };
        let gateway = Gateway::new(
            config,
            Arc::new(NoBus),
            Vec::new(),
            ProcessMetrics::new(1),
            Arc::new(|| serde_json::json!({})),
        );
        let remote = Prefix::of("192.0.2.7".parse().unwrap());
        let first = gateway.admit(remote).unwrap();
        assert_ne!(first, NOT_COUNTED);
        assert_eq!(gateway.admit(remote), Ok(first), "one handle per prefix");
        assert!(gateway.admit(remote).is_err(), "the third is refused");
        gateway.release(first);
        assert_eq!(gateway.admit(remote), Ok(first), "room again after a close");
        let loopback = Prefix::of("127.0.0.1".parse().unwrap());
        for _ in 0..10 {
            assert_eq!(
                gateway.admit(loopback),
                Ok(NOT_COUNTED),
                "loopback is not counted"
            );
        }
        assert_eq!(gateway.connections(), 12);
    }
}
