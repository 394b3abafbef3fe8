//! The connections subscribed to one channel. Most channels are small (a room, a
//! document): an unsorted array, 8 bytes a connection and at most a quarter spare,
//! where a leave scans at most [`FEW_MAX`] entries. A channel past that becomes a
//! hash set (about twice the bytes a connection, but a leave that does not scan),
//! and an array again once it shrinks below half of it.

use crate::hash::IdHashBuilder;
use crate::ConnRef;
use std::collections::HashSet;

/// Most connections an array holds before the set takes over.
const FEW_MAX: usize = 512;

#[derive(Debug)]
pub(crate) enum ConnSet {
    Few(Vec<ConnRef>),
    /// Boxed so every channel pays 24 bytes for this, not the set's 40.
    #[allow(clippy::box_collection)]
    Many(Box<HashSet<ConnRef, IdHashBuilder>>),
}

impl Default for ConnSet {
    fn default() -> Self {
        ConnSet::Few(Vec::new())
    }
}

impl ConnSet {
    /// Adds `conn`; false if it was there.
    pub(crate) fn insert(&mut self, conn: ConnRef) -> bool {
        match self {
            ConnSet::Few(v) => {
                if v.contains(&conn) {
                    return false;
                }
                if v.len() == FEW_MAX {
                    let mut set: HashSet<ConnRef, IdHashBuilder> = v.drain(..).collect();
                    set.insert(conn);
                    *self = ConnSet::Many(Box::new(set));
                    return true;
                }
                if v.len() == v.capacity() {
                    // A quarter more, not double: a channel's members change one by one.
                    v.reserve_exact((v.len() / 4).max(2));
                }
                v.push(conn);
                true
            }
            ConnSet::Many(s) => s.insert(conn),
        }
    }

    pub(crate) fn contains(&self, conn: &ConnRef) -> bool {
        match self {
            ConnSet::Few(v) => v.contains(conn),
            ConnSet::Many(s) => s.contains(conn),
        }
    }

    /// Takes `conn` out; false if it was not there.
    pub(crate) fn remove(&mut self, conn: ConnRef) -> bool {
        let removed = match self {
            ConnSet::Few(v) => match v.iter().position(|&c| c == conn) {
                Some(i) => {
                    v.swap_remove(i);
                    true
                }
                None => false,
            },
            ConnSet::Many(s) => s.remove(&conn),
        };
        if removed {
            self.tidy();
        }
        removed
    }

    /// Keeps the connections `keep` says yes to.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(ConnRef) -> bool) {
        match self {
            ConnSet::Few(v) => v.retain(|&c| keep(c)),
            ConnSet::Many(s) => s.retain(|&c| keep(c)),
        }
        self.tidy();
    }

    /// Gives back what a shrunk channel no longer needs.
    fn tidy(&mut self) {
        match self {
            ConnSet::Few(v) if v.capacity() > 2 * v.len() + 2 => v.shrink_to(v.len() + v.len() / 4),
            ConnSet::Many(s) if s.len() < FEW_MAX / 2 => {
                *self = ConnSet::Few(s.iter().copied().collect());
            }
            _ => {}
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            ConnSet::Few(v) => v.len(),
            ConnSet::Many(s) => s.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every connection, in no particular order.
    pub(crate) fn for_each(&self, mut f: impl FnMut(ConnRef)) {
        match self {
            ConnSet::Few(v) => v.iter().for_each(|&c| f(c)),
            ConnSet::Many(s) => s.iter().for_each(|&c| f(c)),
        }
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        let conn = std::mem::size_of::<ConnRef>();
        match self {
            ConnSet::Few(v) => v.capacity() * conn,
            ConnSet::Many(s) => std::mem::size_of_val(&**s) + s.capacity() * (conn + 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(token: u32) -> ConnRef {
        ConnRef { loop_id: 1, token }
    }

    #[test]
    fn a_set_grows_from_an_array_to_a_hash_set_and_back_keeping_every_member() {
        assert!(std::mem::size_of::<ConnSet>() <= 24);
        let mut set = ConnSet::default();
        let n = FEW_MAX as u32 + 10;
        for t in 0..n {
            assert!(set.insert(c(t)));
            assert!(!set.insert(c(t)), "twice is once");
        }
        assert!(matches!(set, ConnSet::Many(_)));
        assert_eq!(set.len(), n as usize);
        for t in 0..n - 5 {
            assert!(set.remove(c(t)));
            assert!(!set.remove(c(t)));
        }
        assert!(
            matches!(set, ConnSet::Few(_)),
            "back to an array when small"
        );
        let mut left = Vec::new();
        set.for_each(|x| left.push(x.token));
        left.sort();
        assert_eq!(left, (n - 5..n).collect::<Vec<_>>());
        set.retain(|x| x.token % 2 == 0);
        assert_eq!(set.len(), 2);
        assert!(set.heap_bytes() >= 2 * std::mem::size_of::<ConnRef>());
    }

    #[test]
    fn an_array_keeps_at_most_a_quarter_spare_as_it_grows() {
        let mut set = ConnSet::default();
        for t in 0..100 {
            set.insert(c(t));
        }
        let ConnSet::Few(v) = &set else {
            panic!("100 members stay an array")
        };
        assert!(v.capacity() <= 125, "capacity {}", v.capacity());
    }
}
