//! A loop's connections: the slab of [`Slot`]s (socket, core, output queue), the
//! generation of every slot ever used, so a token names one connection and never the
//! next one in its slot, and the side table of the few connections' credentials
//! (token expiries, failed authentications). It hands out what a core call borrows;
//! reading, writing and closing are the loop's (`io`).

use super::slot::{self, Slot, MAX_SLOTS_PER_LOOP};
use connection::{Credentials, Tick};
use slab::Slab;

pub(super) struct Conns {
    slots: Slab<Slot>,
    /// Generation per slab slot, bumped on close (1 byte per slot ever used).
    gens: Vec<u8>,
    /// Token expiries and failed authentications of the few connections that have
    /// any (a side table: the slot stays 40 bytes); expiries fire with the timers.
    credentials: Credentials,
}

impl Conns {
    /// Room reserved for `slots` connections (see `FIRST_SLOTS`).
    pub(super) fn with_capacity(slots: usize) -> Conns {
        Conns {
            slots: Slab::with_capacity(slots),
            gens: Vec::with_capacity(slots),
            credentials: Credentials::default(),
        }
    }

    /// The slab index of `token` if that connection is still open.
    pub(super) fn live(&self, token: u32) -> Option<usize> {
        let (index, gen) = slot::untoken(token);
        (self.slots.contains(index) && self.gens[index] == gen).then_some(index)
    }

    /// The timer deadline of connection `token`, `None` if it has closed.
    pub(super) fn deadline(&self, token: u32) -> Option<Tick> {
        self.live(token)
            .map(|index| self.slots[index].conn.deadline())
    }

    /// The token of the connection in slot `index` now.
    pub(super) fn token(&self, index: usize) -> u32 {
        slot::token(index, self.gens[index])
    }

    /// The generation of slot `index`: it moves on when its connection closes.
    pub(super) fn gen(&self, index: usize) -> u8 {
        self.gens[index]
    }

    /// The index the next [`Conns::insert`] takes; `None` when the loop is full
    /// (24 bits of a token are the index).
    pub(super) fn vacant(&self) -> Option<usize> {
        let index = self.slots.vacant_key();
        (index < MAX_SLOTS_PER_LOOP).then_some(index)
    }

    /// Adds a connection at [`Conns::vacant`]'s index; returns it.
    pub(super) fn insert(&mut self, slot: Slot) -> usize {
        let index = self.slots.insert(slot);
        if self.gens.len() <= index {
            self.gens.resize(index + 1, 0);
        }
        index
    }

    /// Takes connection `index` out: its credentials are forgotten and its slot's
    /// generation moves on, so its token matches no later connection there.
    pub(super) fn remove(&mut self, index: usize) -> Slot {
        self.credentials.forget(self.token(index));
        let slot = self.slots.remove(index);
        self.gens[index] = self.gens[index].wrapping_add(1);
        slot
    }

    /// What a core call on connection `index` borrows: its slot, the credentials
    /// table and its token.
    pub(super) fn for_core(&mut self, index: usize) -> Option<(&mut Slot, &mut Credentials, u32)> {
        let slot = self.slots.get_mut(index)?;
        Some((
            slot,
            &mut self.credentials,
            slot::token(index, self.gens[index]),
        ))
    }

    /// The next connection whose token expired by `unix_now` (seconds).
    pub(super) fn pop_expired(&mut self, unix_now: u64) -> Option<u32> {
        self.credentials.pop_expired(unix_now)
    }

    /// Failed authentications since the last call.
    pub(super) fn take_failed(&mut self) -> u64 {
        self.credentials.take_failed()
    }

    pub(super) fn get(&self, index: usize) -> Option<&Slot> {
        self.slots.get(index)
    }

    pub(super) fn get_mut(&mut self, index: usize) -> Option<&mut Slot> {
        self.slots.get_mut(index)
    }

    pub(super) fn contains(&self, index: usize) -> bool {
        self.slots.contains(index)
    }

    /// The open connections with their indexes, in slab order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, &Slot)> {
        self.slots.iter()
    }

    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// After a mass disconnect. `gens` stays: one byte per slot keeps stale tokens
    /// from matching new ones.
    pub(super) fn shrink(&mut self) {
        self.slots.shrink_to_fit();
    }
}

impl std::ops::Index<usize> for Conns {
    type Output = Slot;
    fn index(&self, index: usize) -> &Slot {
        &self.slots[index]
    }
}

impl std::ops::IndexMut<usize> for Conns {
    fn index_mut(&mut self, index: usize) -> &mut Slot {
        &mut self.slots[index]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use connection::Connection;

    fn open(conns: &mut Conns) -> u32 {
        let index = conns.vacant().expect("room");
        let slot = Slot {
            conn: Connection::new(),
            out: None,
            stream: None,
            ip_key: 0,
        };
        assert_eq!(conns.insert(slot), index);
        conns.token(index)
    }

    /// A token planned for a connection that closed never reaches the next one in
    /// its slot.
    #[test]
    fn a_stale_token_never_matches_a_reused_slot() {
        let mut conns = Conns::with_capacity(4);
        let first = open(&mut conns);
        let index = conns.live(first).expect("open");
        conns.remove(index);
        assert_eq!(conns.live(first), None);
        let second = open(&mut conns);
        assert_eq!(slot::untoken(second).0, index, "the slot is reused");
        assert_ne!(second, first);
        assert_eq!(conns.live(first), None);
        assert_eq!(conns.live(second), Some(index));
        assert_eq!(conns.deadline(first), None);
        assert!(conns.deadline(second).is_some());
    }

    /// The generation is one byte: it wraps, and only a token 256 reuses old can
    /// match again.
    #[test]
    fn generations_wrap_per_slot() {
        let mut conns = Conns::with_capacity(1);
        let first = open(&mut conns);
        for _ in 0..256 {
            let index = conns.live(conns.token(0)).expect("open");
            conns.remove(index);
            open(&mut conns);
        }
        assert_eq!(conns.gen(0), 0);
        assert_eq!(conns.live(first), Some(0));
    }

    /// Shrinking after a mass disconnect keeps the generations.
    #[test]
    fn shrinking_keeps_stale_tokens_stale() {
        let mut conns = Conns::with_capacity(8);
        let tokens: Vec<u32> = (0..8).map(|_| open(&mut conns)).collect();
        for &token in &tokens {
            let index = conns.live(token).expect("open");
            conns.remove(index);
        }
        assert!(conns.is_empty());
        conns.shrink();
        let again = open(&mut conns);
        assert!(tokens.iter().all(|&t| conns.live(t).is_none()));
        assert_eq!(conns.live(again), Some(slot::untoken(again).0));
        assert_eq!(conns.len(), 1);
    }

    /// A core call borrows the slot, the credentials and the token together.
    #[test]
    fn a_core_call_gets_its_token() {
        let mut conns = Conns::with_capacity(2);
        let token = open(&mut conns);
        let index = slot::untoken(token).0;
        let (_, _, key) = conns.for_core(index).expect("open");
        assert_eq!(key, token);
        assert!(conns.for_core(index + 1).is_none());
    }
}
