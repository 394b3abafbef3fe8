//! The bound on all history rings together (`history_total_bytes`): when the
//! charged bytes of every ring exceed it, the oldest kept messages go first,
//! whichever user they belong to.
//!
//! "Oldest" needs a global order of ring entries. [`HistoryLog`] keeps one log
//! entry per stored message, in publish order: `(user, ring epoch)`, 12 bytes.
//! The entry's sequence number is implicit: a ring's entries stand for its
//! sequence numbers from `Ring::logged_from` up, in order. Entries whose message
//! has left its ring another way (per-user limits, the ring dropped after its
//! ttl) are stale; they are skipped when reached, and the log is compacted when
//! stale entries outnumber live ones, so it stays within 2× the live entries.
//!
//! Not here: per-user limits (`history`), which rings exist (`router`).

use std::collections::VecDeque;

use crate::hash::IdMap;
use crate::presence::UserState;
use crate::UserId;

/// Stale entries tolerated before a compaction, on top of 1× the live entries.
const COMPACT_SLACK: usize = 4096;

/// The history log and the totals behind the global bound.
#[derive(Debug)]
pub struct HistoryLog {
    /// `[user low 32 bits, user high 32 bits, epoch]` per stored message, oldest first.
    log: VecDeque<[u32; 3]>,
    /// Bound on `bytes` (charged bytes of every ring).
    limit: usize,
    /// Charged bytes of every ring.
    pub bytes: usize,
    /// Messages kept in every ring.
    pub messages: u64,
    /// Messages dropped to keep `bytes ≤ limit` (not counting per-user drops).
    pub evicted: u64,
}

impl HistoryLog {
    pub fn new(limit: usize) -> HistoryLog {
        HistoryLog {
            log: VecDeque::new(),
            limit,
            bytes: 0,
            messages: 0,
            evicted: 0,
        }
    }

    /// A ring of `user` with `epoch` stored a message of `added` charged bytes and
    /// dropped `dropped` messages of `dropped_bytes` from its front.
    pub fn record(&mut self, user: UserId, epoch: u32, pushed: &crate::history::Pushed) {
        self.bytes = self.bytes + pushed.added - pushed.dropped_bytes;
        self.messages = self.messages + u64::from(pushed.stored) - pushed.dropped as u64;
        if pushed.stored {
            self.log
                .push_back([user as u32, (user >> 32) as u32, epoch]);
        }
    }

    /// A ring holding `messages` messages of `bytes` charged bytes was dropped.
    pub fn forget(&mut self, messages: usize, bytes: usize) {
        self.bytes -= bytes;
        self.messages -= messages as u64;
    }

    /// Evicts the oldest messages until the total is within the limit, then
    /// compacts the log if stale entries dominate. O(1) amortised per stored message.
    pub fn enforce(&mut self, users: &mut IdMap<UserState>) {
        while self.bytes > self.limit {
            let Some([lo, hi, epoch]) = self.log.pop_front() else {
                break;
            };
            let user = u64::from(lo) | u64::from(hi) << 32;
            let Some(ring) = users.get_mut(&user).and_then(|s| s.ring.as_deref_mut()) else {
                continue;
            };
            if ring.epoch() != epoch {
                continue;
            }
            let seq = ring.logged_from;
            ring.logged_from += 1;
            // Entries below `first_kept` are stale; the first live one is the front.
            if seq >= ring.first_kept() && !ring.is_empty() {
                self.bytes -= ring.pop_front();
                self.messages -= 1;
                self.evicted += 1;
            }
        }
        if self.log.len() > 2 * self.messages as usize + COMPACT_SLACK {
            self.compact(users);
        }
    }

    /// Drops stale entries: one pass, advancing each ring's `logged_from` past
    /// entries for messages it no longer keeps (the same rule as `enforce`).
    fn compact(&mut self, users: &mut IdMap<UserState>) {
        let mut kept = VecDeque::with_capacity(self.messages as usize + COMPACT_SLACK);
        for [lo, hi, epoch] in self.log.drain(..) {
            let user = u64::from(lo) | u64::from(hi) << 32;
            let Some(ring) = users.get_mut(&user).and_then(|s| s.ring.as_deref_mut()) else {
                continue;
            };
            if ring.epoch() != epoch {
                continue;
            }
            if ring.logged_from < ring.first_kept() {
                ring.logged_from += 1;
            } else {
                kept.push_back([lo, hi, epoch]);
            }
        }
        self.log = kept;
    }

    /// Log entries, live and stale (for tests and memory accounting).
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    /// Heap bytes held by the log.
    pub fn heap_bytes(&self) -> usize {
        self.log.capacity() * std::mem::size_of::<[u32; 3]>()
    }

    pub fn shrink(&mut self) {
        if self.log.capacity() > 4 * self.log.len().max(1024) {
            self.log.shrink_to_fit();
        }
    }
}
