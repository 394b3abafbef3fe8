//! The subscription index: subject → subscribers, the graph the router fans out
//! over. Subjects are routed to [`stripe`]s by their low bits (mixed with the high
//! ones, see [`route`](SubscriptionIndex::route)); each stripe is an immutable CSR
//! base ([`csr`]) plus a small [`delta`] of live changes that the stripe folds back
//! into its base alone when the delta outgrows
//! [`STRIPE_MIN_DELTA`] + stripe edges / [`STRIPE_DELTA_DIVISOR`].
//!
//! Why stripes: the gateway changes the index under the lock every publish needs,
//! so the cost of one change must stay bounded. A fold costs O(stripe edges), and
//! stripes hold about [`STRIPE_EDGES`] edges each: the build picks the stripe count
//! from the edge count, and as the index grows, stripes split one at a time
//! (linear hashing), each split also O(stripe edges). Nothing on the `insert` /
//! `remove` path is O(all edges); [`SubscriptionIndex::compact`] is, and is only
//! for the caller's explicit full pass.
//!
//! It keeps its own counters (inserts, removes, folds), so metrics are cheap.
//! It is not durable: the store is the source of truth.

pub mod builder;
pub mod csr;
pub mod delta;
pub mod stripe;

pub use builder::IndexBuilder;
use stripe::{Stripe, StripeBuilder};
pub use stripe::{STRIPE_DELTA_DIVISOR, STRIPE_MIN_DELTA};

use crate::{SubjectId, UserId};

/// Edges a stripe is built with, about: bounds the cost of one fold or split.
pub const STRIPE_EDGES: u64 = 16_384;
/// A stripe splits when the index averages more than this many edges per stripe.
pub const SPLIT_EDGES: u64 = 2 * STRIPE_EDGES;
/// At most 2^this stripes; the routing consumes at most this many low subject bits.
pub const MAX_LEVEL: u32 = 16;

/// Low 16 bits of `subject` XOR its higher 16-bit slices: spreads ids whose low
/// bits are constant (e.g. multiples of 2^16, time-ordered ids) over the stripes,
/// while ids below 2^16 keep their own low bits (sequential ids stay dense).
#[inline]
fn fold_bits(subject: u64) -> u64 {
    subject ^ (subject >> 16) ^ (subject >> 32) ^ (subject >> 48)
}

/// The smallest level whose stripes hold at most about [`STRIPE_EDGES`] each.
pub(crate) fn level_for(edges: u64) -> u32 {
    let mut level = 0;
    while level < MAX_LEVEL && (STRIPE_EDGES << level) < edges {
        level += 1;
    }
    level
}

/// Stripe index and local id of `subject` for `level` / `split` (linear hashing:
/// stripes below `split` have already been split and use one more bit).
#[inline]
pub(crate) fn route(level: u32, split: usize, subject: u64) -> (usize, u64) {
    let f = fold_bits(subject);
    let i = (f & ((1 << level) - 1)) as usize;
    if i < split {
        (
            (f & ((1 << (level + 1)) - 1)) as usize,
            subject >> (level + 1),
        )
    } else {
        (i, subject >> level)
    }
}

/// Inverse of [`route`]: the subject at `local` in stripe `stripe` of depth `depth`.
#[inline]
pub(crate) fn unroute(stripe: usize, depth: u32, local: u64) -> u64 {
    if depth == 0 {
        return local;
    }
    let mask = (1u64 << depth) - 1;
    // depth ≤ 16, so `local` holds every bit of subject >> 16.
    let high = local >> (16 - depth);
    let low = (stripe as u64 ^ high ^ (high >> 16) ^ (high >> 32)) & mask;
    local << depth | low
}

/// Moves every row of `2^from` stripes into `2^to` new ones (`to > from`). Rows of
/// source stripe `i` land only in targets `≡ i (mod 2^from)`, in ascending local
/// order, so every target stays on the builder's sorted path. Each source stripe
/// is dropped once copied: the extra memory is about one source stripe.
fn respread(from: u32, stripes: Vec<Stripe>, to: u32) -> Vec<Stripe> {
    let mut out: Vec<StripeBuilder> = (0..1usize << to)
        .map(|_| StripeBuilder::with_capacity(0))
        .collect();
    for (i, stripe) in stripes.into_iter().enumerate() {
        stripe.for_each_row(|local, subs| {
            let (j, l) = route(to, 0, unroute(i, from, local));
            subs.iter().for_each(|&u| out[j].push(l, u));
        });
    }
    out.into_iter().map(|b| b.finish(to)).collect()
}

/// subject → sorted subscribers; see the module doc.
#[derive(Debug, Clone)]
pub struct SubscriptionIndex {
    /// `2^level + split` stripes; stripe `i` has depth `level + 1` if `i < split`
    /// or `i ≥ 2^level`, else `level`.
    stripes: Vec<Stripe>,
    level: u32,
    split: usize,
    edges: u64,
    /// Entries pending in all stripe deltas.
    delta_len: usize,
    inserts: u64,
    removes: u64,
    folds: u64,
}

impl SubscriptionIndex {
    pub fn new() -> Self {
        Self::from_stripes(0, vec![Stripe::empty(0)])
    }

    /// Takes `2^level` freshly built stripes; if the builder was given too small a
    /// size hint, re-spreads them in one pass to the level the edge count wants.
    pub(crate) fn from_stripes(level: u32, stripes: Vec<Stripe>) -> Self {
        debug_assert_eq!(stripes.len(), 1 << level);
        let edges = stripes.iter().map(|s| s.edges).sum();
        let wanted = level_for(edges);
        let (level, stripes) = if wanted > level {
            (wanted, respread(level, stripes, wanted))
        } else {
            (level, stripes)
        };
        SubscriptionIndex {
            stripes,
            level,
            split: 0,
            edges,
            delta_len: 0,
            inserts: 0,
            removes: 0,
            folds: 0,
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

    /// Heap bytes held (stripe table, base arrays, deltas), excluding this struct.
    pub fn memory_bytes(&self) -> usize {
        self.stripes.capacity() * std::mem::size_of::<Stripe>()
            + self.stripes.iter().map(Stripe::heap_bytes).sum::<usize>()
    }

    /// Number of subscriptions (directed edges).
    pub fn edge_count(&self) -> u64 {
        self.edges
    }

    /// Number of stripes (each folds and splits on its own).
    pub fn stripe_count(&self) -> usize {
        self.stripes.len()
    }

    /// Entries pending in the stripe deltas (adds + removes not yet folded).
    pub fn delta_len(&self) -> usize {
        self.delta_len
    }

    /// (inserts, removes, stripe folds) since creation.
    pub fn counters(&self) -> (u64, u64, u64) {
        (self.inserts, self.removes, self.folds)
    }

    #[inline]
    fn stripe(&self, subject: SubjectId) -> (&Stripe, u64) {
        let (i, local) = route(self.level, self.split, subject);
        (&self.stripes[i], local)
    }

    pub fn contains(&self, subscriber: UserId, subject: SubjectId) -> bool {
        let (stripe, local) = self.stripe(subject);
        stripe.contains(local, subscriber)
    }

    /// Adds `subscriber` → `subject`; true if it is new. Costs O(log) plus, at
    /// most, one fold and one split of a single stripe.
    pub fn insert(&mut self, subscriber: UserId, subject: SubjectId) -> bool {
        let (i, local) = route(self.level, self.split, subject);
        let before = self.stripes[i].delta.len;
        let new = self.stripes[i].insert(local, subscriber);
        if new {
            self.edges += 1;
            self.inserts += 1;
            self.after_change(i, before);
            if self.edges > self.stripes.len() as u64 * SPLIT_EDGES && self.level < MAX_LEVEL {
                self.split_one();
            }
        }
        new
    }

    /// Removes `subscriber` → `subject`; true if it existed. Costs O(log) plus,
    /// at most, one fold of a single stripe.
    pub fn remove(&mut self, subscriber: UserId, subject: SubjectId) -> bool {
        let (i, local) = route(self.level, self.split, subject);
        let before = self.stripes[i].delta.len;
        let existed = self.stripes[i].remove(local, subscriber);
        if existed {
            self.edges -= 1;
            self.removes += 1;
            self.after_change(i, before);
        }
        existed
    }

    /// Keeps `delta_len` in step with stripe `i` and folds it if it outgrew its delta.
    fn after_change(&mut self, i: usize, delta_before: usize) {
        let stripe = &mut self.stripes[i];
        self.delta_len = self.delta_len + stripe.delta.len - delta_before;
        if stripe.needs_fold() {
            self.delta_len -= stripe.delta.len;
            stripe.fold();
            self.folds += 1;
        }
    }

    /// Splits stripe `split` into itself and stripe `2^level + split` (one more
    /// routing bit), folding its delta on the way. O(that stripe's edges).
    fn split_one(&mut self) {
        let j = self.split;
        let depth = self.level;
        let old = std::mem::replace(&mut self.stripes[j], Stripe::empty(depth + 1));
        self.delta_len -= old.delta.len;
        let half = old.edges as usize / 2 + 1;
        let (mut lo, mut hi) = (
            StripeBuilder::with_capacity(half),
            StripeBuilder::with_capacity(half),
        );
        old.for_each_row(|local, subs| {
            let subject = unroute(j, depth, local);
            let b = if (fold_bits(subject) >> depth) & 1 == 0 {
                &mut lo
            } else {
                &mut hi
            };
            subs.iter().for_each(|&u| b.push(local >> 1, u));
        });
        drop(old);
        self.stripes[j] = lo.finish(depth + 1);
        self.stripes.push(hi.finish(depth + 1));
        self.split += 1;
        if self.split == 1 << self.level {
            self.level += 1;
            self.split = 0;
        }
    }

    /// Calls `f` once per subscriber of `subject` (no order promised, no allocation).
    #[inline]
    pub fn for_each_subscriber(&self, subject: SubjectId, f: impl FnMut(UserId)) {
        let (stripe, local) = self.stripe(subject);
        stripe.for_each_subscriber(local, f);
    }

    /// Number of subscribers of `subject`.
    pub fn degree(&self, subject: SubjectId) -> usize {
        let (stripe, local) = self.stripe(subject);
        stripe.degree(local)
    }

    /// The subscribers of `subject`, sorted.
    pub fn subscribers(&self, subject: SubjectId) -> Vec<UserId> {
        let (stripe, local) = self.stripe(subject);
        let mut out = Vec::with_capacity(stripe.degree(local));
        stripe.for_each_subscriber(local, |u| out.push(u));
        if !stripe.delta.added(local).is_empty() {
            out.sort_unstable();
        }
        out
    }

    /// The subject with the most subscribers (ties: lowest id), if any. O(subjects).
    pub fn max_degree_subject(&self) -> Option<(SubjectId, usize)> {
        let mut best: Option<(SubjectId, usize)> = None;
        for (i, stripe) in self.stripes.iter().enumerate() {
            stripe.for_each_local(|l| {
                let (s, d) = (unroute(i, stripe.depth, l), stripe.degree(l));
                let better = match best {
                    None => true,
                    Some((bs, bd)) => d > bd || (d == bd && s < bs),
                };
                if d > 0 && better {
                    best = Some((s, d));
                }
            });
        }
        best
    }

    /// Folds every stripe's delta into its base: a full O(edges) pass, for an
    /// explicit maintenance point (live changes never need it). No-op when empty.
    pub fn compact(&mut self) {
        for stripe in &mut self.stripes {
            if stripe.delta.len > 0 {
                stripe.fold();
                self.folds += 1;
            }
        }
        self.delta_len = 0;
    }
}

impl Default for SubscriptionIndex {
    fn default() -> Self {
        SubscriptionIndex::new()
    }
}

#[cfg(test)]
mod tests;
