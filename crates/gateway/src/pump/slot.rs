//! The slab entry of one connection: its socket, its protocol state (the core) and
//! its output queue — 40 bytes, checked by a test (DESIGN "the budget per
//! connection"). Tokens name a slot and its generation.

use crate::pump::output::OutQueue;
use connection::Connection;
use mio::net::TcpStream;

pub struct Slot {
    pub conn: Connection,
    /// Output the socket has not taken yet; `None` while nothing waits.
    pub out: Option<Box<OutQueue>>,
    /// `None` for an HTTP/2 stream's virtual connection (see `h2`); the same 4 bytes
    /// (the descriptor's niche holds the `None`).
    pub stream: Option<TcpStream>,
    /// The connection's handle in the per-address table (`peers`; 0: not counted).
    pub ip_key: u32,
}

impl Slot {
    pub fn queued_bytes(&self) -> usize {
        self.out.as_ref().map_or(0, |q| q.bytes())
    }
}

/// A connection token as the router and the wheel see it: slab index and the
/// slot's generation, so a delivery planned for a connection that closed meanwhile
/// never reaches a newer one in the same slot.
pub fn token(index: usize, gen: u8) -> u32 {
    ((index as u32) << 8) | gen as u32
}

/// The inverse of [`token`].
pub fn untoken(token: u32) -> (usize, u8) {
    ((token >> 8) as usize, token as u8)
}

/// Slab slots per loop at most: 24 bits of the token are the index.
pub const MAX_SLOTS_PER_LOOP: usize = 1 << 24;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        let t = token(MAX_SLOTS_PER_LOOP - 1, 255);
        assert_eq!(untoken(t), (MAX_SLOTS_PER_LOOP - 1, 255));
        assert_eq!(untoken(token(0, 7)), (0, 7));
    }

    /// The slab entry is the largest part of the per-connection budget (≤ 256 B in
    /// all, router presence and allocator included; the aim is 100): 48 bytes in a
    /// release build (8 of them the pointer to a connection's channels). mio's
    /// socket is 4 bytes there; debug builds add a selector id to it, so the bound
    /// is computed from its size.
    #[test]
    fn a_slot_is_48_bytes_and_its_core_32() {
        use std::mem::size_of;
        assert_eq!(size_of::<Connection>(), 32, "Connection grew");
        let fields = 32 + 8 + 4 + size_of::<Option<TcpStream>>();
        assert_eq!(size_of::<Option<TcpStream>>(), size_of::<TcpStream>());
        assert_eq!(size_of::<Slot>(), fields.next_multiple_of(8), "Slot grew");
        if !cfg!(debug_assertions) {
            assert_eq!(size_of::<Slot>(), 48);
        }
    }
}
