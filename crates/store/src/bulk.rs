//! Shared bulk-load machinery: read an edge stream into one flat array, sort it by
//! (subject, subscriber) or (subscriber, subject), drop duplicates, and walk it
//! group by group. Edges whose ids both fit in 32 bits (the common case) are packed
//! into one u64 and sorted with an LSD radix sort that skips constant digits:
//! 30 M edges sort in well under a second, where a comparison sort takes seconds.

/// How often (in input edges) the progress callback is called; a power of two.
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// Sorted, distinct edges keyed (group, member): `group` is the subject or the
/// subscriber depending on the orientation.
#[derive(Clone)]
pub enum SortedEdges {
    /// `group << 32 | member`.
    Packed(Vec<u64>),
    Wide(Vec<(u64, u64)>),
}

impl SortedEdges {
    /// Reads `(subscriber, subject)` edges keyed by subject.
    pub fn by_subject(
        edges: &mut dyn Iterator<Item = (u64, u64)>,
        progress: &dyn Fn(u64),
    ) -> SortedEdges {
        let mut packed: Vec<u64> = Vec::new();
        let mut wide: Option<Vec<(u64, u64)>> = None;
        let mut n = 0u64;
        for (subscriber, subject) in edges {
            n += 1;
            if n & (PROGRESS_EVERY - 1) == 0 {
                progress(n);
            }
            match &mut wide {
                Some(w) => w.push((subject, subscriber)),
                None if subject <= u64::from(u32::MAX) && subscriber <= u64::from(u32::MAX) => {
                    packed.push(subject << 32 | subscriber)
                }
                None => {
                    let mut w: Vec<(u64, u64)> =
                        packed.iter().map(|&p| (p >> 32, p & 0xffff_ffff)).collect();
                    packed = Vec::new();
                    w.push((subject, subscriber));
                    wide = Some(w);
                }
            }
        }
        progress(n);
        let mut out = match wide {
            Some(w) => SortedEdges::Wide(w),
            None => SortedEdges::Packed(packed),
        };
        out.sort();
        out
    }

    fn sort(&mut self) {
        match self {
            SortedEdges::Packed(v) => {
                radix_sort(v);
                v.dedup();
            }
            SortedEdges::Wide(v) => {
                v.sort_unstable();
                v.dedup();
            }
        }
    }

    pub fn len(&self) -> usize {
        match self {
            SortedEdges::Packed(v) => v.len(),
            SortedEdges::Wide(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same edges keyed the other way round (group ↔ member), sorted.
    pub fn swapped(mut self) -> SortedEdges {
        match &mut self {
            SortedEdges::Packed(v) => v.iter_mut().for_each(|p| *p = p.rotate_left(32)),
            SortedEdges::Wide(v) => v.iter_mut().for_each(|p| *p = (p.1, p.0)),
        }
        self.sort();
        self
    }

    /// Calls `f(group, members)` per group in ascending group order; stops at the
    /// first error.
    pub fn try_for_each_group<E>(
        &self,
        mut f: impl FnMut(u64, &[u64]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut members: Vec<u64> = Vec::new();
        let mut current: Option<u64> = None;
        let mut step = |group: u64, member: u64, members: &mut Vec<u64>| -> Result<(), E> {
            if current != Some(group) {
                if let Some(g) = current {
                    f(g, members)?;
                }
                members.clear();
                current = Some(group);
            }
            members.push(member);
            Ok(())
        };
        match self {
            SortedEdges::Packed(v) => {
                for &p in v {
                    step(p >> 32, p & 0xffff_ffff, &mut members)?;
                }
            }
            SortedEdges::Wide(v) => {
                for &(g, m) in v {
                    step(g, m, &mut members)?;
                }
            }
        }
        match current {
            Some(g) => f(g, &members),
            None => Ok(()),
        }
    }
}

/// LSD radix sort on 16-bit digits; digits equal in every key are skipped.
pub fn radix_sort(v: &mut Vec<u64>) {
    if v.len() < 4096 {
        v.sort_unstable();
        return;
    }
    let (mut or, mut and) = (0u64, u64::MAX);
    for &x in v.iter() {
        or |= x;
        and &= x;
    }
    let varying = or ^ and;
    let mut buf = vec![0u64; v.len()];
    for shift in [0u32, 16, 32, 48] {
        if (varying >> shift) & 0xffff == 0 {
            continue;
        }
        let mut counts = vec![0usize; 1 << 16];
        for &x in v.iter() {
            counts[((x >> shift) & 0xffff) as usize] += 1;
        }
        let mut sum = 0;
        for c in counts.iter_mut() {
            let n = *c;
            *c = sum;
            sum += n;
        }
        for &x in v.iter() {
            let d = ((x >> shift) & 0xffff) as usize;
            buf[counts[d]] = x;
            counts[d] += 1;
        }
        std::mem::swap(v, &mut buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radix_sort_matches_std_sort() {
        let mut x = 88172645463325252u64;
        let mut v: Vec<u64> = (0..100_000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 3 == 0 {
                    x
                } else {
                    x & 0x000f_ffff_000f_ffff
                }
            })
            .collect();
        let mut expect = v.clone();
        expect.sort_unstable();
        radix_sort(&mut v);
        assert_eq!(v, expect);
    }

    #[test]
    fn groups_dedup_and_swap() {
        let edges = vec![(1, 10), (2, 10), (1, 10), (3, 11), (u64::MAX, 10)];
        let s = SortedEdges::by_subject(&mut edges.clone().into_iter(), &|_| {});
        assert!(matches!(s, SortedEdges::Wide(_)));
        let mut groups = Vec::new();
        s.try_for_each_group(|g, m| {
            groups.push((g, m.to_vec()));
            Ok::<(), ()>(())
        })
        .expect("no error");
        assert_eq!(groups, vec![(10, vec![1, 2, u64::MAX]), (11, vec![3])]);
        let s = SortedEdges::by_subject(&mut edges[..4].iter().copied(), &|_| {}).swapped();
        let mut groups = Vec::new();
        s.try_for_each_group(|g, m| {
            groups.push((g, m.to_vec()));
            Ok::<(), ()>(())
        })
        .expect("no error");
        assert_eq!(groups, vec![(1, vec![10]), (2, vec![10]), (3, vec![11])]);
    }
}
