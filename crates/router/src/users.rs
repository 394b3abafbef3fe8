//! [`UserMap`]: the presence map, user id → connections and history ring, dense.
//!
//! Why not a `HashMap`: hashbrown keeps a power-of-two bucket array at most 7/8
//! full, so at 15,000 users it holds 32,768 buckets of 25 B — 55 B per user, the
//! largest share of an idle connection (docs/decisions/connection-budget.md). This table is one array
//! of 16-byte buckets of any length, grown by 9/8 at 92 % load, so kept 82–92 %
//! full: 17.4–19.6 B per user (at least 128 KiB: see `MIN_BUCKETS`).
//!
//! A bucket holds the user id and one 8-byte word: the user's packed [`Conns`]
//! while they have no history ring (every idle subscriber), or — tagged — the
//! index of their entry in a side slab of full [`UserState`]s (connections and
//! ring) once a message reached them. A ring costs far more than the 16 bytes of
//! its side entry, so only the common case is kept small.
//!
//! Robin Hood linear probing (a bucket's distance from its home decides who yields
//! on insert, so a lookup stops as soon as it passes where its key would be) and
//! backward-shift deletion (no tombstones): get, insert and remove are O(1)
//! expected at 92 % load (≈ 7 buckets, two cache lines, on a successful lookup).
//! Home buckets come from the keyed [`IdHashBuilder`] mapped onto the length by a
//! multiply (`(h × len) >> 64`), so any length works.
//!
//! An empty bucket has the key `u64::MAX`; the one user with that id lives in a
//! field of its own.

use std::hash::BuildHasher;

use crate::hash::IdHashBuilder;
use crate::history::Ring;
use crate::presence::{Conns, UserState};
use crate::UserId;

/// The key of an empty bucket (its user is kept in [`UserMap::reserved`]).
const EMPTY: UserId = u64::MAX;
/// Grows when an insert would fill more than this (numerator over 100).
const MAX_LOAD: usize = 92;
/// Grows by 9/8: right after a growth the table is 82 % full.
const GROW_NUM: usize = 9;
const GROW_DEN: usize = 8;
/// Smallest table: 128 KiB, glibc's mmap threshold, so every table is its own
/// mapping and a table left behind by a growth goes back to the kernel at once.
/// (Smaller tables would come from the heap, and growing geometrically leaves
/// several times the last table there in freed chunks: measured, it ate the gain.)
/// A table that grows past a freed one stays above the threshold glibc raises to
/// that size.
const MIN_BUCKETS: usize = (128 << 10) / std::mem::size_of::<Bucket>() + 1;
/// `shrink` only acts below this load (numerator over 100).
const MIN_LOAD: usize = 20;

struct Bucket {
    user: UserId,
    /// The user's connections, or [`Conns::side`] naming their side entry.
    word: Conns,
}

impl Bucket {
    const VACANT: Bucket = Bucket {
        user: EMPTY,
        word: Conns::NONE,
    };
}

/// User id → connections and history; see the module doc.
#[derive(Default)]
pub struct UserMap {
    buckets: Vec<Bucket>,
    /// Users in `buckets` (not counting `reserved`).
    len: usize,
    /// Full states of users with a history ring. A free entry has no ring (an
    /// entry in use always has one); its index is in `free`.
    side: Vec<UserState>,
    free: Vec<u32>,
    /// The state of user [`EMPTY`], who cannot have a bucket.
    reserved: Option<UserState>,
    hasher: IdHashBuilder,
}

/// A user's state, read: a copy of the connections and the ring if there is one.
#[derive(Clone, Copy)]
pub struct UserRef<'a> {
    pub conns: Conns,
    pub ring: Option<&'a Ring>,
}

impl UserRef<'_> {
    pub fn last_seq(&self) -> u64 {
        self.ring.map_or(0, Ring::last)
    }
}

/// Where a user's state is.
#[derive(Clone, Copy)]
enum At {
    /// Inline in this bucket: connections only.
    Bucket(usize),
    Side(u32),
    Reserved,
}

/// A user's state, to change: its connections, its ring, or a new ring.
pub struct UserMut<'a> {
    map: &'a mut UserMap,
    at: At,
}

impl UserMut<'_> {
    pub fn conns(&self) -> Conns {
        match self.at {
            At::Bucket(i) => self.map.buckets[i].word,
            At::Side(j) => self.map.side[j as usize].conns,
            At::Reserved => self.map.reserved.as_ref().expect("reserved user").conns,
        }
    }

    pub fn conns_mut(&mut self) -> &mut Conns {
        match self.at {
            At::Bucket(i) => &mut self.map.buckets[i].word,
            At::Side(j) => &mut self.map.side[j as usize].conns,
            At::Reserved => &mut self.map.reserved.as_mut().expect("reserved user").conns,
        }
    }

    pub fn ring(&self) -> Option<&Ring> {
        match self.at {
            At::Bucket(_) => None,
            At::Side(j) => self.map.side[j as usize].ring.as_deref(),
            At::Reserved => self.map.reserved.as_ref()?.ring.as_deref(),
        }
    }

    pub fn ring_mut(&mut self) -> Option<&mut Ring> {
        match self.at {
            At::Bucket(_) => None,
            At::Side(j) => self.map.side[j as usize].ring.as_deref_mut(),
            At::Reserved => self.map.reserved.as_mut()?.ring.as_deref_mut(),
        }
    }

    /// Gives the user `ring` (they have none): a user without one moves from
    /// their bucket to a side entry.
    pub fn set_ring(&mut self, ring: Box<Ring>) -> &mut Ring {
        let map = &mut *self.map;
        if let At::Bucket(i) = self.at {
            let state = UserState {
                conns: map.buckets[i].word,
                ring: None,
            };
            let j = match map.free.pop() {
                Some(j) => {
                    map.side[j as usize] = state;
                    j
                }
                None => {
                    map.side.push(state);
                    (map.side.len() - 1) as u32
                }
            };
            map.buckets[i].word = Conns::side(j);
            self.at = At::Side(j);
        }
        let slot = match self.at {
            At::Side(j) => &mut map.side[j as usize].ring,
            At::Reserved => &mut map.reserved.as_mut().expect("reserved user").ring,
            At::Bucket(_) => unreachable!("moved to a side entry above"),
        };
        slot.insert(ring)
    }
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

    /// Heap bytes of the bucket array and the side slab.
    pub fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>()
            + self.side.capacity() * std::mem::size_of::<UserState>()
            + self.free.capacity() * 4
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

    /// Where the user in bucket `i` keeps their state.
    #[inline]
    fn at_bucket(&self, i: usize) -> At {
        match self.buckets[i].word.side_index() {
            Some(j) => At::Side(j),
            None => At::Bucket(i),
        }
    }

    fn locate(&self, user: UserId) -> Option<At> {
        if user == EMPTY {
            return self.reserved.as_ref().map(|_| At::Reserved);
        }
        self.find(user).map(|i| self.at_bucket(i))
    }

    fn view(&self, at: At) -> UserRef<'_> {
        fn full(s: &UserState) -> UserRef<'_> {
            UserRef {
                conns: s.conns,
                ring: s.ring.as_deref(),
            }
        }
        match at {
            At::Bucket(i) => UserRef {
                conns: self.buckets[i].word,
                ring: None,
            },
            At::Side(j) => full(&self.side[j as usize]),
            At::Reserved => full(self.reserved.as_ref().expect("reserved user")),
        }
    }

    pub fn get(&self, user: UserId) -> Option<UserRef<'_>> {
        self.locate(user).map(|at| self.view(at))
    }

    pub fn get_mut(&mut self, user: UserId) -> Option<UserMut<'_>> {
        let at = self.locate(user)?;
        Some(UserMut { map: self, at })
    }

    /// The state of `user`, inserted empty when absent.
    pub fn get_or_default(&mut self, user: UserId) -> UserMut<'_> {
        if user == EMPTY {
            self.reserved.get_or_insert_with(UserState::default);
            return UserMut {
                map: self,
                at: At::Reserved,
            };
        }
        let at = match self.find(user) {
            Some(i) => self.at_bucket(i),
            None => {
                if (self.len + 1) * 100 > self.buckets.len() * MAX_LOAD {
                    let grown = (self.buckets.len() * GROW_NUM / GROW_DEN).max(MIN_BUCKETS);
                    self.resize(grown);
                }
                At::Bucket(self.insert_new(user, Conns::NONE))
            }
        };
        UserMut { map: self, at }
    }

    /// Inserts a user known to be absent, with room known to be there; returns
    /// where it went.
    fn insert_new(&mut self, user: UserId, word: Conns) -> usize {
        self.len += 1;
        let mut carry = Bucket { user, word };
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
        let gone = std::mem::replace(&mut self.buckets[hole], Bucket::VACANT);
        self.len -= 1;
        // Backward shift: later buckets of the same run move one closer to home.
        let mut j = self.next(hole);
        while self.buckets[j].user != EMPTY && self.distance(j, self.buckets[j].user) > 0 {
            self.buckets.swap(hole, j);
            hole = j;
            j = self.next(j);
        }
        Some(match gone.word.side_index() {
            Some(s) => {
                self.free.push(s);
                std::mem::take(&mut self.side[s as usize])
            }
            None => UserState {
                conns: gone.word,
                ring: None,
            },
        })
    }

    /// Every user and its state, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (UserId, UserRef<'_>)> {
        (0..self.buckets.len())
            .filter(move |&i| self.buckets[i].user != EMPTY)
            .map(move |i| (self.buckets[i].user, self.view(self.at_bucket(i))))
            .chain(
                self.reserved
                    .as_ref()
                    .map(|_| (EMPTY, self.view(At::Reserved))),
            )
    }

    /// Every history ring.
    pub fn rings(&self) -> impl Iterator<Item = &Ring> {
        self.side
            .iter()
            .chain(self.reserved.as_ref())
            .filter_map(|s| s.ring.as_deref())
    }

    /// Gives memory back when the table is mostly empty (after a mass disconnect).
    pub fn shrink(&mut self) {
        if self.len == 0 {
            self.buckets = Vec::new();
        } else if self.buckets.len() > MIN_BUCKETS && self.len * 100 < self.buckets.len() * MIN_LOAD
        {
            // Right after a growth's load: room for the next logins.
            let target = (self.len * GROW_NUM * 100).div_ceil(GROW_DEN * MAX_LOAD);
            self.resize(target.max(MIN_BUCKETS));
        }
        // Free side entries at the end go; those in the middle wait for new rings.
        while self.side.last().is_some_and(|s| s.ring.is_none()) {
            self.side.pop();
        }
        let len = self.side.len() as u32;
        self.free.retain(|&j| j < len);
        if self.side.capacity() > 2 * self.side.len().max(16) {
            self.side.shrink_to_fit();
            self.free.shrink_to_fit();
        }
    }

    /// Moves every user into a table of `buckets` buckets (≥ len / load).
    fn resize(&mut self, buckets: usize) {
        let mut fresh = Vec::with_capacity(buckets);
        fresh.resize_with(buckets, || Bucket::VACANT);
        let old = std::mem::replace(&mut self.buckets, fresh);
        self.len = 0;
        for b in old {
            if b.user != EMPTY {
                self.insert_new(b.user, b.word);
            }
        }
    }
}

#[cfg(test)]
mod tests;
