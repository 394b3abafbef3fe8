//! Channel subscriptions per user, across every channel of one router: what
//! [`RouterConfig::max_subscriptions_per_user`](crate::RouterConfig) bounds. A
//! user's count is the sum, over channels, of their connection count among that
//! channel's members, kept beside those counts (never read from them: a join would
//! have to walk every channel). An entry exists only while its user holds a
//! subscription, so the map is as large as the users subscribed now, and it gives
//! its room back when most of them are gone.

use std::collections::HashMap;

use crate::hash::IdHashBuilder;
use crate::router::SHRINK_SLACK;
use crate::UserId;

/// User → channel subscriptions held (never 0: such an entry is removed).
#[derive(Debug, Default)]
pub(super) struct PerUser {
    held: HashMap<UserId, u32, IdHashBuilder>,
}

impl PerUser {
    /// The subscriptions `user` holds.
    pub(super) fn of(&self, user: UserId) -> u32 {
        self.held.get(&user).copied().unwrap_or(0)
    }

    pub(super) fn add(&mut self, user: UserId, n: u32) {
        if n > 0 {
            *self.held.entry(user).or_insert(0) += n;
        }
    }

    /// `n` fewer for `user`; the entry goes at 0.
    pub(super) fn sub(&mut self, user: UserId, n: u32) {
        let Some(held) = self.held.get_mut(&user) else {
            return;
        };
        *held = held.saturating_sub(n);
        if *held == 0 {
            self.held.remove(&user);
            if self.held.capacity() > SHRINK_SLACK * self.held.len().max(16) {
                self.held.shrink_to_fit();
            }
        }
    }

    /// Users with an entry.
    pub(super) fn len(&self) -> usize {
        self.held.len()
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.held.capacity() * (std::mem::size_of::<(UserId, u32)>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for u in 0..10_000 {
            p.add(u, 1);
        }
        let full = p.heap_bytes();
        for u in 0..10_000 {
            p.sub(u, 1);
        }
        assert_eq!(p.len(), 0);
        assert!(p.heap_bytes() * 8 < full, "{} of {full}", p.heap_bytes());
    }
}
