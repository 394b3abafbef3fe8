//! Per-user presence state: the user's connections and, once a message reached
//! them, their history ring.
//!
//! Budget: this struct is the router's whole share of an idle connection (the
//! gateway's slab entry is separate). The common case — one connection, no
//! message yet — is one packed [`ConnRef`] in 8 bytes with no heap allocation,
//! 16 bytes with its key in the presence table ([`crate::users::UserMap`], 82–92 %
//! full: 17.4–19.6 B per user); a user with a history ring moves to a 16-byte
//! [`UserState`] beside the table. Users with several connections keep them in a
//! side [`Overflow`] slab, referenced by index.
//!
//! Adding and removing a connection is O(1) however many connections the user has:
//! a connection in an overflow list has its position in a side map (keyed by the
//! packed connection), so neither the duplicate check nor the removal scans the
//! list. Only multi-connection users pay for that map (16 B + slack per connection).

use crate::hash::IdMap;
use crate::history::Ring;
use crate::ConnRef;

/// Marks an inline connection (so loop 0 / token 0 is not "none").
const ONE: u64 = 1 << 48;
/// Marks an index into [`Overflow`].
const MANY: u64 = 1 << 63;
/// Never set by a connection list: the presence table's tag for "this user's
/// state is in side entry i" ([`Conns::side`]).
const SIDE: u64 = 1 << 62;

/// The connections of one user, packed in 8 bytes: 0 = none; [`ONE`] | loop_id <<
/// 32 | token = exactly one; [`MANY`] | i = the list `overflow.lists[i]` (≥ 2).
/// Bits 49–62 are never set by a list; the presence table uses bit 62 ([`SIDE`])
/// to store something else in the same word.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Conns(u64);

/// Lists of users with two or more connections; freed slots are reused.
///
/// Invariant: every connection in `lists[i]` at position `p` has `pos[pack(c)] =
/// (i, p)`, and `pos` has no other entries.
#[derive(Debug, Default)]
pub struct Overflow {
    lists: Vec<Vec<ConnRef>>,
    free: Vec<u32>,
    /// Packed connection → (list index, position in the list).
    pos: IdMap<(u32, u32)>,
}

impl Overflow {
    fn alloc(&mut self, list: Vec<ConnRef>) -> u64 {
        let i = match self.free.pop() {
            Some(i) => {
                self.lists[i as usize] = list;
                i
            }
            None => {
                self.lists.push(list);
                (self.lists.len() - 1) as u32
            }
        };
        for (p, &c) in self.lists[i as usize].iter().enumerate() {
            self.pos.insert(pack(c), (i, p as u32));
        }
        u64::from(i)
    }

    /// Heap bytes held (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        self.lists.capacity() * std::mem::size_of::<Vec<ConnRef>>()
            + self.lists.iter().map(|l| l.capacity() * 8).sum::<usize>()
            + self.free.capacity() * 4
            + self.pos.capacity() * (std::mem::size_of::<(u64, (u32, u32))>() + 1)
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
        if self.pos.capacity() > 4 * self.pos.len().max(16) {
            self.pos.shrink_to_fit();
        }
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
    /// No connection.
    pub const NONE: Conns = Conns(0);

    /// Not a connection list: the tagged index `i` of a side entry (see
    /// [`crate::users::UserMap`]). Never passed to the list methods below.
    pub(crate) fn side(i: u32) -> Conns {
        Conns(SIDE | u64::from(i))
    }

    /// The index of a [`Conns::side`] word; `None` for a connection list.
    #[inline]
    pub(crate) fn side_index(self) -> Option<u32> {
        (self.0 & SIDE != 0).then_some(self.0 as u32)
    }

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

    /// Adds `conn`; false if it was already there (or is in another user's list). O(1).
    pub fn add(&mut self, conn: ConnRef, overflow: &mut Overflow) -> bool {
        match self.0 {
            0 => self.0 = pack(conn),
            x if x & MANY == 0 => {
                // A connection already in some overflow list is logged in as another
                // user: refused (a connection belongs to one user at a time).
                if unpack(x) == conn || overflow.pos.contains_key(&pack(conn)) {
                    return false;
                }
                self.0 = MANY | overflow.alloc(vec![unpack(x), conn]);
            }
            x => {
                let i = (x & !MANY) as u32;
                let list = &mut overflow.lists[i as usize];
                // O(1): a connection is in at most one list (it is logged in as one
                // user), so its `pos` entry says whether it is in this one.
                match overflow.pos.entry(pack(conn)) {
                    std::collections::hash_map::Entry::Occupied(_) => return false,
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert((i, list.len() as u32));
                    }
                }
                list.push(conn);
            }
        }
        true
    }

    /// Removes `conn`; false if it was not there. O(1).
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
                let i = (x & !MANY) as u32;
                let key = pack(conn);
                match overflow.pos.get(&key) {
                    Some(&(li, _)) if li == i => {}
                    _ => return false,
                }
                let (_, at) = overflow.pos.remove(&key).expect("checked above");
                let list = &mut overflow.lists[i as usize];
                list.swap_remove(at as usize);
                if let Some(&moved) = list.get(at as usize) {
                    overflow.pos.insert(pack(moved), (i, at));
                }
                if list.len() == 1 {
                    let last = list[0];
                    overflow.pos.remove(&pack(last));
                    self.0 = pack(last);
                    overflow.lists[i as usize] = Vec::new();
                    overflow.free.push(i);
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
        // The presence table stores (key, packed connections): 16 bytes per user.
        assert_eq!(std::mem::size_of::<(u64, Conns)>(), 16);
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

    /// Checks the `pos` invariant against the lists.
    fn check(o: &Overflow) {
        let mut n = 0;
        for (i, l) in o.lists.iter().enumerate() {
            for (p, c) in l.iter().enumerate() {
                assert_eq!(o.pos.get(&pack(*c)), Some(&(i as u32, p as u32)));
                n += 1;
            }
        }
        assert_eq!(o.pos.len(), n);
    }

    #[test]
    fn many_connections_of_one_user_stay_consistent() {
        let mut o = Overflow::default();
        let mut c = Conns::default();
        let conn = |t: u32| ConnRef {
            loop_id: (t % 3) as u16,
            token: t,
        };
        for t in 0..5000 {
            assert!(c.add(conn(t), &mut o));
        }
        assert!(!c.add(conn(4999), &mut o));
        assert_eq!(c.len(&o), 5000);
        check(&o);
        // Remove in an order that moves elements around (odd tokens, from the top).
        for t in (0..5000).rev().filter(|t| t % 2 == 1) {
            assert!(c.remove(conn(t), &mut o), "{t}");
            assert!(!c.remove(conn(t), &mut o));
        }
        check(&o);
        let mut left = collect(c, &o);
        left.sort_by_key(|c| c.token);
        assert_eq!(
            left,
            (0..5000)
                .filter(|t| t % 2 == 0)
                .map(conn)
                .collect::<Vec<_>>()
        );
        for t in (0..5000).filter(|t| t % 2 == 0) {
            assert!(c.remove(conn(t), &mut o));
        }
        assert!(c.is_empty());
        check(&o);
        assert!(o.pos.is_empty());
    }

    #[test]
    fn a_connection_of_another_user_is_not_removed_here() {
        let mut o = Overflow::default();
        let (mut a, mut b) = (Conns::default(), Conns::default());
        let conn = |t: u32| ConnRef {
            loop_id: 0,
            token: t,
        };
        a.add(conn(1), &mut o);
        a.add(conn(2), &mut o);
        b.add(conn(3), &mut o);
        b.add(conn(4), &mut o);
        assert!(!a.remove(conn(3), &mut o));
        assert!(!b.remove(conn(1), &mut o));
        check(&o);
        assert!(b.remove(conn(3), &mut o));
        assert_eq!(collect(b, &o), vec![conn(4)]);
        check(&o);
    }
}
