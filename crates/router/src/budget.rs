//! The bound on all history rings together (`history_total_bytes`), kept exactly
//! (the charged total never exceeds it) at O(1) amortised cost per stored message
//! and no memory beyond the rings themselves.
//!
//! When a stored message would take the total past the bound, room is made in
//! this order:
//! 1. whole rings of *offline* users, the longest offline first (the router's
//!    expiry queue is already in that order): their owners are away, and a ring
//!    they would only read on return is the cheapest loss ([`HistoryTotals::drop_offline`]);
//! 2. the oldest messages of the ring being written, down to the new message
//!    ([`HistoryTotals::trim`]); if the new message alone does not fit, it is not
//!    kept either.
//!
//! This is not a global oldest-first among online users: a user who receives
//! nothing keeps their old history while busy users' histories shrink. An exact
//! global order was built first (a publish-order log of every ring entry, 12 B
//! each, compacted when stale entries piled up): on a 200k-subscriber broadcast it
//! doubled history's memory, cost ~50 % more per delivery, and its compaction
//! stalled the router for 2.7–3.1 s, so it was dropped.
//!
//! Charging: a message costs its payload plus [`crate::history::ENTRY_OVERHEAD`]
//! in every ring that keeps it. A broadcast's payload is shared in memory, so the
//! total is an upper bound of the memory history holds, not an estimate.

use std::collections::VecDeque;
use std::time::Instant;

use crate::history::Ring;
use crate::users::UserMap;
use crate::UserId;

/// Totals of all rings and the bound on them.
#[derive(Debug)]
pub struct HistoryTotals {
    /// Bound on `bytes`.
    pub limit: usize,
    /// Charged bytes of every ring.
    pub bytes: usize,
    /// Messages kept in every ring.
    pub messages: u64,
    /// Messages dropped to keep `bytes ≤ limit` (per-user limits not counted).
    pub evicted: u64,
    /// Rings of offline users dropped for the bound (before their ttl).
    pub rings_evicted: u64,
}

impl HistoryTotals {
    pub fn new(limit: usize) -> HistoryTotals {
        HistoryTotals {
            limit,
            bytes: 0,
            messages: 0,
            evicted: 0,
            rings_evicted: 0,
        }
    }

    /// Applies one [`crate::history::Pushed`].
    pub fn record(&mut self, pushed: &crate::history::Pushed) {
        self.bytes = self.bytes + pushed.added - pushed.dropped_bytes;
        self.messages = self.messages + u64::from(pushed.stored) - pushed.dropped as u64;
    }

    /// A ring holding `messages` messages of `bytes` charged bytes was dropped.
    pub fn forget(&mut self, messages: usize, bytes: usize) {
        self.bytes -= bytes;
        self.messages -= messages as u64;
    }

    /// Forgets `user` (gone from `users`); true when they had a ring, whose totals
    /// are taken off here.
    pub fn forget_user(&mut self, user: UserId, users: &mut UserMap) -> bool {
        match users.remove(user).and_then(|state| state.ring) {
            Some(ring) => {
                self.forget(ring.len(), ring.bytes());
                true
            }
            None => false,
        }
    }

    /// Step 1 (see the module doc): drops offline users' rings, longest offline
    /// first, until a message of `cost` bytes fits or no offline ring is left.
    /// `user` (about to store) is spared. Returns how many rings were dropped.
    pub fn drop_offline(
        &mut self,
        user: UserId,
        cost: usize,
        users: &mut UserMap,
        offline: &mut VecDeque<(Instant, UserId)>,
    ) -> u64 {
        let mut rings = 0;
        while self.bytes + cost > self.limit {
            let Some((_, u)) = offline.pop_front() else {
                break;
            };
            // Entries may be stale (the user came back): only offline rings go.
            let offline_ring = u != user
                && users
                    .get(u)
                    .is_some_and(|s| s.conns.is_empty() && s.ring.is_some());
            if offline_ring {
                let state = users.remove(u).expect("checked above");
                let ring = state.ring.expect("checked above");
                self.forget(ring.len(), ring.bytes());
                self.evicted += ring.len() as u64;
                self.rings_evicted += 1;
                rings += 1;
            }
        }
        rings
    }

    /// Step 2: after `ring` stored a message, drops its oldest (the new one last)
    /// while the total is over the limit.
    pub fn trim(&mut self, ring: &mut Ring) {
        while self.bytes > self.limit && !ring.is_empty() {
            self.bytes -= ring.pop_front();
            self.messages -= 1;
            self.evicted += 1;
        }
    }
}
