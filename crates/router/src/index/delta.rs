//! Live changes on top of one stripe's immutable CSR base: edges added since the
//! last build, and base edges removed since. Both lists per subject stay sorted
//! and small; the stripe folds them into a new base when they grow (see
//! `Stripe::needs_fold`).
//!
//! Invariant: an added edge is never in the base, a removed edge always is.

use crate::hash::IdMap;

#[derive(Debug, Default, Clone)]
pub struct Delta {
    /// subject → sorted subscribers not in the base.
    pub adds: IdMap<Vec<u64>>,
    /// subject → sorted base subscribers that no longer subscribe.
    pub removes: IdMap<Vec<u64>>,
    /// Total entries in `adds` and `removes`.
    pub len: usize,
}

impl Delta {
    pub fn added(&self, subject: u64) -> &[u64] {
        self.adds.get(&subject).map_or(&[], |v| v)
    }

    pub fn removed(&self, subject: u64) -> &[u64] {
        self.removes.get(&subject).map_or(&[], |v| v)
    }

    /// Inserts into the sorted list `map[subject]`; false if already there.
    pub fn insert(map: &mut IdMap<Vec<u64>>, subject: u64, id: u64) -> bool {
        let list = map.entry(subject).or_default();
        match list.binary_search(&id) {
            Ok(_) => false,
            Err(i) => {
                list.insert(i, id);
                true
            }
        }
    }

    /// Removes from the sorted list `map[subject]`; false if it was not there.
    pub fn take(map: &mut IdMap<Vec<u64>>, subject: u64, id: u64) -> bool {
        let Some(list) = map.get_mut(&subject) else {
            return false;
        };
        let Ok(i) = list.binary_search(&id) else {
            return false;
        };
        list.remove(i);
        if list.is_empty() {
            map.remove(&subject);
        }
        true
    }

    pub fn heap_bytes(&self) -> usize {
        let per_entry = std::mem::size_of::<(u64, Vec<u64>)>() + 1;
        let lists: usize = self
            .adds
            .values()
            .chain(self.removes.values())
            .map(|v| v.capacity() * 8)
            .sum();
        (self.adds.capacity() + self.removes.capacity()) * per_entry + lists
    }
}
