//! Streaming construction of the CSR base from `(subscriber, subject)` edges.
//!
//! The store streams edges ordered by (subject, subscriber) — the order of its
//! primary key — so the common path appends straight into the final arrays with
//! no intermediate copy. If an edge arrives out of order the builder falls back to
//! collecting packed pairs and sorting them once at `build()`; duplicates are
//! dropped on both paths.

use super::csr::{Csr, Targets};
use super::SubscriptionIndex;

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
    subjects: Vec<u64>,
    offsets: Vec<u64>,
    targets: Targets,
    /// Last (subject, subscriber) appended on the sorted path.
    last: Option<(u64, u64)>,
    unsorted: Option<Pairs>,
}

impl IndexBuilder {
    pub fn new() -> IndexBuilder {
        IndexBuilder {
            subjects: Vec::new(),
            offsets: Vec::new(),
            targets: Targets::U32(Vec::new()),
            last: None,
            unsorted: None,
        }
    }

    /// Reserves room for about `edges` edges (a hint; e.g. the store's count).
    pub fn with_capacity(edges: usize) -> IndexBuilder {
        let mut b = IndexBuilder::new();
        b.targets = Targets::U32(Vec::with_capacity(edges));
        b
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
                if self.last.map(|l| l.0) != Some(subject) {
                    self.subjects.push(subject);
                    self.offsets.push(self.targets.len() as u64);
                }
                self.targets.push(subscriber);
                self.last = Some(key);
            }
        }
    }

    /// Moves what the sorted path holds into pairs; later edges go there too.
    fn fall_back(&mut self, subject: u64, subscriber: u64) {
        let mut pairs = Pairs::Packed(Vec::with_capacity(self.targets.len() * 2));
        let csr = Csr::from_sorted_parts(
            std::mem::take(&mut self.subjects),
            std::mem::take(&mut self.offsets),
            std::mem::replace(&mut self.targets, Targets::U32(Vec::new())),
        );
        csr.for_each_subject(|s, subs| subs.for_each(|u| pairs.push(s, u)));
        pairs.push(subject, subscriber);
        self.unsorted = Some(pairs);
        self.last = None;
    }

    pub fn build(mut self) -> SubscriptionIndex {
        match self.unsorted.take() {
            None => SubscriptionIndex::from_csr(Csr::from_sorted_parts(
                self.subjects,
                self.offsets,
                self.targets,
            )),
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
