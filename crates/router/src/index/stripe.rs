//! One stripe of the subscription index: an immutable CSR base plus its own small
//! delta, keyed by *local* subject ids (see `SubscriptionIndex::route`). A stripe
//! folds its delta back into its base on its own, so the cost of a fold is bounded
//! by the stripe's size, not the whole index's: that is what keeps every live
//! change short (issue 3: no publish may stall behind a compaction).
//!
//! It is not a router of its own: it never sees a full subject id, only local ids.

use super::csr::{Csr, Slice, Targets};
use super::delta::Delta;

/// A stripe's delta may always hold this many entries before it is folded.
pub const STRIPE_MIN_DELTA: usize = 64;
/// ...plus the stripe's edge count divided by this. Larger means a smaller delta
/// (memory) and more frequent folds (amortised copies per change = this number).
pub const STRIPE_DELTA_DIVISOR: u64 = 64;

/// Base + delta of one stripe; `depth` is the number of low subject bits the
/// routing consumed to reach it (local id = subject >> depth).
#[derive(Debug, Clone)]
pub struct Stripe {
    pub(super) base: Csr,
    pub(super) delta: Delta,
    pub(super) depth: u32,
    /// Live edges (base − removed + added).
    pub(super) edges: u64,
}

impl Stripe {
    pub fn empty(depth: u32) -> Stripe {
        Stripe {
            base: Csr::empty(),
            delta: Delta::default(),
            depth,
            edges: 0,
        }
    }

    pub fn contains(&self, local: u64, subscriber: u64) -> bool {
        if self.base.get(local).contains(subscriber) {
            self.delta
                .removed(local)
                .binary_search(&subscriber)
                .is_err()
        } else {
            self.delta.added(local).binary_search(&subscriber).is_ok()
        }
    }

    /// Adds an edge to the delta; true if it is new. Never folds.
    pub fn insert(&mut self, local: u64, subscriber: u64) -> bool {
        let new = if self.base.get(local).contains(subscriber) {
            // Re-adding a base edge cancels its pending removal, if any.
            let cancelled = Delta::take(&mut self.delta.removes, local, subscriber);
            if cancelled {
                self.delta.len -= 1;
            }
            cancelled
        } else {
            let added = Delta::insert(&mut self.delta.adds, local, subscriber);
            if added {
                self.delta.len += 1;
            }
            added
        };
        self.edges += u64::from(new);
        new
    }

    /// Removes an edge through the delta; true if it existed. Never folds.
    pub fn remove(&mut self, local: u64, subscriber: u64) -> bool {
        let existed = if self.base.get(local).contains(subscriber) {
            let marked = Delta::insert(&mut self.delta.removes, local, subscriber);
            if marked {
                self.delta.len += 1;
            }
            marked
        } else {
            let dropped = Delta::take(&mut self.delta.adds, local, subscriber);
            if dropped {
                self.delta.len -= 1;
            }
            dropped
        };
        self.edges -= u64::from(existed);
        existed
    }

    /// True when the delta has outgrown its allowance and should be folded.
    pub fn needs_fold(&self) -> bool {
        self.delta.len as u64 > STRIPE_MIN_DELTA as u64 + self.edges / STRIPE_DELTA_DIVISOR
    }

    #[inline]
    pub fn for_each_subscriber(&self, local: u64, mut f: impl FnMut(u64)) {
        let removed = self.delta.removed(local);
        let base = self.base.get(local);
        if removed.is_empty() {
            base.for_each(&mut f);
        } else {
            base.for_each(|u| {
                if removed.binary_search(&u).is_err() {
                    f(u)
                }
            });
        }
        self.delta.added(local).iter().for_each(|&u| f(u));
    }

    pub fn degree(&self, local: u64) -> usize {
        self.base.get(local).len() - self.delta.removed(local).len() + self.delta.added(local).len()
    }

    /// Calls `f(local)` once for every local id that may have subscribers (base
    /// rows and delta-only rows; a row emptied by removals may be reported).
    pub fn for_each_local(&self, mut f: impl FnMut(u64)) {
        self.base.for_each_subject(|l, _| f(l));
        self.delta
            .adds
            .keys()
            .filter(|&&l| self.base.get(l).is_empty())
            .for_each(|&l| f(l));
    }

    /// Calls `f(local, subscribers)` for every non-empty merged row, ascending by
    /// local id, subscribers sorted. O(stripe edges + delta log delta).
    pub fn for_each_row(&self, mut f: impl FnMut(u64, &[u64])) {
        let mut add_only: Vec<u64> = self
            .delta
            .adds
            .keys()
            .copied()
            .filter(|&l| self.base.get(l).is_empty())
            .collect();
        add_only.sort_unstable();
        let mut add_only = add_only.into_iter().peekable();
        let mut merged: Vec<u64> = Vec::new();
        let delta = &self.delta;
        let mut row = |l: u64, base: Slice<'_>, f: &mut dyn FnMut(u64, &[u64])| {
            merged.clear();
            let removed = delta.removed(l);
            base.for_each(|u| {
                if removed.binary_search(&u).is_err() {
                    merged.push(u)
                }
            });
            let added = delta.added(l);
            if !added.is_empty() {
                merged.extend_from_slice(added);
                merged.sort_unstable();
            }
            if !merged.is_empty() {
                f(l, &merged);
            }
        };
        self.base.for_each_subject(|l, base| {
            while let Some(a) = add_only.next_if(|&a| a < l) {
                row(a, Slice::EMPTY, &mut f);
            }
            row(l, base, &mut f);
        });
        for a in add_only {
            row(a, Slice::EMPTY, &mut f);
        }
    }

    /// Rebuilds the base with the delta folded in; a no-op when the delta is empty.
    pub fn fold(&mut self) {
        if self.delta.len == 0 {
            return;
        }
        let mut b = StripeBuilder::with_capacity(self.edges as usize);
        self.for_each_row(|l, subs| subs.iter().for_each(|&u| b.push(l, u)));
        *self = b.finish(self.depth);
    }

    pub fn heap_bytes(&self) -> usize {
        self.base.heap_bytes() + self.delta.heap_bytes()
    }
}

/// Appends rows in ascending (local, subscriber) order straight into CSR arrays.
#[derive(Debug)]
pub struct StripeBuilder {
    subjects: Vec<u64>,
    offsets: Vec<u64>,
    targets: Targets,
    last_local: Option<u64>,
}

impl StripeBuilder {
    pub fn with_capacity(edges: usize) -> StripeBuilder {
        StripeBuilder {
            subjects: Vec::new(),
            offsets: Vec::new(),
            targets: Targets::U32(Vec::with_capacity(edges)),
            last_local: None,
        }
    }

    /// The caller guarantees ascending (local, subscriber) and no duplicates.
    pub fn push(&mut self, local: u64, subscriber: u64) {
        if self.last_local != Some(local) {
            debug_assert!(self.last_local.is_none_or(|l| l < local));
            self.subjects.push(local);
            self.offsets.push(self.targets.len() as u64);
            self.last_local = Some(local);
        }
        self.targets.push(subscriber);
    }

    /// Edges pushed so far.
    pub fn edges(&self) -> usize {
        self.targets.len()
    }

    /// Visits what was pushed so far, in order (used to fall back to sorting).
    pub fn for_each_edge(&self, mut f: impl FnMut(u64, u64)) {
        for (p, &l) in self.subjects.iter().enumerate() {
            let end = self
                .offsets
                .get(p + 1)
                .map_or(self.targets.len(), |&e| e as usize);
            self.targets
                .slice(self.offsets[p] as usize..end)
                .for_each(|u| f(l, u));
        }
    }

    pub fn finish(self, depth: u32) -> Stripe {
        let edges = self.targets.len() as u64;
        Stripe {
            base: Csr::from_sorted_parts(self.subjects, self.offsets, self.targets),
            delta: Delta::default(),
            depth,
            edges,
        }
    }
}
