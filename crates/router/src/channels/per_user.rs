//! Channel subscriptions per user, across every channel of one router: what
//! [`RouterConfig::max_subscriptions_per_user`](crate::RouterConfig) bounds. A
//! user's count is the sum, over channels, of their connection count among that
//! channel's members, kept beside those counts (never read from them: a join would
//! have to walk every channel). An entry exists only while its user holds a
//! subscription, so the map is as large as the users subscribed now, and it gives
//! its room back when most of them are gone.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use crate::hash::IdHashBuilder;
use crate::router::SHRINK_SLACK;
use crate::UserId;

/// A user's count, 10 bytes: packed to 2-byte alignment, a slot of the table is
/// 11 bytes with its control byte where a `HashMap<UserId, u32>` pads it to 17
/// (one entry per user subscribed: 15,000 users in 5 channels paid 37 B a user,
/// 28 B with a 4-byte count). A count fits 16 bits: the limit it is checked
/// against is at most [`MAX_SUBSCRIPTIONS_PER_USER`](crate::MAX_SUBSCRIPTIONS_PER_USER).
#[derive(Clone, Copy)]
#[repr(C, packed(2))]
struct Held {
    user: UserId,
    /// Never 0: such an entry is removed.
    n: u16,
}

/// User → channel subscriptions held.
#[derive(Default)]
pub(super) struct PerUser {
    held: HashTable<Held>,
    hasher: IdHashBuilder,
}

impl std::fmt::Debug for PerUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerUser")
            .field("users", &self.held.len())
            .finish()
    }
}

impl PerUser {
    fn hash(&self, user: UserId) -> u64 {
        self.hasher.hash_one(user)
    }

    /// The subscriptions `user` holds.
    pub(super) fn of(&self, user: UserId) -> u32 {
        let found = self.held.find(self.hash(user), |h| { h.user } == user);
        found.map_or(0, |h| u32::from(h.n))
    }

    /// `n` more for `user` (joins are refused at the limit, so a count stops
    /// there; past [`MAX_SUBSCRIPTIONS_PER_USER`](crate::MAX_SUBSCRIPTIONS_PER_USER) it would stay at it).
    pub(super) fn add(&mut self, user: UserId, n: u16) {
        if n == 0 {
            return;
        }
        let hash = self.hash(user);
        match self.held.find_mut(hash, |h| { h.user } == user) {
            Some(h) => h.n = h.n.saturating_add(n),
            None => {
                let hasher = &self.hasher;
                self.held
                    .insert_unique(hash, Held { user, n }, |h| hasher.hash_one(h.user));
            }
        }
    }

    /// `n` fewer for `user`; the entry goes at 0.
    pub(super) fn sub(&mut self, user: UserId, n: u16) {
        let hash = self.hash(user);
        let Ok(mut entry) = self.held.find_entry(hash, |h| { h.user } == user) else {
            return;
        };
        let held = entry.get_mut();
        held.n = held.n.saturating_sub(n);
        if held.n == 0 {
            entry.remove();
            if self.held.capacity() > SHRINK_SLACK * self.held.len().max(16) {
                let hasher = &self.hasher;
                self.held.shrink_to_fit(|h| hasher.hash_one(h.user));
            }
        }
    }

    /// Users with an entry.
    pub(super) fn len(&self) -> usize {
        self.held.len()
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.held.capacity() * (std::mem::size_of::<Held>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_SUBSCRIPTIONS_PER_USER;

    #[test]
    fn an_entry_lives_while_its_count_is_above_zero_and_the_map_shrinks_back() {
        let mut p = PerUser::default();
        p.add(7, 0);
        assert_eq!(p.len(), 0, "adding nothing makes no entry");
        p.add(7, 2);
        p.sub(7, 1);
        assert_eq!(p.of(7), 1);
        p.sub(7, 5);
        assert_eq!((p.of(7), p.len()), (0, 0));
        p.sub(8, 1);
        assert_eq!(p.len(), 0, "taking from nobody makes no entry");
        p.add(9, u16::MAX);
        p.add(9, 1);
        assert_eq!(
            p.of(9),
            MAX_SUBSCRIPTIONS_PER_USER,
            "a full count stays full"
        );
        p.sub(9, u16::MAX);
        assert_eq!(p.len(), 0);
        for u in 0..10_000 {
            p.add(u, 1);
        }
        assert_eq!(std::mem::size_of::<Held>(), 10, "a slot is 11 bytes");
        let full = p.heap_bytes();
        for u in 0..10_000 {
            p.sub(u, 1);
        }
        assert_eq!(p.len(), 0);
        assert!(p.heap_bytes() * 8 < full, "{} of {full}", p.heap_bytes());
    }
}
