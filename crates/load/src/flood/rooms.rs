//! Rooms: the channels each connection of a flood joins (`--rooms C
//! --rooms-per-connection K`), computed alike in every process that knows C, K and
//! the seed, so flood's children and the publisher agree without a table on a
//! command line. A room is named `r<k>`, k in 1..=C (msggen's `--path /pub/r%d`).
//!
//! Connections come in blocks of C. Block b lays a seeded permutation π_b of the C
//! rooms on a ring; connection i of the block joins π_b(i), π_b(i+1), …, π_b(i+K−1)
//! (mod C). For each slot j, i ↦ π_b(i+j) is a bijection, so a whole block adds K
//! members to every room: N connections (N a multiple of C) make rooms of N·K/C
//! members each, and a connection's K rooms are distinct (K ≤ C). Each block draws
//! its own permutation, so the members a room has in one block are unrelated to those
//! it has in another.
//!
//! Not here: where the names go in a request (`target`, the `%c` of a URL).

use rand::seq::SliceRandom;
use rand::SeedableRng;

/// The permutations' seed: fixed, so two runs subscribe alike.
const SEED: u64 = 0x0072_6f6f_6d73;

/// Why a rooms layout was refused.
#[derive(Debug, thiserror::Error)]
pub enum RoomsError {
    #[error("--rooms-per-connection {per_conn} must be between 1 and --rooms {rooms}")]
    PerConn { per_conn: u32, rooms: u32 },
}

/// The layout of the connections `first ..` (global numbers) over the rooms.
#[derive(Clone, Debug)]
pub struct Rooms {
    rooms: u32,
    per_conn: u32,
    /// What goes between two names in a request path (`,`, or `&channel=`).
    sep: String,
    /// The block of the first connection this process holds.
    first_block: u64,
    /// One permutation of `0..rooms` per block from `first_block`.
    rings: Vec<Vec<u32>>,
}

impl Rooms {
    /// The layout of `rooms` rooms, `per_conn` each, for global connection numbers
    /// `first .. first + count`; names are written separated by `sep`.
    pub fn new(
        rooms: u32,
        per_conn: u32,
        sep: &str,
        first: u64,
        count: u64,
    ) -> Result<Rooms, RoomsError> {
        if per_conn == 0 || per_conn > rooms {
            return Err(RoomsError::PerConn { per_conn, rooms });
        }
        let c = u64::from(rooms);
        let first_block = first / c;
        let end_block = (first + count).div_ceil(c).max(first_block + 1);
        let rings = (first_block..end_block)
            .map(|b| {
                let mut ring: Vec<u32> = (0..rooms).collect();
                ring.shuffle(&mut rand::rngs::StdRng::seed_from_u64(SEED ^ b));
                ring
            })
            .collect();
        Ok(Rooms {
            rooms,
            per_conn,
            sep: sep.to_string(),
            first_block,
            rings,
        })
    }

    /// The rooms (1..=C) of global connection `g`, which must be in the range given
    /// to [`Rooms::new`].
    pub fn of(&self, g: u64) -> impl Iterator<Item = u32> + '_ {
        let c = u64::from(self.rooms);
        let ring = &self.rings[(g / c - self.first_block) as usize];
        let i = (g % c) as usize;
        (0..self.per_conn as usize).map(move |j| ring[(i + j) % ring.len()] + 1)
    }

    /// Writes `r<k>` for each room of connection `g`, separated as asked.
    pub fn write(&self, g: u64, out: &mut Vec<u8>) {
        for (j, k) in self.of(g).enumerate() {
            if j > 0 {
                out.extend_from_slice(self.sep.as_bytes());
            }
            out.push(b'r');
            out.extend_from_slice(k.to_string().as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashMap};

    #[test]
    fn every_room_gets_the_same_members_and_each_connection_distinct_rooms() {
        let (c, k, n) = (60, 5, 300);
        let r = Rooms::new(c, k, ",", 0, n).unwrap();
        let mut members: HashMap<u32, u32> = HashMap::new();
        for g in 0..n {
            let mine: BTreeSet<u32> = r.of(g).collect();
            assert_eq!(mine.len(), k as usize, "connection {g}: {mine:?}");
            assert!(mine.iter().all(|&x| (1..=c).contains(&x)));
            for x in mine {
                *members.entry(x).or_default() += 1;
            }
        }
        assert_eq!(members.len(), c as usize);
        let want = n as u32 * k / c;
        assert!(members.values().all(|&m| m == want), "{members:?}");
    }

    #[test]
    fn a_child_sees_the_layout_of_the_whole_run() {
        let whole = Rooms::new(50, 4, ",", 0, 500).unwrap();
        let child = Rooms::new(50, 4, ",", 173, 120).unwrap();
        for g in 173..293 {
            assert_eq!(
                whole.of(g).collect::<Vec<_>>(),
                child.of(g).collect::<Vec<_>>()
            );
        }
        // Different blocks draw different rings.
        assert_ne!(
            whole.of(0).collect::<Vec<_>>(),
            whole.of(50).collect::<Vec<_>>()
        );
    }

    #[test]
    fn names_are_joined_by_the_separator() {
        let r = Rooms::new(3, 3, "&channel=", 0, 3).unwrap();
        let mut out = Vec::new();
        r.write(1, &mut out);
        let s = String::from_utf8(out).unwrap();
        let names: BTreeSet<&str> = s.split("&channel=").collect();
        assert_eq!(names, BTreeSet::from(["r1", "r2", "r3"]));
        assert!(Rooms::new(3, 4, ",", 0, 1).is_err());
        assert!(Rooms::new(3, 0, ",", 0, 1).is_err());
    }
}
