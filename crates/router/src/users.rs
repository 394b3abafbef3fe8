//! [`UserMap`]: the presence map, user id → [`UserState`], dense.
//!
//! Why not a `HashMap`: hashbrown keeps a power-of-two bucket array at most 7/8
//! full, so at 15,000 users it holds 32,768 buckets of 25 B — 55 B per user, the
//! largest share of an idle connection (NOTES, issue 11). This table is one array
//! of 24-byte buckets of any length, grown by 5/4 at 90 % load, so kept 72–90 %
//! full: 27–33 B per user (at least 128 KiB: see `MIN_BUCKETS`).
//!
//! Robin Hood linear probing (a bucket's distance from its home decides who yields
//! on insert, so a lookup stops as soon as it passes where its key would be) and
//! backward-shift deletion (no tombstones): get, insert and remove are O(1)
//! expected at 90 % load. Home buckets come from the keyed [`IdHashBuilder`]
//! mapped onto the length by a multiply (`(h × len) >> 64`), so any length works.
//!
//! An empty bucket has the key `u64::MAX`; the one user with that id lives in a
//! field of its own.

use std::hash::BuildHasher;

use crate::hash::IdHashBuilder;
use crate::presence::UserState;
use crate::UserId;

/// The key of an empty bucket (its user is kept in [`UserMap::reserved`]).
const EMPTY: UserId = u64::MAX;
/// Grows when an insert would fill more than this (numerator over 10).
const MAX_LOAD: usize = 9;
/// Grows by 5/4: right after a growth the table is 72 % full.
const GROW_NUM: usize = 5;
const GROW_DEN: usize = 4;
/// Smallest table: 128 KiB, glibc's mmap threshold, so every table is its own
/// mapping and a table left behind by a growth goes back to the kernel at once.
/// (Smaller tables would come from the heap, and growing by 5/4 leaves four times
/// the last table there in freed chunks: measured, it ate the gain.) A table that
/// grows past a freed one stays above the threshold glibc raises to that size.
const MIN_BUCKETS: usize = (128 << 10) / std::mem::size_of::<Bucket>() + 1;
/// `shrink` only acts below this load (numerator over 10).
const MIN_LOAD: usize = 2;

struct Bucket {
    user: UserId,
    state: UserState,
}

impl Bucket {
    fn empty() -> Bucket {
        Bucket {
            user: EMPTY,
            state: UserState::default(),
        }
    }
}

/// User id → [`UserState`]; see the module doc.
#[derive(Default)]
pub struct UserMap {
    buckets: Vec<Bucket>,
    /// Users in `buckets` (not counting `reserved`).
    len: usize,
    /// The state of user [`EMPTY`], who cannot have a bucket.
    reserved: Option<UserState>,
    hasher: IdHashBuilder,
}

impl UserMap {
    pub fn len(&self) -> usize {
        self.len + usize::from(self.reserved.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Buckets allocated.
    pub fn capacity(&self) -> usize {
        self.buckets.len()
    }

    /// Heap bytes of the bucket array.
    pub fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>()
    }

    #[inline]
    fn home(&self, user: UserId) -> usize {
        let h = self.hasher.hash_one(user);
        ((u128::from(h) * self.buckets.len() as u128) >> 64) as usize
    }

    /// How far bucket `i` (holding `user`) is from that user's home.
    #[inline]
    fn distance(&self, i: usize, user: UserId) -> usize {
        let home = self.home(user);
        if i >= home {
            i - home
        } else {
            i + self.buckets.len() - home
        }
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.buckets.len() {
            0
        } else {
            i + 1
        }
    }

    /// The bucket holding `user` (not [`EMPTY`]).
    #[inline]
    fn find(&self, user: UserId) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mut i = self.home(user);
        let mut d = 0;
        loop {
            let b = &self.buckets[i];
            if b.user == user {
                return Some(i);
            }
            // An empty bucket, or one closer to its home than we would be: `user`
            // would have taken it on insert, so it is not here.
            if b.user == EMPTY || self.distance(i, b.user) < d {
                return None;
            }
            i = self.next(i);
            d += 1;
        }
    }

    pub fn get(&self, user: UserId) -> Option<&UserState> {
        if user == EMPTY {
            return self.reserved.as_ref();
        }
        self.find(user).map(|i| &self.buckets[i].state)
    }

    pub fn get_mut(&mut self, user: UserId) -> Option<&mut UserState> {
        if user == EMPTY {
            return self.reserved.as_mut();
        }
        self.find(user).map(|i| &mut self.buckets[i].state)
    }

    /// The state of `user`, inserted empty when absent.
    pub fn get_or_default(&mut self, user: UserId) -> &mut UserState {
        if user == EMPTY {
            return self.reserved.get_or_insert_with(UserState::default);
        }
        if let Some(i) = self.find(user) {
            return &mut self.buckets[i].state;
        }
        if (self.len + 1) * 10 > self.buckets.len() * MAX_LOAD {
            let grown = (self.buckets.len() * GROW_NUM / GROW_DEN).max(MIN_BUCKETS);
            self.resize(grown);
        }
        let i = self.insert_new(user, UserState::default());
        &mut self.buckets[i].state
    }

    /// Inserts a user known to be absent, with room known to be there; returns
    /// where it went.
    fn insert_new(&mut self, user: UserId, state: UserState) -> usize {
        self.len += 1;
        let mut carry = Bucket { user, state };
        let mut i = self.home(user);
        let mut d = 0;
        let mut placed = None;
        loop {
            if self.buckets[i].user == EMPTY {
                self.buckets[i] = carry;
                return placed.unwrap_or(i);
            }
            let theirs = self.distance(i, self.buckets[i].user);
            if theirs < d {
                // Robin Hood: the richer bucket yields and moves on.
                std::mem::swap(&mut self.buckets[i], &mut carry);
                placed.get_or_insert(i);
                d = theirs;
            }
            i = self.next(i);
            d += 1;
        }
    }

    /// Removes `user`, returning its state.
    pub fn remove(&mut self, user: UserId) -> Option<UserState> {
        if user == EMPTY {
            return self.reserved.take();
        }
        let mut hole = self.find(user)?;
        let gone = std::mem::replace(&mut self.buckets[hole], Bucket::empty());
        self.len -= 1;
        // Backward shift: later buckets of the same run move one closer to home.
        let mut j = self.next(hole);
        while self.buckets[j].user != EMPTY && self.distance(j, self.buckets[j].user) > 0 {
            self.buckets.swap(hole, j);
            hole = j;
            j = self.next(j);
        }
        Some(gone.state)
    }

    /// Every user and its state, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (UserId, &UserState)> {
        self.buckets
            .iter()
            .filter(|b| b.user != EMPTY)
            .map(|b| (b.user, &b.state))
            .chain(self.reserved.as_ref().map(|s| (EMPTY, s)))
    }

    pub fn values(&self) -> impl Iterator<Item = &UserState> {
        self.iter().map(|(_, s)| s)
    }

    /// Gives memory back when the table is mostly empty (after a mass disconnect).
    pub fn shrink(&mut self) {
        if self.is_empty() {
            self.buckets = Vec::new();
        } else if self.buckets.len() > MIN_BUCKETS && self.len * 10 < self.buckets.len() * MIN_LOAD
        {
            // Right after a growth's load: room for the next logins.
            let target = (self.len * GROW_NUM * 10).div_ceil(GROW_DEN * MAX_LOAD);
            self.resize(target.max(MIN_BUCKETS));
        }
    }

    /// Moves every user into a table of `buckets` buckets (≥ len / load).
    fn resize(&mut self, buckets: usize) {
        let mut fresh = Vec::with_capacity(buckets);
        fresh.resize_with(buckets, Bucket::empty);
        let old = std::mem::replace(&mut self.buckets, fresh);
        self.len = 0;
        for b in old {
            if b.user != EMPTY {
                self.insert_new(b.user, b.state);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presence::Overflow;
    use crate::ConnRef;
    use std::collections::HashMap;

    fn one(token: u32) -> UserState {
        let mut s = UserState::default();
        s.conns
            .add(ConnRef { loop_id: 0, token }, &mut Overflow::default());
        s
    }

    fn token_of(s: &UserState) -> u32 {
        let mut t = None;
        s.conns
            .for_each(&Overflow::default(), |c| t = Some(c.token));
        t.expect("one connection")
    }

    #[test]
    fn a_bucket_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Bucket>(), 24);
    }

    /// Random inserts and removes against a `HashMap`, ids drawn from a range that
    /// fills the smallest table past a growth, so runs collide, wrap and shift;
    /// `EMPTY` and 0 included.
    #[test]
    fn agrees_with_a_hash_map() {
        let mut map = UserMap::default();
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut x = 0x1234_5678_9abc_def1u64;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let user = match x % 97 {
                0 => EMPTY,
                1 => 0,
                _ => (x >> 8) % 7000,
            };
            if (x >> 40).is_multiple_of(4) {
                assert_eq!(
                    map.remove(user).map(|s| token_of(&s)),
                    model.remove(&user),
                    "remove {user} at {step}"
                );
            } else {
                let s = map.get_or_default(user);
                if s.conns.is_empty() {
                    *s = one(step);
                    model.insert(user, step);
                }
            }
            if step % 10_000 == 0 {
                assert_eq!(map.len(), model.len());
                for (&u, &t) in &model {
                    assert_eq!(map.get(u).map(token_of), Some(t), "get {u}");
                }
                let mut seen: Vec<_> = map.iter().map(|(u, s)| (u, token_of(s))).collect();
                seen.sort();
                let mut want: Vec<_> = model.iter().map(|(&u, &t)| (u, t)).collect();
                want.sort();
                assert_eq!(seen, want);
            }
        }
        for u in 0..7000 {
            assert_eq!(map.get(u).is_some(), model.contains_key(&u));
        }
        assert!(map.capacity() > MIN_BUCKETS, "the table grew at least once");
    }

    #[test]
    fn stays_dense_and_gives_memory_back() {
        let mut map = UserMap::default();
        for u in 0..15_000u64 {
            *map.get_or_default(u) = one(u as u32);
        }
        let load = map.len() as f64 / map.capacity() as f64;
        assert!((0.7..=0.9).contains(&load), "load {load}");
        for u in 0..14_000u64 {
            assert!(map.remove(u).is_some());
            assert!(map.get(u).is_none());
        }
        map.shrink();
        assert_eq!(map.capacity(), MIN_BUCKETS);
        for u in 14_000..15_000u64 {
            assert_eq!(map.get(u).map(token_of), Some(u as u32));
            map.remove(u);
        }
        map.shrink();
        assert_eq!(map.capacity(), 0, "an empty map holds no table");
    }
}
