//! Index tests against a `BTreeSet` model, with a tiny deterministic PRNG so the
//! router crate keeps no dependencies.

use std::collections::BTreeSet;

use super::*;

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn model_subscribers(model: &BTreeSet<(u64, u64)>, subject: u64) -> Vec<u64> {
    model
        .range((subject, 0)..=(subject, u64::MAX))
        .map(|&(_, u)| u)
        .collect()
}

fn check(
    index: &SubscriptionIndex,
    model: &BTreeSet<(u64, u64)>,
    subjects: impl Iterator<Item = u64>,
) {
    assert_eq!(index.edge_count(), model.len() as u64);
    for s in subjects {
        assert_eq!(
            index.subscribers(s),
            model_subscribers(model, s),
            "subject {s}"
        );
        assert_eq!(index.degree(s), model_subscribers(model, s).len());
    }
}

#[test]
fn from_edges_sorts_and_dedups_any_order() {
    let edges = [(5, 1), (3, 1), (5, 1), (2, 7), (1, 1), (9, 0)];
    let idx = SubscriptionIndex::from_edges(edges);
    assert_eq!(idx.edge_count(), 5);
    assert_eq!(idx.subscribers(1), vec![1, 3, 5]);
    assert_eq!(idx.subscribers(7), vec![2]);
    assert_eq!(idx.subscribers(0), vec![9]);
    assert!(idx.subscribers(2).is_empty());
    assert!(idx.subscribers(u64::MAX).is_empty());
    assert!(idx.contains(3, 1) && !idx.contains(1, 3));
}

#[test]
fn sorted_stream_and_unsorted_stream_build_the_same_index() {
    let mut rng = XorShift(7);
    let mut model = BTreeSet::new();
    for _ in 0..20_000 {
        model.insert((rng.below(500), rng.below(3000)));
    }
    let mut sorted = SubscriptionIndex::builder();
    for &(subject, subscriber) in &model {
        sorted.push(subscriber, subject);
    }
    let sorted = sorted.build();
    let unsorted = SubscriptionIndex::from_edges(model.iter().rev().map(|&(s, u)| (u, s)));
    check(&sorted, &model, 0..510);
    check(&unsorted, &model, 0..510);
    assert_eq!(sorted.memory_bytes(), unsorted.memory_bytes());
}

#[test]
fn sparse_and_wide_ids_work() {
    let big = u64::MAX - 3;
    let edges = vec![
        (big, 1),
        (1, big),
        (2, big),
        (u64::from(u32::MAX) + 1, 1 << 40),
        (7, 1 << 40),
    ];
    let idx = SubscriptionIndex::from_edges(edges.clone());
    let model: BTreeSet<(u64, u64)> = edges.iter().map(|&(u, s)| (s, u)).collect();
    check(&idx, &model, [1, big, 1 << 40, 0, 2].into_iter());
}

#[test]
fn live_changes_match_the_model_across_compactions() {
    let mut rng = XorShift(99);
    let mut model = BTreeSet::new();
    for _ in 0..5_000 {
        model.insert((rng.below(300), rng.below(2000)));
    }
    let mut idx = SubscriptionIndex::from_edges(model.iter().map(|&(s, u)| (u, s)));
    for round in 0..30_000 {
        let (s, u) = (rng.below(320), rng.below(2000));
        if rng.below(2) == 0 {
            assert_eq!(
                idx.insert(u, s),
                model.insert((s, u)),
                "insert round {round}"
            );
        } else {
            assert_eq!(
                idx.remove(u, s),
                model.remove(&(s, u)),
                "remove round {round}"
            );
        }
        assert_eq!(idx.contains(u, s), model.contains(&(s, u)));
    }
    assert!(
        idx.counters().2 > 0,
        "the delta should have been compacted at least once"
    );
    check(&idx, &model, 0..330);
    idx.compact();
    assert_eq!(idx.delta_len(), 0);
    check(&idx, &model, 0..330);
}

#[test]
fn remove_then_readd_a_base_edge() {
    let mut idx = SubscriptionIndex::from_edges([(1, 10), (2, 10)]);
    assert!(idx.remove(1, 10));
    assert!(!idx.remove(1, 10));
    assert_eq!(idx.subscribers(10), vec![2]);
    assert!(idx.insert(1, 10));
    assert!(!idx.insert(1, 10));
    assert_eq!(idx.delta_len(), 0);
    assert_eq!(idx.subscribers(10), vec![1, 2]);
    assert!(idx.insert(0, 10));
    assert_eq!(idx.subscribers(10), vec![0, 1, 2]);
    assert_eq!(idx.max_degree_subject(), Some((10, 3)));
}

#[test]
fn dense_ids_cost_about_four_bytes_per_edge() {
    // 10k subjects × 20 subscribers with ids < 2^32: u32 targets + dense offsets.
    let idx = SubscriptionIndex::from_edges(
        (0..10_000u64).flat_map(|s| (0..20u64).map(move |k| (s * 7 + k, s))),
    );
    let per_edge = idx.memory_bytes() as f64 / idx.edge_count() as f64;
    assert!(per_edge < 4.6, "{per_edge} bytes per edge");
}

#[test]
fn route_and_unroute_are_inverse_at_every_level() {
    let mut rng = XorShift(3);
    for level in 0..=MAX_LEVEL {
        for split in [0usize, 1, (1usize << level) / 2] {
            if level == MAX_LEVEL && split > 0 {
                continue;
            }
            for _ in 0..2_000 {
                let s = match rng.below(4) {
                    0 => rng.below(1 << 20),
                    1 => rng.below(1 << 20) << 16,
                    2 => u64::MAX - rng.below(1 << 20),
                    _ => rng.next(),
                };
                let (i, local) = route(level, split, s);
                let depth = if i < split || i >= 1 << level {
                    level + 1
                } else {
                    level
                };
                assert!(i < (1 << level) + split);
                assert_eq!(unroute(i, depth, local), s, "level {level} split {split}");
            }
        }
    }
}

/// Draws a subject: mostly a small hot range (long rows, many folds), some wide
/// ids so sparse stripes and the high-bit mixing are exercised too.
fn subject(rng: &mut XorShift) -> u64 {
    match rng.below(8) {
        0 => (rng.below(64) << 16) | 7,
        1 => u64::MAX - rng.below(64),
        _ => rng.below(600),
    }
}

#[test]
fn random_changes_match_a_btreeset_after_every_step() {
    // Starts empty so the index has to split as it grows, then churns.
    let mut rng = XorShift(0x5eed);
    let mut model = BTreeSet::new();
    let mut idx = SubscriptionIndex::new();
    for step in 0..150_000u32 {
        let s = subject(&mut rng);
        let u = if rng.below(16) == 0 {
            rng.next()
        } else {
            rng.below(400)
        };
        // Grow for the first half (3 inserts : 1 remove), then balance.
        let insert = if step < 75_000 {
            rng.below(4) != 0
        } else {
            rng.below(2) == 0
        };
        if insert {
            assert_eq!(idx.insert(u, s), model.insert((s, u)), "insert step {step}");
        } else {
            // Removing a present edge half the time keeps removals meaningful.
            let (s, u) = match model.range((s, 0)..).next() {
                Some(&(ms, mu)) if rng.below(2) == 0 => (ms, mu),
                _ => (s, u),
            };
            assert_eq!(
                idx.remove(u, s),
                model.remove(&(s, u)),
                "remove step {step}"
            );
        }
        assert_eq!(idx.edge_count(), model.len() as u64, "step {step}");
        assert_eq!(idx.contains(u, s), model.contains(&(s, u)), "step {step}");
        assert_eq!(
            idx.subscribers(s),
            model_subscribers(&model, s),
            "step {step}"
        );
        assert_eq!(
            idx.degree(s),
            model_subscribers(&model, s).len(),
            "step {step}"
        );
    }
    let (_, _, folds) = idx.counters();
    assert!(
        folds > 10,
        "stripes should have folded their deltas ({folds})"
    );
    assert!(
        idx.stripe_count() > 1,
        "the index should have split as it grew"
    );
    let subjects: BTreeSet<u64> = model.iter().map(|&(s, _)| s).collect();
    check(&idx, &model, subjects.iter().copied().chain(600..610));
    let best = subjects
        .iter()
        .map(|&s| (s, model_subscribers(&model, s).len()))
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
    assert_eq!(idx.max_degree_subject(), best);
    idx.compact();
    assert_eq!(idx.delta_len(), 0);
    check(&idx, &model, subjects.iter().copied());
}

#[test]
fn a_sized_build_has_stripes_of_about_stripe_edges() {
    let edges = 40 * STRIPE_EDGES;
    let idx = SubscriptionIndex::from_edges((0..edges).map(|e| (e / 100_000, e % 100_000)));
    assert_eq!(idx.stripe_count(), 64);
    assert_eq!(idx.edge_count(), edges);
    assert_eq!(idx.subscribers(12_345), (0..=6).collect::<Vec<_>>());
}

#[test]
fn an_unhinted_sorted_build_respreads_to_the_right_level() {
    let mut rng = XorShift(11);
    let mut model = BTreeSet::new();
    while model.len() < 40 * STRIPE_EDGES as usize {
        let s = if rng.below(4) == 0 {
            rng.next()
        } else {
            rng.below(5_000)
        };
        model.insert((s, rng.below(1 << 33)));
    }
    let mut b = SubscriptionIndex::builder();
    for &(s, u) in &model {
        b.push(u, s);
    }
    let idx = b.build();
    assert_eq!(idx.stripe_count(), 64);
    let wide: Vec<u64> = model
        .iter()
        .map(|&(s, _)| s)
        .filter(|&s| s >= 5_000)
        .take(50)
        .collect();
    check(&idx, &model, (0..5_010).chain(wide));
}
