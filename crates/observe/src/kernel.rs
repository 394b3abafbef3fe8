//! Kernel memory per TCP socket: the one definition every figure of myriad uses (the
//! dashboard, `memory.png`, `serve --csv`, the demo's report).
//!
//! **Kernel memory per socket = (socket slab bytes + TCP buffer bytes) grown since a
//! baseline, divided by the TCP sockets added since that baseline, machine-wide.**
//! - *Socket slab*: the slab caches of [`procfs::SOCKET_SLABS`] (TCP socket objects,
//!   socket inodes, minisocks, epoll items) from `/proc/slabinfo`: objects × object size.
//!   Readable by root only; without it the figure is the buffers alone, and says so.
//! - *TCP buffers*: the `mem` pages of `/proc/net/sockstat` × page size: what
//!   `net.ipv4.tcp_mem` limits. An idle socket holds almost none (≈ 50 B measured here).
//! - *TCP sockets*: `alloc` of `/proc/net/sockstat`. On one machine a loopback connection
//!   is two sockets (client and server end), so this is per socket, not per connection.
//!
//! Machine-wide means other processes' sockets count too: the figure is only meaningful
//! while one workload adds sockets, as in the demo and the benches, and it is not given
//! until [`MIN_SOCKETS_ADDED`] sockets were added (a handful of sockets would divide
//! unrelated slab growth by almost nothing).

use crate::procfs;

/// Fewest TCP sockets added since the baseline for a per-socket figure.
pub const MIN_SOCKETS_ADDED: u64 = 100;

/// A reading of the kernel memory that grows with TCP sockets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketMemory {
    /// TCP sockets allocated (`alloc` of `/proc/net/sockstat`).
    pub tcp_sockets: u64,
    /// TCP buffer memory in bytes (`mem` pages of `/proc/net/sockstat` × page size).
    pub buffer_bytes: u64,
    /// Socket slab caches in bytes; `None` when `/proc/slabinfo` is not readable.
    pub slab_bytes: Option<u64>,
}

/// Growth per added TCP socket between two [`SocketMemory`] readings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerSocket {
    /// TCP buffer bytes per added socket.
    pub buffers: f64,
    /// Socket slab bytes per added socket (`None` without `/proc/slabinfo`).
    pub slab: Option<f64>,
}

impl PerSocket {
    /// Slab + buffers: kernel memory per socket.
    pub fn total(&self) -> f64 {
        self.buffers + self.slab.unwrap_or(0.0)
    }

    /// What [`PerSocket::total`] counts, for a report or a chart legend.
    pub fn definition(&self) -> &'static str {
        if self.slab.is_some() {
            DEFINITION
        } else {
            "TCP buffer pages (/proc/net/sockstat) only, the socket slab is unreadable without root: growth per TCP socket added, machine-wide"
        }
    }
}

/// The definition in one line, as reports state it.
pub const DEFINITION: &str = "socket slab (/proc/slabinfo) + TCP buffer pages (/proc/net/sockstat): growth per TCP socket added, machine-wide";

impl SocketMemory {
    /// Read `/proc/net/sockstat` and `/proc/slabinfo` now (zeros where unreadable).
    pub fn read() -> SocketMemory {
        let ss = procfs::read_sockstat().unwrap_or_default();
        SocketMemory::from_readings(&ss, procfs::read_slabinfo().as_ref())
    }

    /// The same from readings already taken (the sampler reads these files anyway).
    pub fn from_readings(ss: &procfs::SockStat, slab: Option<&procfs::SlabStats>) -> SocketMemory {
        SocketMemory {
            tcp_sockets: ss.tcp_alloc,
            buffer_bytes: ss.tcp_mem_pages * procfs::page_size(),
            slab_bytes: slab.map(|s| s.socket_bytes),
        }
    }

    /// Growth since `base` per TCP socket added; `None` when fewer than
    /// [`MIN_SOCKETS_ADDED`] sockets were added.
    pub fn per_socket_since(&self, base: &SocketMemory) -> Option<PerSocket> {
        let added = self.tcp_sockets.checked_sub(base.tcp_sockets)?;
        if added < MIN_SOCKETS_ADDED {
            return None;
        }
        let grown = |now: u64, then: u64| now.saturating_sub(then) as f64 / added as f64;
        Some(PerSocket {
            buffers: grown(self.buffer_bytes, base.buffer_bytes),
            slab: match (self.slab_bytes, base.slab_bytes) {
                (Some(now), Some(then)) => Some(grown(now, then)),
                _ => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_per_added_socket() {
        let idle = SocketMemory {
            tcp_sockets: 10,
            buffer_bytes: 4096,
            slab_bytes: Some(100_000),
        };
        let held = SocketMemory {
            tcp_sockets: 2010,
            buffer_bytes: 4096 + 2000 * 52,
            slab_bytes: Some(100_000 + 2000 * 3200),
        };
        let per = held.per_socket_since(&idle).unwrap();
        assert_eq!(per.buffers, 52.0);
        assert_eq!(per.slab, Some(3200.0));
        assert_eq!(per.total(), 3252.0);
        assert_eq!(per.definition(), DEFINITION);
        assert_eq!(idle.per_socket_since(&idle), None, "no socket added");
        let few = SocketMemory {
            tcp_sockets: idle.tcp_sockets + MIN_SOCKETS_ADDED - 1,
            ..held
        };
        assert_eq!(few.per_socket_since(&idle), None, "too few sockets added");
        assert_eq!(idle.per_socket_since(&held), None, "sockets went away");
        let no_slab = SocketMemory {
            slab_bytes: None,
            ..held
        };
        let per = no_slab.per_socket_since(&idle).unwrap();
        assert_eq!((per.slab, per.total()), (None, 52.0));
        assert!(per.definition().contains("only"));
    }

    #[test]
    fn a_real_reading_counts_a_new_socket() {
        let before = SocketMemory::read();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let now = SocketMemory::read();
        assert!(now.tcp_sockets >= 1, "{now:?}");
        drop(l);
        // Other tests open and close sockets meanwhile: only the reading itself is checked.
        let _ = now.per_socket_since(&before);
    }
}
