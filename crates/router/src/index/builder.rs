//! Streaming construction of the striped index from `(subscriber, subject)` edges.
//!
//! The store streams edges ordered by (subject, subscriber) — the order of its
//! primary key — so the common path appends straight into each stripe's final
//! arrays with no intermediate copy (routing keeps that order within a stripe). If
//! an edge arrives out of order the builder falls back to collecting packed pairs
//! and sorting them once at `build()`; duplicates are dropped on both paths.

use super::stripe::StripeBuilder;
use super::{level_for, route, SubscriptionIndex};

/// Edges collected when the input is not sorted, keyed (subject, subscriber).
enum Pairs {
    /// Both ids fit in 32 bits: `subject << 32 | subscriber`, half the memory.
    Packed(Vec<u64>),
    Wide(Vec<(u64, u64)>),
}

impl Pairs {
    fn push(&mut self, subject: u64, subscriber: u64) {
        match self {
            Pairs::Packed(v) => {
                if subject <= u64::from(u32::MAX) && subscriber <= u64::from(u32::MAX) {
                    v.push(subject << 32 | subscriber);
                } else {
                    let mut wide: Vec<(u64, u64)> =
                        v.iter().map(|&p| (p >> 32, p & 0xffff_ffff)).collect();
                    wide.push((subject, subscriber));
                    *self = Pairs::Wide(wide);
                }
            }
            Pairs::Wide(v) => v.push((subject, subscriber)),
        }
    }
}

/// Builds a [`SubscriptionIndex`]: `push(subscriber, subject)` then `build()`.
pub struct IndexBuilder {
    /// `2^level` stripes, chosen from the size hint; `build()` splits further if
    /// more edges arrived than hinted.
    level: u32,
    stripes: Vec<StripeBuilder>,
    /// Last (subject, subscriber) appended on the sorted path.
    last: Option<(u64, u64)>,
    unsorted: Option<Pairs>,
}

impl IndexBuilder {
    pub fn new() -> IndexBuilder {
        IndexBuilder::with_capacity(0)
    }

    /// Reserves room for about `edges` edges (a hint; e.g. the store's count).
    pub fn with_capacity(edges: usize) -> IndexBuilder {
        let level = level_for(edges as u64);
        let n = 1usize << level;
        // Routing spreads edges about evenly; a stripe that gets more grows its
        // own arrays, and `finish` trims every stripe to its length.
        let per_stripe = if edges == 0 {
            0
        } else {
            edges / n + edges / n / 16 + 16
        };
        IndexBuilder {
            level,
            stripes: (0..n)
                .map(|_| StripeBuilder::with_capacity(per_stripe))
                .collect(),
            last: None,
            unsorted: None,
        }
    }

    /// Adds the edge `subscriber` → `subject`.
    pub fn push(&mut self, subscriber: u64, subject: u64) {
        if let Some(pairs) = &mut self.unsorted {
            pairs.push(subject, subscriber);
            return;
        }
        let key = (subject, subscriber);
        match self.last {
            Some(last) if key == last => {}
            Some(last) if key < last => self.fall_back(subject, subscriber),
            _ => {
                let (i, local) = route(self.level, 0, subject);
                self.stripes[i].push(local, subscriber);
                self.last = Some(key);
            }
        }
    }

    /// Moves what the sorted path holds into pairs; later edges go there too.
    fn fall_back(&mut self, subject: u64, subscriber: u64) {
        let held: usize = self.stripes.iter().map(StripeBuilder::edges).sum();
        let mut pairs = Pairs::Packed(Vec::with_capacity(held * 2));
        let level = self.level;
        for (i, stripe) in std::mem::take(&mut self.stripes).into_iter().enumerate() {
            stripe.for_each_edge(|local, u| pairs.push(super::unroute(i, level, local), u));
        }
        pairs.push(subject, subscriber);
        self.unsorted = Some(pairs);
        self.last = None;
    }

    pub fn build(mut self) -> SubscriptionIndex {
        match self.unsorted.take() {
            None => {
                let level = self.level;
                let stripes = self.stripes.into_iter().map(|s| s.finish(level)).collect();
                SubscriptionIndex::from_stripes(level, stripes)
            }
            Some(Pairs::Packed(mut v)) => {
                v.sort_unstable();
                v.dedup();
                let mut b = IndexBuilder::with_capacity(v.len());
                for p in v {
                    b.push(p & 0xffff_ffff, p >> 32);
                }
                b.build()
            }
            Some(Pairs::Wide(mut v)) => {
                v.sort_unstable();
                v.dedup();
                let mut b = IndexBuilder::with_capacity(v.len());
                for (subject, subscriber) in v {
                    b.push(subscriber, subject);
                }
                b.build()
            }
        }
    }
}

impl Default for IndexBuilder {
    fn default() -> Self {
        IndexBuilder::new()
    }
}
