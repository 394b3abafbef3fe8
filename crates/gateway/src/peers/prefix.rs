//! The unit `--max-per-ip` counts: what a peer address is keyed on, and which
//! addresses are never counted. Not here: the counts (`peers`).

use std::net::IpAddr;

/// The unit the per-address limit counts: an IPv4 address, or an IPv6 /64.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prefix {
    V4(u32),
    /// The top 64 bits of the address.
    V6(u64),
}

impl Prefix {
    /// The prefix `ip` is counted under; `None` for loopback peers (never counted).
    pub fn of(ip: IpAddr) -> Option<Prefix> {
        let ip = ip.to_canonical();
        if ip.is_loopback() {
            return None;
        }
        Some(match ip {
            IpAddr::V4(v4) => Prefix::V4(u32::from(v4)),
            IpAddr::V6(v6) => Prefix::V6((u128::from(v6) >> 64) as u64),
        })
    }

    /// (tag, bits) as the table stores them; tag 0 marks a free entry.
    pub(super) fn words(self) -> (u32, u64) {
        match self {
            Prefix::V4(a) => (TAG_V4, u64::from(a)),
            Prefix::V6(p) => (TAG_V6, p),
        }
    }
}

/// Entry tags: free, or which family its bits are.
pub(super) const TAG_FREE: u32 = 0;
pub(super) const TAG_V4: u32 = 4;
pub(super) const TAG_V6: u32 = 6;
