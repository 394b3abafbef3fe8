//! [`UserMap`] against a `HashMap` model: connections inline, rings in side
//! entries, growth, wrap-around, backward shifts and the reserved id.

use super::*;
use crate::presence::Overflow;
use crate::ConnRef;
use std::collections::HashMap;

fn conns(token: u32) -> Conns {
    let mut c = Conns::NONE;
    c.add(ConnRef { loop_id: 0, token }, &mut Overflow::default());
    c
}

fn token_of(c: Conns) -> Option<u32> {
    let mut t = None;
    c.for_each(&Overflow::default(), |c| t = Some(c.token));
    t
}

/// What the model says about a user: their one connection's token and their
/// ring's epoch.
type Model = HashMap<u64, (Option<u32>, Option<u32>)>;

fn seen(r: UserRef<'_>) -> (Option<u32>, Option<u32>) {
    (token_of(r.conns), r.ring.map(Ring::epoch))
}

fn check(map: &UserMap, model: &Model) {
    assert_eq!(map.len(), model.len());
    for (&u, &want) in model {
        assert_eq!(map.get(u).map(seen), Some(want), "get {u}");
    }
    let mut all: Vec<_> = map.iter().map(|(u, r)| (u, seen(r))).collect();
    all.sort();
    let mut want: Vec<_> = model.iter().map(|(&u, &s)| (u, s)).collect();
    want.sort();
    assert_eq!(all, want);
    let mut rings: Vec<u32> = map.rings().map(Ring::epoch).collect();
    rings.sort();
    let mut want: Vec<u32> = model.values().filter_map(|s| s.1).collect();
    want.sort();
    assert_eq!(rings, want, "every ring once, no freed side entry counted");
}

#[test]
fn a_bucket_is_16_bytes() {
    assert_eq!(std::mem::size_of::<Bucket>(), 16);
}

/// Random logins, logouts, first rings and removals against a `HashMap`, ids
/// drawn from a range that fills the smallest table past several growths, so runs
/// collide, wrap and shift, and side entries are freed and reused; `EMPTY` and 0
/// included.
#[test]
fn agrees_with_a_hash_map() {
    let mut map = UserMap::default();
    let mut model = Model::new();
    let mut x = 0x1234_5678_9abc_def1u64;
    for step in 0..300_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let user = match x % 97 {
            0 => EMPTY,
            1 => 0,
            _ => (x >> 8) % 12_000,
        };
        match (x >> 40) % 8 {
            0 | 1 => {
                let gone = map
                    .remove(user)
                    .map(|s| (token_of(s.conns), s.ring.map(|r| r.epoch())));
                assert_eq!(gone, model.remove(&user), "remove {user} at {step}");
            }
            2 => {
                // A first message: the user gets a ring (moves to a side entry).
                let mut s = map.get_or_default(user);
                let m = model.entry(user).or_default();
                if s.ring().is_none() {
                    assert_eq!(s.set_ring(Box::new(Ring::new(step))).epoch(), step);
                    m.1 = Some(step);
                }
                assert_eq!(s.ring().map(Ring::epoch), m.1);
            }
            3 => {
                // A logout: the connection goes, any ring stays.
                if let Some(mut s) = map.get_mut(user) {
                    *s.conns_mut() = Conns::NONE;
                    model.get_mut(&user).expect("in the model").0 = None;
                }
            }
            _ => {
                let mut s = map.get_or_default(user);
                let m = model.entry(user).or_default();
                if s.conns().is_empty() {
                    *s.conns_mut() = conns(step);
                    m.0 = Some(step);
                }
                assert_eq!(token_of(s.conns()), m.0);
            }
        }
        if step % 10_000 == 0 {
            check(&map, &model);
            map.shrink();
            check(&map, &model);
        }
    }
    check(&map, &model);
    for u in 0..12_000 {
        assert_eq!(map.get(u).is_some(), model.contains_key(&u));
    }
    assert!(map.capacity() > MIN_BUCKETS, "the table grew at least once");
}

#[test]
fn stays_dense_and_gives_memory_back() {
    let mut map = UserMap::default();
    for u in 0..15_000u64 {
        *map.get_or_default(u).conns_mut() = conns(u as u32);
        let load = map.len() as f64 / map.capacity() as f64;
        if map.capacity() > MIN_BUCKETS {
            assert!((0.8..=0.92).contains(&load), "load {load} at {u}");
        }
    }
    // Every tenth user gets a ring: the others stay inline.
    for u in (0..15_000u64).step_by(10) {
        map.get_mut(u)
            .expect("there")
            .set_ring(Box::new(Ring::new(u as u32)));
    }
    assert_eq!(map.side.len(), 1_500);
    for u in 0..14_000u64 {
        assert!(map.remove(u).is_some());
        assert!(map.get(u).is_none());
    }
    map.shrink();
    assert_eq!(map.capacity(), MIN_BUCKETS);
    assert_eq!(map.rings().count(), 100);
    // The last 100 entries are still in use, so the slab keeps its length and the
    // next ring reuses a freed entry.
    assert_eq!((map.side.len(), map.free.len()), (1_500, 1_400));
    map.get_or_default(20_000).set_ring(Box::new(Ring::new(7)));
    assert_eq!((map.side.len(), map.free.len()), (1_500, 1_399));
    assert_eq!(
        map.remove(20_000).and_then(|s| s.ring).map(|r| r.epoch()),
        Some(7)
    );
    for u in 14_000..15_000u64 {
        let r = map.get(u).expect("kept");
        assert_eq!(token_of(r.conns), Some(u as u32));
        assert_eq!(
            r.ring.map(Ring::epoch),
            (u % 10 == 0).then_some(u as u32),
            "{u}"
        );
        map.remove(u);
    }
    map.shrink();
    assert_eq!(map.capacity(), 0, "an empty map holds no table");
    assert_eq!(map.side.capacity(), 0, "nor side entries");
}
