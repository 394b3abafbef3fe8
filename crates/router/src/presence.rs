//! Per-user presence state: the user's connections and, once a message reached
//! them, their history ring.
//!
//! Budget: this struct is the router's whole share of an idle connection (the
//! gateway's slab entry is separate). The common case — one connection, no
//! message yet — must fit inline with no heap allocation: a [`ConnRef`] in
//! [`Conns::One`] and a null ring pointer, 24 bytes, 32 bytes with its map key.

use crate::history::Ring;
use crate::ConnRef;

/// The connections of one user; inline for one, boxed for more (rare).
#[derive(Debug, Default)]
pub enum Conns {
    #[default]
    None,
    One(ConnRef),
    Many(Box<Vec<ConnRef>>),
}

impl Conns {
    pub fn as_slice(&self) -> &[ConnRef] {
        match self {
            Conns::None => &[],
            Conns::One(c) => std::slice::from_ref(c),
            Conns::Many(v) => v,
        }
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, Conns::None)
    }

    /// Adds `conn`; false if it was already there.
    pub fn add(&mut self, conn: ConnRef) -> bool {
        match self {
            Conns::None => *self = Conns::One(conn),
            Conns::One(c) if *c == conn => return false,
            Conns::One(c) => *self = Conns::Many(Box::new(vec![*c, conn])),
            Conns::Many(v) if v.contains(&conn) => return false,
            Conns::Many(v) => v.push(conn),
        }
        true
    }

    /// Removes `conn`; false if it was not there.
    pub fn remove(&mut self, conn: ConnRef) -> bool {
        match self {
            Conns::One(c) if *c == conn => *self = Conns::None,
            Conns::Many(v) => {
                let Some(i) = v.iter().position(|c| *c == conn) else {
                    return false;
                };
                v.swap_remove(i);
                if v.len() == 1 {
                    *self = Conns::One(v[0]);
                }
            }
            _ => return false,
        }
        true
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
pub const USER_STATE_MAX_BYTES: usize = 24;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_state_fits_the_budget() {
        assert!(std::mem::size_of::<UserState>() <= USER_STATE_MAX_BYTES);
        // The presence map stores (key, value) pairs: 32 bytes per user plus one
        // control byte.
        assert!(std::mem::size_of::<(u64, UserState)>() <= 32);
        assert_eq!(std::mem::size_of::<ConnRef>(), 8);
    }

    #[test]
    fn conns_inline_then_boxed_then_inline_again() {
        let a = ConnRef { shard: 0, token: 1 };
        let b = ConnRef { shard: 1, token: 1 };
        let mut c = Conns::None;
        assert!(c.add(a));
        assert!(!c.add(a));
        assert!(matches!(c, Conns::One(_)));
        assert!(c.add(b));
        assert_eq!(c.as_slice(), &[a, b]);
        assert!(c.remove(a));
        assert!(matches!(c, Conns::One(x) if x == b));
        assert!(!c.remove(a));
        assert!(c.remove(b));
        assert!(c.is_empty());
    }
}
