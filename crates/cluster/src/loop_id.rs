//! Loop ids across processes, packed in one place: a gateway numbers its loops
//! `0..MAX_LOOPS`; the router's hub sees a gateway's loop as one u16,
//! `seat << LOOP_BITS | loop`, where `seat` is the gateway's number at the router.
//! Both sides agree on [`LOOP_BITS`] here; neither defines it for the other.

/// Loop ids a gateway may use: the router packs (gateway seat, loop) into one u16
/// loop id with this many bits for the loop.
pub const LOOP_BITS: u32 = 6;
/// Most loops a gateway process may run (see [`LOOP_BITS`]).
pub const MAX_LOOPS: usize = 1 << LOOP_BITS;
/// Most gateways one router serves: the seats the 16-bit loop id leaves, less the
/// last, whose top loop id is [`BACKEND`].
pub const MAX_GATEWAYS: usize = (1 << (16 - LOOP_BITS)) - 1;
/// The loop id of the router's own publishes (a back-end's, the publish port's):
/// no gateway's, since its seat is past [`MAX_GATEWAYS`].
pub const BACKEND: u16 = u16::MAX;

/// The router-side loop id of gateway `seat`'s loop `local`.
pub fn pack(seat: u16, local: u16) -> u16 {
    seat << LOOP_BITS | local
}

/// A router-side loop id's gateway seat and that gateway's own loop.
pub fn unpack(loop_id: u16) -> (u16, u16) {
    (loop_id >> LOOP_BITS, loop_id & ((1 << LOOP_BITS) - 1))
}

/// The router-side loop ids of gateway `seat`.
pub fn loops_of(seat: u16) -> std::ops::Range<u16> {
    let first = seat << LOOP_BITS;
    first..first + (1 << LOOP_BITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_ids_unpack_to_their_seat_and_loop() {
        // The last seat is the router's own (its back-end loop id), never a gateway's.
        for seat in [0, 1, (1 << (16 - LOOP_BITS)) - 2] {
            for local in [0, 1, MAX_LOOPS as u16 - 1] {
                let id = pack(seat, local);
                assert_eq!(unpack(id), (seat, local));
                assert!(loops_of(seat).contains(&id));
                assert_ne!(id, BACKEND);
            }
        }
        assert_eq!(unpack(BACKEND).0, MAX_GATEWAYS as u16);
    }
}
