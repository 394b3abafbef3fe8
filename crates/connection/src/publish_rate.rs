//! How often a client may publish (SPEC C7): a token bucket of [`BURST`] publishes
//! refilled at [`RATE_PER_SECOND`], the one rule for a WebSocket's publishes (a
//! bucket per connection, `client_publish`) and for client publishes over HTTP (a
//! bucket per user in the process's [`PublishRates`], since an HTTP client may use a
//! new connection, or a new HTTP/2 stream, on any loop, for every publish).
//!
//! Not here: who may publish where (`auth`'s claims), the answers (`client_publish`,
//! `http_publish`).

use crate::clock::{Tick, TICK_MS};
use std::collections::HashMap;

/// Sustained client publishes per second per connection (WebSocket) or per user
/// and process (HTTP).
pub const RATE_PER_SECOND: u32 = 10;
/// Client publishes that may go at once after a quiet spell.
pub const BURST: u32 = 20;

/// Users [`PublishRates`] holds before it forgets those whose bucket is full again
/// (a full bucket is what a new entry starts with: forgetting it changes nothing).
const KEEP_BEFORE_PRUNE: usize = 1024;

/// A token bucket: publishes available, refilled by elapsed ticks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bucket {
    tokens: u32,
    /// The tick `tokens` was last refilled at.
    refilled: Tick,
}

impl Bucket {
    /// A full bucket at `now`.
    pub(crate) fn full(now: Tick) -> Bucket {
        Bucket {
            tokens: BURST,
            refilled: now,
        }
    }

    /// Takes `n` publishes at `now`, all or none (a batch is refused whole).
    pub(crate) fn take(&mut self, now: Tick, n: u32) -> bool {
        self.refill(now);
        if self.tokens < n {
            return false;
        }
        self.tokens -= n;
        true
    }

    fn refill(&mut self, now: Tick) {
        let ticks_per_token = (1000 / TICK_MS / u64::from(RATE_PER_SECOND)).max(1) as u32;
        let earned = now.wrapping_sub(self.refilled) / ticks_per_token;
        if earned > 0 {
            self.tokens = self.tokens.saturating_add(earned).min(BURST);
            self.refilled = self.refilled.wrapping_add(earned * ticks_per_token);
        }
    }

    fn is_full_at(mut self, now: Tick) -> bool {
        self.refill(now);
        self.tokens == BURST
    }
}

/// A process's buckets for client publishes over HTTP, by user (the token's `sub`;
/// a token without one is keyed by its signature). Bounded: once it holds twice
/// what it kept at its last prune (at least [`KEEP_BEFORE_PRUNE`]) it drops every
/// user whose bucket has filled up again, so it holds about the users that
/// published in the last two seconds.
#[derive(Debug, Default)]
pub struct PublishRates {
    buckets: HashMap<u64, Bucket>,
    prune_at: usize,
}

impl PublishRates {
    /// Takes `n` publishes for `user` at `now`; false: over the rate, nothing taken.
    pub fn take(&mut self, user: u64, now: Tick, n: u32) -> bool {
        if self.buckets.len() >= self.prune_at.max(KEEP_BEFORE_PRUNE) {
            self.buckets.retain(|_, b| !b.is_full_at(now));
            self.prune_at = 2 * self.buckets.len();
        }
        self.buckets
            .entry(user)
            .or_insert_with(|| Bucket::full(now))
            .take(now, n)
    }

    /// Users with a bucket (tests, memory accounting).
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Tick = (1000 / TICK_MS) as Tick;

    #[test]
    fn a_bucket_allows_a_burst_then_the_rate() {
        let mut b = Bucket::full(0);
        assert!((0..BURST).all(|_| b.take(0, 1)));
        assert!(!b.take(0, 1), "the burst is spent");
        assert!(b.take(SECOND, RATE_PER_SECOND), "a second earns the rate");
        assert!(!b.take(SECOND, 1));
        assert!(!b.take(10 * SECOND, BURST + 1), "never more than the burst");
        assert!(b.take(10 * SECOND, BURST), "all or none: nothing was taken");
    }

    #[test]
    fn users_are_limited_apart_and_forgotten_once_full_again() {
        let mut r = PublishRates::default();
        assert!(r.take(1, 0, BURST));
        assert!(!r.take(1, 0, 1), "user 1 is over the rate");
        assert!(r.take(2, 0, 1), "user 2 is not");
        for user in 10..(10 + KEEP_BEFORE_PRUNE as u64) {
            r.take(user, 0, 1);
        }
        // Three seconds later every earlier bucket is full again: the next prune (once
        // the table doubled) forgets them and keeps the users publishing now.
        let now = 3 * SECOND;
        for user in 100_000..100_000 + 2 * KEEP_BEFORE_PRUNE as u64 {
            assert!(r.take(user, now, 1));
        }
        assert_eq!(
            r.len(),
            2 * KEEP_BEFORE_PRUNE,
            "only the new users are kept"
        );
        assert!(r.take(1, now, BURST), "user 1's bucket filled again");
    }
}
