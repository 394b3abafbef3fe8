//! The connections subscribed to one channel, each with the user it is logged in
//! as: who receives a publish, who is present and with how many connections, and,
//! when a gateway dies, whose connections went.
//!
//! Most channels are small (a room, a document): a chain of 8-byte words in the
//! router's [`Blocks`] (no holes as channels grow together, see there), plus
//! counts. A connection is a word; one with a user is followed by a second word,
//! its user. A join or leave scans it (at most [`FEW_MAX`] connections), and a
//! user's connection count is read by that scan, so presence keeps no map per
//! channel and the router no map of connections to users: a membership costs the
//! 8 bytes of the user beside its connection, and a connection without a user
//! costs what it did before presence. A channel past [`FEW_MAX`] becomes two hash
//! maps (connection → user, user → connections: a join or leave that does not
//! scan), and a chain again below half of it.

use std::collections::HashMap;

use super::blocks::{Blocks, Chain};
use crate::hash::IdHashBuilder;
use crate::{ConnRef, UserId};

/// Most connections a chain holds before the maps take over.
const FEW_MAX: usize = 512;

/// A connection's word: followed by a word holding its user.
const NAMED: u64 = 1 << 63;

fn word(conn: ConnRef) -> u64 {
    u64::from(conn.loop_id) << 32 | u64::from(conn.token)
}

fn conn_of(word: u64) -> ConnRef {
    ConnRef {
        loop_id: (word >> 32) as u16,
        token: word as u32,
    }
}

/// Each connection of `words` with where its word is and its user.
fn entries(
    mut words: impl Iterator<Item = u64>,
) -> impl Iterator<Item = (usize, ConnRef, Option<UserId>)> {
    let mut i = 0;
    std::iter::from_fn(move || {
        let at = i;
        let w = words.next()?;
        let user = match w & NAMED {
            0 => None,
            _ => Some(words.next()?),
        };
        i = at + 1 + usize::from(user.is_some());
        Some((at, conn_of(w & !NAMED), user))
    })
}

#[derive(Debug)]
pub(super) enum Subscribers {
    Few {
        words: Chain,
        /// Connections in `words`.
        conns: u32,
        /// Distinct users in `words`.
        users: u32,
    },
    /// Boxed so every channel pays 24 bytes for this, not the maps' 64.
    Many(Box<Many>),
}

#[derive(Debug, Default)]
pub(super) struct Many {
    conns: HashMap<ConnRef, Option<UserId>, IdHashBuilder>,
    members: HashMap<UserId, u32, IdHashBuilder>,
}

impl Default for Subscribers {
    fn default() -> Self {
        Subscribers::Few {
            words: Chain::default(),
            conns: 0,
            users: 0,
        }
    }
}

impl Subscribers {
    /// Adds `conn` (of `user`): `None` if it was there already, else `user`'s
    /// connections here now (0 without a user).
    pub(super) fn insert(
        &mut self,
        blocks: &mut Blocks,
        conn: ConnRef,
        user: Option<UserId>,
    ) -> Option<u32> {
        match self {
            Subscribers::Few {
                words,
                conns,
                users,
            } => {
                let mut same = 0;
                for (_, c, u) in entries(words.iter(blocks)) {
                    if c == conn {
                        return None;
                    }
                    same += u32::from(user.is_some() && u == user);
                }
                let n = user.map_or(0, |_| same + 1);
                if *conns as usize == FEW_MAX {
                    let mut many = Many::from_words(words, blocks);
                    many.insert(conn, user);
                    *self = Subscribers::Many(Box::new(many));
                    return Some(n);
                }
                match user {
                    None => words.push(blocks, word(conn)),
                    Some(u) => {
                        words.push(blocks, word(conn) | NAMED);
                        words.push(blocks, u);
                    }
                }
                *conns += 1;
                *users += u32::from(n == 1);
                Some(n)
            }
            Subscribers::Many(m) => m.insert(conn, user),
        }
    }

    pub(super) fn contains(&self, blocks: &Blocks, conn: ConnRef) -> bool {
        match self {
            Subscribers::Few { words, .. } => {
                entries(words.iter(blocks)).any(|(_, c, _)| c == conn)
            }
            Subscribers::Many(m) => m.conns.contains_key(&conn),
        }
    }

    /// Takes `conn` out: `None` if it was not there, else its user and that user's
    /// connections left here (0 without a user, or when it was their last).
    pub(super) fn remove(
        &mut self,
        blocks: &mut Blocks,
        conn: ConnRef,
    ) -> Option<(Option<UserId>, u32)> {
        let out = match self {
            Subscribers::Few {
                words,
                conns,
                users,
            } => {
                let (at, _, user) = entries(words.iter(blocks)).find(|&(_, c, _)| c == conn)?;
                words.remove(blocks, at, 1 + usize::from(user.is_some()));
                *conns -= 1;
                let left = user.map_or(0, |u| {
                    entries(words.iter(blocks))
                        .filter(|&(_, _, x)| x == Some(u))
                        .count() as u32
                });
                if user.is_some() && left == 0 {
                    *users -= 1;
                }
                (user, left)
            }
            Subscribers::Many(m) => m.remove(conn)?,
        };
        self.tidy(blocks);
        Some(out)
    }

    /// Takes out every connection `gone` says is gone; `went(user, left)` hears of
    /// each, as [`Subscribers::remove`] answers. Returns how many went. One scan
    /// per gone connection of a small channel: rare (a gateway's death), never per
    /// message.
    pub(super) fn remove_where(
        &mut self,
        blocks: &mut Blocks,
        gone: &impl Fn(ConnRef) -> bool,
        went: &mut impl FnMut(Option<UserId>, u32),
    ) -> u64 {
        let mut removed = Vec::new();
        self.for_each(blocks, |c| {
            if gone(c) {
                removed.push(c);
            }
        });
        for &c in &removed {
            if let Some((user, left)) = self.remove(blocks, c) {
                went(user, left);
            }
        }
        removed.len() as u64
    }

    /// Back to a chain when a big channel shrank.
    fn tidy(&mut self, blocks: &mut Blocks) {
        if let Subscribers::Many(m) = self {
            if m.conns.len() < FEW_MAX / 2 {
                let mut few = Subscribers::default();
                for (&c, &u) in &m.conns {
                    few.insert(blocks, c, u);
                }
                *self = few;
            }
        }
    }

    /// Subscribed connections.
    pub(super) fn len(&self) -> usize {
        match self {
            Subscribers::Few { conns, .. } => *conns as usize,
            Subscribers::Many(m) => m.conns.len(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Distinct users among them.
    pub(super) fn users(&self) -> usize {
        match self {
            Subscribers::Few { users, .. } => *users as usize,
            Subscribers::Many(m) => m.members.len(),
        }
    }

    /// Every connection, in no particular order.
    pub(super) fn for_each(&self, blocks: &Blocks, mut f: impl FnMut(ConnRef)) {
        match self {
            Subscribers::Few { words, .. } => {
                entries(words.iter(blocks)).for_each(|(_, c, _)| f(c))
            }
            Subscribers::Many(m) => m.conns.keys().for_each(|&c| f(c)),
        }
    }

    /// Every user with their connections here, in no particular order.
    pub(super) fn members(&self, blocks: &Blocks) -> Vec<(UserId, u32)> {
        match self {
            Subscribers::Few { words, .. } => {
                let mut users: Vec<UserId> = entries(words.iter(blocks))
                    .filter_map(|(_, _, u)| u)
                    .collect();
                users.sort_unstable();
                let mut out: Vec<(UserId, u32)> = Vec::with_capacity(users.len());
                for u in users {
                    match out.last_mut() {
                        Some((last, n)) if *last == u => *n += 1,
                        _ => out.push((u, 1)),
                    }
                }
                out
            }
            Subscribers::Many(m) => m.members.iter().map(|(&u, &n)| (u, n)).collect(),
        }
    }

    /// Heap bytes held beside the blocks ([`Blocks::heap_bytes`] counts those).
    pub(super) fn heap_bytes(&self) -> usize {
        match self {
            Subscribers::Few { .. } => 0,
            Subscribers::Many(m) => {
                std::mem::size_of::<Many>()
                    + m.conns.capacity() * (std::mem::size_of::<(ConnRef, Option<UserId>)>() + 1)
                    + m.members.capacity() * (std::mem::size_of::<(UserId, u32)>() + 1)
            }
        }
    }
}

impl Many {
    fn from_words(words: &mut Chain, blocks: &mut Blocks) -> Many {
        let mut many = Many::default();
        for (_, c, u) in entries(words.iter(blocks)) {
            many.insert(c, u);
        }
        words.clear(blocks);
        many
    }

    fn insert(&mut self, conn: ConnRef, user: Option<UserId>) -> Option<u32> {
        if self.conns.contains_key(&conn) {
            return None;
        }
        self.conns.insert(conn, user);
        Some(user.map_or(0, |u| {
            let n = self.members.entry(u).or_insert(0);
            *n += 1;
            *n
        }))
    }

    fn remove(&mut self, conn: ConnRef) -> Option<(Option<UserId>, u32)> {
        let user = self.conns.remove(&conn)?;
        let left = user.map_or(0, |u| {
            let Some(n) = self.members.get_mut(&u) else {
                return 0;
            };
            *n -= 1;
            let left = *n;
            if left == 0 {
                self.members.remove(&u);
            }
            left
        });
        Some((user, left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(token: u32) -> ConnRef {
        ConnRef { loop_id: 1, token }
    }

    /// Every connection and each user's count, sorted, as a channel would list them.
    fn seen(s: &Subscribers, b: &Blocks) -> (Vec<u32>, Vec<(UserId, u32)>) {
        let mut conns = Vec::new();
        s.for_each(b, |x| conns.push(x.token));
        conns.sort_unstable();
        let mut members = s.members(b);
        members.sort_unstable();
        (conns, members)
    }

    #[test]
    fn a_channel_pays_24_bytes_then_8_a_connection_and_8_more_for_its_user() {
        assert!(std::mem::size_of::<Subscribers>() <= 24);
        let (mut s, mut b) = (Subscribers::default(), Blocks::default());
        for t in 0..40 {
            s.insert(&mut b, c(t), (t >= 20).then_some(UserId::from(t)));
        }
        let Subscribers::Few { words, .. } = &s else {
            panic!("40 stay an array")
        };
        assert_eq!(words.len(), 20 + 2 * 20);
        assert_eq!(b.used_bytes(), words.blocks() * 64);
        for t in 0..40 {
            s.remove(&mut b, c(t));
        }
        assert_eq!(b.used_bytes(), 0, "an empty channel holds no block");
    }

    #[test]
    fn users_are_counted_per_connection_and_once_among_the_members() {
        let (mut s, mut b) = (Subscribers::default(), Blocks::default());
        assert_eq!(s.insert(&mut b, c(1), Some(7)), Some(1));
        assert_eq!(
            s.insert(&mut b, c(2), Some(7)),
            Some(2),
            "a second connection of 7"
        );
        assert_eq!(s.insert(&mut b, c(2), Some(7)), None, "twice is once");
        assert_eq!(s.insert(&mut b, c(3), None), Some(0), "no user");
        assert_eq!(s.insert(&mut b, c(4), Some(0)), Some(1), "user 0 is a user");
        assert_eq!((s.len(), s.users()), (4, 2));
        assert_eq!(seen(&s, &b), (vec![1, 2, 3, 4], vec![(0, 1), (7, 2)]));
        assert_eq!(s.remove(&mut b, c(1)), Some((Some(7), 1)));
        assert_eq!(s.remove(&mut b, c(1)), None);
        assert_eq!(s.remove(&mut b, c(3)), Some((None, 0)));
        assert_eq!(s.remove(&mut b, c(2)), Some((Some(7), 0)), "7's last");
        assert_eq!((s.len(), s.users()), (1, 1));
        assert!(s.contains(&b, c(4)) && !s.contains(&b, c(2)));
    }

    #[test]
    fn a_channel_grows_into_maps_and_back_keeping_every_member_and_count() {
        let (mut s, mut b) = (Subscribers::default(), Blocks::default());
        let n = FEW_MAX as u32 + 10;
        // Two connections a user, and every tenth without one.
        let user = |t: u32| (!t.is_multiple_of(10)).then_some(UserId::from(t / 2));
        for t in 0..n {
            assert!(s.insert(&mut b, c(t), user(t)).is_some());
            assert!(s.insert(&mut b, c(t), user(t)).is_none(), "twice is once");
        }
        assert!(matches!(s, Subscribers::Many(_)));
        let before = seen(&s, &b);
        assert_eq!(before.0.len(), n as usize);
        let users = before.1.len();
        assert_eq!(s.users(), users);
        for t in 0..n - 5 {
            let (u, _) = s.remove(&mut b, c(t)).expect("there");
            assert_eq!(u, user(t));
        }
        assert!(
            matches!(s, Subscribers::Few { .. }),
            "back to an array when small"
        );
        let (conns, members) = seen(&s, &b);
        assert_eq!(conns, (n - 5..n).collect::<Vec<_>>());
        assert_eq!(s.users(), members.len());
        let expected: usize = members.iter().map(|&(_, k)| k as usize).sum();
        assert_eq!(expected, (n - 5..n).filter(|&t| user(t).is_some()).count());
    }

    #[test]
    fn a_gateways_death_reports_each_gone_connection_with_its_users_count_left() {
        for size in [6, FEW_MAX as u32 + 6] {
            let (mut s, mut b) = (Subscribers::default(), Blocks::default());
            for t in 0..size {
                // Loop 1 (even tokens) dies; user 1 has a connection on each side.
                let conn = ConnRef {
                    loop_id: (t % 2) as u16 + 1,
                    token: t,
                };
                s.insert(&mut b, conn, Some(UserId::from(t / 2)));
            }
            let mut went = Vec::new();
            let n = s.remove_where(&mut b, &|x| x.loop_id == 1, &mut |u, left| {
                went.push((u, left))
            });
            assert_eq!(n, u64::from(size / 2));
            went.sort_unstable();
            let expected: Vec<_> = (0..size / 2).map(|u| (Some(UserId::from(u)), 1)).collect();
            assert_eq!(went, expected, "each user keeps its other connection");
            assert_eq!(
                (s.len(), s.users()),
                ((size / 2) as usize, (size / 2) as usize)
            );
        }
    }

    #[test]
    fn a_chain_keeps_at_most_a_block_spare_as_it_grows_and_shrinks() {
        let (mut s, mut b) = (Subscribers::default(), Blocks::default());
        for t in 0..100 {
            s.insert(&mut b, c(t), Some(UserId::from(t)));
        }
        assert!(
            matches!(s, Subscribers::Few { .. }),
            "100 members stay a chain"
        );
        assert_eq!(
            b.used_bytes(),
            200usize.div_ceil(super::super::blocks::DATA) * 64
        );
        for t in 0..90 {
            s.remove(&mut b, c(t));
        }
        assert_eq!(
            b.used_bytes(),
            20usize.div_ceil(super::super::blocks::DATA) * 64
        );
    }

    /// Several channels sharing one router's blocks, joined and left at random
    /// (through the maps and back), each matching a plain model after every step.
    #[test]
    fn random_joins_and_leaves_across_channels_match_a_model() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
        let mut b = Blocks::default();
        let mut chans: Vec<Subscribers> = (0..4).map(|_| Subscribers::default()).collect();
        let mut models: Vec<HashMap<u32, Option<UserId>>> = vec![HashMap::new(); 4];
        for step in 0..20_000u32 {
            let k = rng.gen_range(0..4);
            // Channel 0 grows past the maps' threshold in the first half.
            let span = if k == 0 { 2 * FEW_MAX as u32 } else { 40 };
            let t = rng.gen_range(0..span);
            let grow = step < 10_000 && k == 0 || rng.gen_bool(0.5);
            let (s, model) = (&mut chans[k], &mut models[k]);
            if grow {
                let user = (t % 3 != 0).then_some(UserId::from(t % 17));
                let added = s.insert(&mut b, c(t), user).is_some();
                assert_eq!(added, !model.contains_key(&t));
                model.entry(t).or_insert(user);
            } else {
                let out = s.remove(&mut b, c(t));
                assert_eq!(out.map(|(u, _)| u), model.remove(&t));
            }
            let mut conns: Vec<u32> = model.keys().copied().collect();
            conns.sort_unstable();
            let mut members: HashMap<UserId, u32> = HashMap::new();
            for u in model.values().flatten() {
                *members.entry(*u).or_default() += 1;
            }
            let mut members: Vec<(UserId, u32)> = members.into_iter().collect();
            members.sort_unstable();
            assert_eq!(seen(s, &b), (conns, members), "step {step}");
            assert_eq!((s.len(), s.users()), (model.len(), seen(s, &b).1.len()));
        }
    }
}
