//! Per-user presence state: the user's connections and, once a message reached
//! them, their history ring.
//!
//! Budget: this struct is the router's whole share of an idle connection (the
//! gateway's slab entry is separate). The common case — one connection, no
//! message yet — fits in 16 bytes with no heap allocation: one packed
//! [`ConnRef`] and a null ring pointer; 24 bytes with its map key, which makes a
//! presence map of a million users 2^21 slots × 25 B ≈ 52 MB. Users with several
//! connections (rare) keep them in a side [`Overflow`] slab, referenced by index.

use crate::history::Ring;
use crate::ConnRef;

/// Marks an inline connection (so loop 0 / token 0 is not "none").
const ONE: u64 = 1 << 48;
/// Marks an index into [`Overflow`].
const MANY: u64 = 1 << 63;

/// The connections of one user, packed in 8 bytes: 0 = none; [`ONE`] | loop_id <<
/// 32 | token = exactly one; [`MANY`] | i = the list `overflow.lists[i]` (≥ 2).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Conns(u64);

/// Lists of users with two or more connections; freed slots are reused.
#[derive(Debug, Default)]
pub struct Overflow {
    lists: Vec<Vec<ConnRef>>,
    free: Vec<u32>,
}

impl Overflow {
    fn alloc(&mut self, list: Vec<ConnRef>) -> u64 {
        match self.free.pop() {
            Some(i) => {
                self.lists[i as usize] = list;
                u64::from(i)
            }
            None => {
                self.lists.push(list);
                (self.lists.len() - 1) as u64
            }
        }
    }

    /// Heap bytes held (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        self.lists.capacity() * std::mem::size_of::<Vec<ConnRef>>()
            + self.lists.iter().map(|l| l.capacity() * 8).sum::<usize>()
            + self.free.capacity() * 4
    }

    /// Drops spare capacity once most lists are gone.
    pub fn shrink(&mut self) {
        while self.lists.last().is_some_and(|l| l.is_empty()) {
            self.lists.pop();
        }
        let len = self.lists.len() as u32;
        self.free.retain(|&i| i < len);
        self.lists.shrink_to_fit();
        self.free.shrink_to_fit();
    }
}

fn pack(c: ConnRef) -> u64 {
    ONE | u64::from(c.loop_id) << 32 | u64::from(c.token)
}

fn unpack(x: u64) -> ConnRef {
    ConnRef {
        loop_id: (x >> 32) as u16,
        token: x as u32,
    }
}

impl Conns {
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Number of connections.
    pub fn len(self, overflow: &Overflow) -> usize {
        match self.0 {
            0 => 0,
            x if x & MANY == 0 => 1,
            x => overflow.lists[(x & !MANY) as usize].len(),
        }
    }

    /// Calls `f` for each connection.
    #[inline]
    pub fn for_each(self, overflow: &Overflow, mut f: impl FnMut(ConnRef)) {
        match self.0 {
            0 => {}
            x if x & MANY == 0 => f(unpack(x)),
            x => overflow.lists[(x & !MANY) as usize]
                .iter()
                .for_each(|&c| f(c)),
        }
    }

    /// Adds `conn`; false if it was already there.
    pub fn add(&mut self, conn: ConnRef, overflow: &mut Overflow) -> bool {
        match self.0 {
            0 => self.0 = pack(conn),
            x if x & MANY == 0 => {
                if unpack(x) == conn {
                    return false;
                }
                self.0 = MANY | overflow.alloc(vec![unpack(x), conn]);
            }
            x => {
                let list = &mut overflow.lists[(x & !MANY) as usize];
                if list.contains(&conn) {
                    return false;
                }
                list.push(conn);
            }
        }
        true
    }

    /// Removes `conn`; false if it was not there.
    pub fn remove(&mut self, conn: ConnRef, overflow: &mut Overflow) -> bool {
        match self.0 {
            0 => false,
            x if x & MANY == 0 => {
                if unpack(x) != conn {
                    return false;
                }
                self.0 = 0;
                true
            }
            x => {
                let i = (x & !MANY) as usize;
                let list = &mut overflow.lists[i];
                let Some(at) = list.iter().position(|c| *c == conn) else {
                    return false;
                };
                list.swap_remove(at);
                if list.len() == 1 {
                    self.0 = pack(list[0]);
                    overflow.lists[i] = Vec::new();
                    overflow.free.push(i as u32);
                }
                true
            }
        }
    }
}

/// Everything the router keeps about one user. A user with no connection and no
/// history ring has no entry at all.
#[derive(Debug, Default)]
pub struct UserState {
    pub conns: Conns,
    /// Allocated on the first message to this user; holds their seq counter.
    pub ring: Option<Box<Ring>>,
}

impl UserState {
    pub fn last_seq(&self) -> u64 {
        self.ring.as_ref().map_or(0, |r| r.last())
    }
}

/// Upper bound for `size_of::<UserState>()`, checked by a unit test.
pub const USER_STATE_MAX_BYTES: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_state_fits_the_budget() {
        assert!(std::mem::size_of::<UserState>() <= USER_STATE_MAX_BYTES);
        // The presence map stores (key, value) pairs: 24 bytes per user plus one
        // control byte.
        assert!(std::mem::size_of::<(u64, UserState)>() <= 24);
        assert_eq!(std::mem::size_of::<ConnRef>(), 8);
    }

    fn collect(c: Conns, o: &Overflow) -> Vec<ConnRef> {
        let mut v = Vec::new();
        c.for_each(o, |x| v.push(x));
        v
    }

    #[test]
    fn conns_inline_then_overflow_then_inline_again() {
        let mut o = Overflow::default();
        let zero = ConnRef {
            loop_id: 0,
            token: 0,
        };
        let a = ConnRef {
            loop_id: u16::MAX,
            token: u32::MAX,
        };
        let b = ConnRef {
            loop_id: 1,
            token: 1,
        };
        let mut c = Conns::default();
        assert!(c.is_empty());
        assert!(c.add(zero, &mut o), "loop 0 token 0 is a real connection");
        assert!(!c.is_empty());
        assert!(!c.add(zero, &mut o));
        assert_eq!(collect(c, &o), vec![zero]);
        assert!(c.add(a, &mut o));
        assert!(c.add(b, &mut o));
        assert_eq!(c.len(&o), 3);
        assert_eq!(collect(c, &o), vec![zero, a, b]);
        assert!(c.remove(zero, &mut o));
        assert!(c.remove(b, &mut o));
        assert_eq!(collect(c, &o), vec![a]);
        assert_eq!(o.free.len(), 1, "the list slot is recycled");
        assert!(!c.remove(b, &mut o));
        assert!(c.remove(a, &mut o));
        assert!(c.is_empty());
        // A second multi-connection user reuses the freed slot.
        let mut d = Conns::default();
        d.add(a, &mut o);
        d.add(b, &mut o);
        assert_eq!(o.lists.len(), 1);
        o.shrink();
        assert_eq!(collect(d, &o), vec![a, b]);
    }
}
