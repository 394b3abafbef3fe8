//! The immutable base of the subscription index: compressed sparse rows.
//!
//! `offsets[p]..offsets[p + 1]` is the range of `targets` holding the sorted
//! subscribers of the subject at position `p`. Positions are the subject ids
//! themselves when ids are dense (no key array at all), or indexes into a sorted
//! `subjects` array when they are sparse. Targets are `u32` while every subscriber
//! id fits, which is what keeps 30 M edges near 4 bytes each.

/// Flat subscriber array, narrow while every id fits in 32 bits.
#[derive(Debug, Clone)]
pub enum Targets {
    U32(Vec<u32>),
    U64(Vec<u64>),
}

impl Targets {
    pub fn len(&self) -> usize {
        match self {
            Targets::U32(v) => v.len(),
            Targets::U64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn push(&mut self, id: u64) {
        match self {
            Targets::U32(v) => match u32::try_from(id) {
                Ok(x) => v.push(x),
                Err(_) => {
                    let mut wide: Vec<u64> = Vec::with_capacity(v.capacity().max(v.len() + 1));
                    wide.extend(v.iter().map(|&x| u64::from(x)));
                    wide.push(id);
                    *self = Targets::U64(wide);
                }
            },
            Targets::U64(v) => v.push(id),
        }
    }

    pub fn slice(&self, r: std::ops::Range<usize>) -> Slice<'_> {
        match self {
            Targets::U32(v) => Slice::U32(&v[r]),
            Targets::U64(v) => Slice::U64(&v[r]),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Targets::U32(v) => v.capacity() * 4,
            Targets::U64(v) => v.capacity() * 8,
        }
    }

    fn shrink_to_fit(&mut self) {
        match self {
            Targets::U32(v) => v.shrink_to_fit(),
            Targets::U64(v) => v.shrink_to_fit(),
        }
    }
}

/// A borrowed, sorted run of subscribers.
#[derive(Debug, Clone, Copy)]
pub enum Slice<'a> {
    U32(&'a [u32]),
    U64(&'a [u64]),
}

impl<'a> Slice<'a> {
    pub const EMPTY: Slice<'static> = Slice::U32(&[]);

    pub fn len(&self) -> usize {
        match self {
            Slice::U32(s) => s.len(),
            Slice::U64(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, id: u64) -> bool {
        match self {
            Slice::U32(s) => u32::try_from(id).is_ok_and(|x| s.binary_search(&x).is_ok()),
            Slice::U64(s) => s.binary_search(&id).is_ok(),
        }
    }

    /// Calls `f` for each id in ascending order.
    #[inline]
    pub fn for_each(&self, mut f: impl FnMut(u64)) {
        match self {
            Slice::U32(s) => s.iter().for_each(|&x| f(u64::from(x))),
            Slice::U64(s) => s.iter().for_each(|&x| f(x)),
        }
    }
}

/// Compressed sparse rows: subject → sorted subscribers.
#[derive(Debug, Clone)]
pub struct Csr {
    /// `None`: dense, position = subject id. `Some`: sorted distinct subject ids.
    pub(super) subjects: Option<Vec<u64>>,
    /// One more entry than positions; `offsets[0] == 0`.
    pub(super) offsets: Vec<u64>,
    pub(super) targets: Targets,
}

impl Csr {
    pub fn empty() -> Csr {
        Csr {
            subjects: Some(Vec::new()),
            offsets: vec![0],
            targets: Targets::U32(Vec::new()),
        }
    }

    /// Builds from sparse sorted parts, choosing the dense layout when it is smaller.
    pub(super) fn from_sorted_parts(
        subjects: Vec<u64>,
        mut offsets: Vec<u64>,
        mut targets: Targets,
    ) -> Csr {
        offsets.push(targets.len() as u64);
        targets.shrink_to_fit();
        let dense_len = subjects.last().map_or(0, |&max| max.saturating_add(1));
        // Dense costs 8 B per id up to the max; sparse 16 B per present subject.
        if dense_len <= (subjects.len() as u64) * 2 + 1024 {
            let mut dense = Vec::with_capacity(dense_len as usize + 1);
            for (p, &s) in subjects.iter().enumerate() {
                // Empty ranges for absent ids: start = end = this subject's start.
                dense.resize(s as usize, offsets[p]);
                dense.push(offsets[p]);
            }
            dense.push(*offsets.last().expect("offsets always hold the end"));
            return Csr {
                subjects: None,
                offsets: dense,
                targets,
            };
        }
        offsets.shrink_to_fit();
        let mut subjects = subjects;
        subjects.shrink_to_fit();
        Csr {
            subjects: Some(subjects),
            offsets,
            targets,
        }
    }

    fn position(&self, subject: u64) -> Option<usize> {
        match &self.subjects {
            None => {
                let p = usize::try_from(subject).ok()?;
                (p < self.offsets.len() - 1).then_some(p)
            }
            Some(keys) => keys.binary_search(&subject).ok(),
        }
    }

    /// The sorted subscribers of `subject` (empty if none).
    pub fn get(&self, subject: u64) -> Slice<'_> {
        match self.position(subject) {
            Some(p) => self
                .targets
                .slice(self.offsets[p] as usize..self.offsets[p + 1] as usize),
            None => Slice::EMPTY,
        }
    }

    pub fn edge_count(&self) -> u64 {
        self.targets.len() as u64
    }

    /// Calls `f(subject, subscribers)` for every subject with subscribers, ascending.
    pub fn for_each_subject(&self, mut f: impl FnMut(u64, Slice<'_>)) {
        for p in 0..self.offsets.len() - 1 {
            let r = self.offsets[p] as usize..self.offsets[p + 1] as usize;
            if r.is_empty() {
                continue;
            }
            let subject = match &self.subjects {
                None => p as u64,
                Some(keys) => keys[p],
            };
            f(subject, self.targets.slice(r));
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.subjects.as_ref().map_or(0, |k| k.capacity() * 8)
            + self.offsets.capacity() * 8
            + self.targets.heap_bytes()
    }
}
