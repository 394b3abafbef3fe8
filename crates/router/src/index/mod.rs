//! The subscription index: subject → subscribers, the graph the router fans out
//! over. It is an immutable CSR base ([`csr`]) built once from the store at start
//! plus a small [`delta`] for live changes, folded back into a new base when the
//! delta grows past [`COMPACT_MIN_DELTA`] + base / [`COMPACT_DELTA_DIVISOR`]
//! entries, so rebuild cost stays amortised O(1) per change.
//!
//! It keeps its own counters (inserts, removes, compactions), so metrics are
//! cheap. It is not durable: the store is the source of truth.

pub mod builder;
pub mod csr;
pub mod delta;

pub use builder::IndexBuilder;
use csr::{Csr, Slice};
use delta::Delta;

use crate::{SubjectId, UserId};

/// The delta is always allowed this many entries before a compaction.
pub const COMPACT_MIN_DELTA: usize = 4096;
/// ...plus the base edge count divided by this.
pub const COMPACT_DELTA_DIVISOR: u64 = 16;

/// subject → sorted subscribers; see the module doc.
#[derive(Debug, Clone)]
pub struct SubscriptionIndex {
    base: Csr,
    delta: Delta,
    edges: u64,
    inserts: u64,
    removes: u64,
    compactions: u64,
}

impl SubscriptionIndex {
    pub fn new() -> Self {
        Self::from_csr(Csr::empty())
    }

    pub(crate) fn from_csr(base: Csr) -> Self {
        let edges = base.edge_count();
        SubscriptionIndex {
            base,
            delta: Delta::default(),
            edges,
            inserts: 0,
            removes: 0,
            compactions: 0,
        }
    }

    /// Builds from `(subscriber, subject)` edges in any order; duplicates collapse.
    pub fn from_edges(edges: impl IntoIterator<Item = (UserId, SubjectId)>) -> Self {
        let mut b = IndexBuilder::new();
        for (subscriber, subject) in edges {
            b.push(subscriber, subject);
        }
        b.build()
    }

    /// A streaming builder (for loading tens of millions of edges from the store).
    pub fn builder() -> IndexBuilder {
        IndexBuilder::new()
    }

    /// Heap bytes held (base arrays + delta), excluding this struct itself.
    pub fn memory_bytes(&self) -> usize {
        self.base.heap_bytes() + self.delta.heap_bytes()
    }

    /// Number of subscriptions (directed edges).
    pub fn edge_count(&self) -> u64 {
        self.edges
    }

    /// Entries pending in the delta (adds + removes since the last compaction).
    pub fn delta_len(&self) -> usize {
        self.delta.len
    }

    /// (inserts, removes, compactions) since creation.
    pub fn counters(&self) -> (u64, u64, u64) {
        (self.inserts, self.removes, self.compactions)
    }

    pub fn contains(&self, subscriber: UserId, subject: SubjectId) -> bool {
        if self.base.get(subject).contains(subscriber) {
            self.delta
                .removed(subject)
                .binary_search(&subscriber)
                .is_err()
        } else {
            self.delta.added(subject).binary_search(&subscriber).is_ok()
        }
    }

    /// Adds `subscriber` → `subject`; true if it is new.
    pub fn insert(&mut self, subscriber: UserId, subject: SubjectId) -> bool {
        let new = if self.base.get(subject).contains(subscriber) {
            // Re-adding a base edge cancels its pending removal, if any.
            let cancelled = Delta::take(&mut self.delta.removes, subject, subscriber);
            if cancelled {
                self.delta.len -= 1;
            }
            cancelled
        } else {
            let added = Delta::insert(&mut self.delta.adds, subject, subscriber);
            if added {
                self.delta.len += 1;
            }
            added
        };
        if new {
            self.edges += 1;
            self.inserts += 1;
            self.maybe_compact();
        }
        new
    }

    /// Removes `subscriber` → `subject`; true if it existed.
    pub fn remove(&mut self, subscriber: UserId, subject: SubjectId) -> bool {
        let existed = if self.base.get(subject).contains(subscriber) {
            let marked = Delta::insert(&mut self.delta.removes, subject, subscriber);
            if marked {
                self.delta.len += 1;
            }
            marked
        } else {
            let dropped = Delta::take(&mut self.delta.adds, subject, subscriber);
            if dropped {
                self.delta.len -= 1;
            }
            dropped
        };
        if existed {
            self.edges -= 1;
            self.removes += 1;
            self.maybe_compact();
        }
        existed
    }

    /// Calls `f` once per subscriber of `subject` (no order promised, no allocation).
    #[inline]
    pub fn for_each_subscriber(&self, subject: SubjectId, mut f: impl FnMut(UserId)) {
        let removed = self.delta.removed(subject);
        let base = self.base.get(subject);
        if removed.is_empty() {
            base.for_each(&mut f);
        } else {
            base.for_each(|u| {
                if removed.binary_search(&u).is_err() {
                    f(u)
                }
            });
        }
        self.delta.added(subject).iter().for_each(|&u| f(u));
    }

    /// Number of subscribers of `subject`.
    pub fn degree(&self, subject: SubjectId) -> usize {
        self.base.get(subject).len() - self.delta.removed(subject).len()
            + self.delta.added(subject).len()
    }

    /// The subscribers of `subject`, sorted.
    pub fn subscribers(&self, subject: SubjectId) -> Vec<UserId> {
        let mut out = Vec::with_capacity(self.degree(subject));
        self.for_each_subscriber(subject, |u| out.push(u));
        if !self.delta.added(subject).is_empty() {
            out.sort_unstable();
        }
        out
    }

    /// The subject with the most subscribers (ties: lowest id), if any.
    pub fn max_degree_subject(&self) -> Option<(SubjectId, usize)> {
        let mut best: Option<(SubjectId, usize)> = None;
        let mut consider = |s: SubjectId| {
            let d = self.degree(s);
            let better = match best {
                None => true,
                Some((bs, bd)) => d > bd || (d == bd && s < bs),
            };
            if d > 0 && better {
                best = Some((s, d));
            }
        };
        self.base.for_each_subject(|s, _| consider(s));
        self.delta.adds.keys().for_each(|&s| consider(s));
        best
    }

    fn maybe_compact(&mut self) {
        if self.delta.len as u64
            > COMPACT_MIN_DELTA as u64 + self.base.edge_count() / COMPACT_DELTA_DIVISOR
        {
            self.compact();
        }
    }

    /// Folds the delta into a new base (O(edges)); a no-op when the delta is empty.
    pub fn compact(&mut self) {
        if self.delta.len == 0 {
            return;
        }
        let mut b = IndexBuilder::with_capacity(self.edges as usize);
        // Merge per subject in ascending order so the builder stays on its sorted path.
        let mut add_only: Vec<u64> = self
            .delta
            .adds
            .keys()
            .copied()
            .filter(|&s| self.base.get(s).is_empty())
            .collect();
        add_only.sort_unstable();
        let mut add_only = add_only.into_iter().peekable();
        let delta = &self.delta;
        let mut merged: Vec<u64> = Vec::new();
        let mut push_subject = |b: &mut IndexBuilder, s: u64, base: Slice<'_>| {
            merged.clear();
            let removed = delta.removed(s);
            base.for_each(|u| {
                if removed.binary_search(&u).is_err() {
                    merged.push(u)
                }
            });
            merged.extend_from_slice(delta.added(s));
            merged.sort_unstable();
            merged.iter().for_each(|&u| b.push(u, s));
        };
        self.base.for_each_subject(|s, base| {
            while let Some(a) = add_only.next_if(|&a| a < s) {
                push_subject(&mut b, a, Slice::EMPTY);
            }
            push_subject(&mut b, s, base);
        });
        for a in add_only {
            push_subject(&mut b, a, Slice::EMPTY);
        }
        let compactions = self.compactions + 1;
        let (inserts, removes) = (self.inserts, self.removes);
        *self = b.build();
        self.compactions = compactions;
        self.inserts = inserts;
        self.removes = removes;
    }
}

impl Default for SubscriptionIndex {
    fn default() -> Self {
        SubscriptionIndex::new()
    }
}

#[cfg(test)]
mod tests;
