//! [`Credentials`]: one loop's side table for the few connections that have
//! credential state — when the token they were let in with stops being valid, and
//! how many authentications failed on them. Keyed by the connection's key (the
//! loop's connection token, [`super::Cx::key`]).
//!
//! Why a side table: most connections have no token (open subscriptions, API
//! calls) or a token without `exp`, so neither the 32-byte core nor the 48-byte slab
//! slot grows for this; a connection costs an entry here only while it has an expiry
//! or a failed authentication, and its entry goes when it closes ([`Credentials::forget`]).
//!
//! A Pusher client's session (`pusher_session`) lives here too, under the same key
//! and gone at the same `forget`: one table the pump forgets, not one per kind.
//!
//! Not here: checking tokens (`auth`), what a connection says when its token expires
//! (`expiry`), the clock (times are Unix seconds passed in).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Failed authentications (a refused token or API key, a refused WebSocket token
/// refresh) one connection may have: the answer to the last one closes it, so a
/// client cannot try tokens on one keep-alive connection without limit, each
/// costing a signature check.
pub const MAX_AUTH_FAILURES: u8 = 3;

/// Stale expiries the heap may hold beyond the live ones before it is rebuilt (the
/// heap forgets lazily; this bounds what closed connections leave behind).
const STALE_SLACK: usize = 64;

#[derive(Default)]
pub struct Credentials {
    /// Pusher clients' sessions (app, socket id, client-event bucket): the same
    /// key, forgotten with the rest.
    pub pusher: crate::PusherSessions,
    entries: HashMap<u32, Entry>,
    /// What the token of a connection with channels allows of them (no entry: no
    /// JWT configured, all of it): beside its channel list, not in it, so a
    /// connection without a token pays nothing for it.
    access: HashMap<u32, crate::channels::Access>,
    /// `(valid_until, key)`, soonest first. An item whose key no longer has that
    /// expiry (refreshed, closed) is stale and skipped when it comes up.
    expiries: BinaryHeap<Reverse<(u32, u32)>>,
    /// Entries with an expiry, to know when the heap is mostly stale.
    expiring: usize,
    /// Failed authentications since the loop last took the count (its metrics).
    failed: u64,
}

#[derive(Clone, Copy, Default)]
struct Entry {
    /// The Unix second the connection's token stops being valid; 0: no expiry.
    valid_until: u32,
    failures: u8,
}

impl Credentials {
    /// Sets (or with `None` clears) when connection `key`'s token stops being valid,
    /// in Unix seconds (`auth::Grant::valid_until`). A time past 2106 (beyond u32
    /// seconds) is kept as no expiry.
    pub fn set_expiry(&mut self, key: u32, valid_until: Option<u64>) {
        // 0 means "none" here: an expiry at second 0 (1970) is second 1, expired all
        // the same.
        let until = match valid_until {
            None => 0,
            Some(t) => u32::try_from(t).map_or(0, |t| t.max(1)),
        };
        if until == 0 && !self.entries.contains_key(&key) {
            return; // the common case (a poll answered without a token): no insert
        }
        let entry = self.entries.entry(key).or_default();
        let had = entry.valid_until != 0;
        entry.valid_until = until;
        match (had, until != 0) {
            (false, true) => self.expiring += 1,
            (true, false) => self.expiring -= 1,
            _ => {}
        }
        if until != 0 {
            self.expiries.push(Reverse((until, key)));
            self.compact();
        }
        self.tidy(key);
    }

    /// Whether connection `key`'s token has expired at Unix second `now` (before
    /// the loop's timer closes it: its rights end on the second, not on the tick).
    pub fn expired(&self, key: u32, now: u64) -> bool {
        self.entries
            .get(&key)
            .is_some_and(|e| e.valid_until != 0 && now >= u64::from(e.valid_until))
    }

    /// Counts a failed authentication on connection `key`; returns how many it has
    /// had (close it at [`MAX_AUTH_FAILURES`]).
    pub fn fail(&mut self, key: u32) -> u8 {
        self.failed += 1;
        let entry = self.entries.entry(key).or_default();
        entry.failures = entry.failures.saturating_add(1);
        entry.failures
    }

    /// The next connection whose token has expired at Unix second `now`, its expiry
    /// cleared; `None` when none is due.
    pub fn pop_expired(&mut self, now: u64) -> Option<u32> {
        while let Some(&Reverse((until, key))) = self.expiries.peek() {
            if u64::from(until) > now {
                return None;
            }
            self.expiries.pop();
            let current = self
                .entries
                .get(&key)
                .is_some_and(|e| e.valid_until == until);
            if current {
                self.set_expiry(key, None);
                return Some(key);
            }
        }
        None
    }

    /// Connection `key` closed.
    pub fn forget(&mut self, key: u32) {
        self.pusher.forget(key);
        if !self.access.is_empty() {
            self.access.remove(&key);
        }
        if self.entries.is_empty() {
            return; // every close asks; most loops hold no entry at all
        }
        if let Some(entry) = self.entries.remove(&key) {
            if entry.valid_until != 0 {
                self.expiring -= 1;
            }
        }
    }

    /// What connection `key`'s token allows of channels (`None`: all of them).
    pub(crate) fn access(&self, key: u32) -> Option<&crate::channels::Access> {
        self.access.get(&key)
    }

    /// Sets (or with `None` clears) what connection `key`'s token allows of channels.
    pub(crate) fn set_access(&mut self, key: u32, access: Option<crate::channels::Access>) {
        match access {
            Some(a) => self.access.insert(key, a),
            None => self.access.remove(&key),
        };
    }

    /// Failed authentications since the last call.
    pub fn take_failed(&mut self) -> u64 {
        std::mem::take(&mut self.failed)
    }

    /// Connections with an entry (tests, memory accounting).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops `key`'s entry once it holds nothing.
    fn tidy(&mut self, key: u32) {
        if self
            .entries
            .get(&key)
            .is_some_and(|e| e.valid_until == 0 && e.failures == 0)
        {
            self.entries.remove(&key);
        }
    }

    /// Rebuilds the heap from the live expiries once stale items outnumber them.
    fn compact(&mut self) {
        if self.expiries.len() <= 2 * self.expiring + STALE_SLACK {
            return;
        }
        self.expiries = self
            .entries
            .iter()
            .filter(|(_, e)| e.valid_until != 0)
            .map(|(&key, e)| Reverse((e.valid_until, key)))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiries_fire_in_order_once_and_follow_refreshes() {
        let mut c = Credentials::default();
        c.set_expiry(1, Some(100));
        c.set_expiry(2, Some(50));
        c.set_expiry(3, None);
        assert_eq!(c.len(), 2, "no entry without an expiry or a failure");
        assert!(!c.expired(1, 99) && c.expired(1, 100));
        assert_eq!(c.pop_expired(49), None);
        // Connection 1 refreshed to later: its first expiry is stale.
        c.set_expiry(1, Some(200));
        assert_eq!(c.pop_expired(150), Some(2));
        assert_eq!(c.pop_expired(150), None, "1's old expiry was skipped");
        assert!(!c.expired(2, 150), "fired once, then gone");
        assert_eq!(c.pop_expired(200), Some(1));
        assert!(c.is_empty());
        // A closed connection's expiry never fires (its key may come back).
        c.set_expiry(4, Some(10));
        c.forget(4);
        assert_eq!(c.pop_expired(1000), None);
        // An exp at or before 1970 is expired at once, not "no expiry".
        c.set_expiry(5, Some(0));
        assert!(c.expired(5, 1));
        // Past u32 seconds: kept as no expiry.
        c.set_expiry(6, Some(u64::from(u32::MAX) + 1));
        assert!(!c.expired(6, u64::MAX));
    }

    #[test]
    fn failures_count_per_connection_and_in_total() {
        let mut c = Credentials::default();
        assert_eq!((c.fail(7), c.fail(7), c.fail(8)), (1, 2, 1));
        assert_eq!(c.take_failed(), 3);
        assert_eq!(c.take_failed(), 0);
        c.set_expiry(7, Some(10));
        assert_eq!(c.pop_expired(10), Some(7));
        assert_eq!(c.fail(7), 3, "the count outlives the expiry");
        c.forget(7);
        assert_eq!(c.fail(7), 1, "a new connection with the key starts again");
    }

    /// The side table's share of a token connection's memory (README "The
    /// per-connection budget"): 12 bytes a hash-table slot, 8 a heap item.
    #[test]
    fn an_entry_is_12_bytes_and_an_expiry_8() {
        use std::mem::size_of;
        assert_eq!(size_of::<(u32, Entry)>(), 12);
        assert_eq!(size_of::<Reverse<(u32, u32)>>(), 8);
    }

    #[test]
    fn the_heap_forgets_closed_connections() {
        let mut c = Credentials::default();
        for key in 0..10_000 {
            c.set_expiry(key, Some(1_000_000));
            c.forget(key);
        }
        assert!(c.expiries.len() <= STALE_SLACK + 1, "{}", c.expiries.len());
    }
}
