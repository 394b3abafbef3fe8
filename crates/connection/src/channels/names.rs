//! The process's channel names held by connections, each with a 4-byte id: one
//! allocation per name however many connections hold it (a name is up to 200
//! bytes; a subscription keeps its id), forgotten with its last holder. Taken when
//! a connection subscribes or lets go, and once per message and event loop to find
//! a message's id (`Frames::channel_id`), never per delivery.

use hashbrown::HashTable;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Names {
    /// The held names' ids, found by the name's hash: 5 bytes a slot where a map
    /// keyed by the name again took 25 (3,000 rooms: 5 B a connection of 15,000).
    ids: HashTable<u32>,
    hasher: RandomState,
    /// By id: the name and how many subscriptions hold it (`None`: a free id).
    slots: Vec<Option<(Arc<str>, u32)>>,
    free: Vec<u32>,
}

impl Names {
    fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name)
    }

    /// The id of `name`, if held.
    fn find(&self, name: &str) -> Option<u32> {
        let slots = &self.slots;
        self.ids
            .find(
                self.hash(name),
                |&id| matches!(&slots[id as usize], Some((held, _)) if &**held == name),
            )
            .copied()
    }
}

static NAMES: Mutex<Option<Names>> = Mutex::new(None);

fn with<T>(f: impl FnOnce(&mut Names) -> T) -> T {
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    f(names.get_or_insert_with(Names::default))
}

/// Holds `name` once more; its id.
pub(super) fn hold(name: &str) -> u32 {
    with(|n| {
        if let Some(id) = n.find(name) {
            if let Some((_, holders)) = n.slots[id as usize].as_mut() {
                *holders += 1;
            }
            return id;
        }
        let id = match n.free.pop() {
            Some(id) => id,
            None => {
                n.slots.push(None);
                (n.slots.len() - 1) as u32
            }
        };
        n.slots[id as usize] = Some((name.into(), 1));
        let hash = n.hash(name);
        let Names {
            ids, hasher, slots, ..
        } = n;
        // A growth hashes the ids already in the index again: each names a held
        // slot (an id leaves the index before its slot is freed).
        ids.insert_unique(hash, id, |&id| match &slots[id as usize] {
            Some((held, _)) => hasher.hash_one(&**held),
            None => 0,
        });
        id
    })
}

/// Lets go of `id` once; the name is forgotten with its last holder.
pub(super) fn release(id: u32) {
    with(|n| {
        let Some(slot) = n.slots.get_mut(id as usize) else {
            return;
        };
        let last = match slot.as_mut() {
            Some((_, holders)) => {
                *holders -= 1;
                *holders == 0
            }
            None => false,
        };
        if last {
            if let Some((name, _)) = slot.take() {
                let hash = n.hash(&name);
                if let Ok(entry) = n.ids.find_entry(hash, |&held| held == id) {
                    entry.remove();
                }
            }
            n.free.push(id);
        }
    })
}

/// The id of a held name (`None`: no connection of the process holds it).
pub(crate) fn id(name: &str) -> Option<u32> {
    with(|n| n.find(name))
}

/// The table's own allocation of `name` (a copy when no connection holds it): a
/// join gives it to the router, which keeps it as its channel's name.
pub(super) fn shared(name: &str) -> Arc<str> {
    with(
        |n| match n.find(name).and_then(|id| n.slots[id as usize].as_ref()) {
            Some((held, _)) => held.clone(),
            None => name.into(),
        },
    )
}

/// The name of a held id.
pub(super) fn name(id: u32) -> Arc<str> {
    with(|n| match n.slots.get(id as usize) {
        Some(Some((name, _))) => name.clone(),
        _ => "".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_kept_once_while_held_and_its_id_reused_after() {
        let a = hold("names-test:a");
        assert_eq!(hold("names-test:a"), a);
        assert_eq!(id("names-test:a"), Some(a));
        assert_eq!(&*name(a), "names-test:a");
        assert!(
            Arc::ptr_eq(&shared("names-test:a"), &name(a)),
            "the table's own"
        );
        assert_eq!(&*shared("names-test:none"), "names-test:none");
        release(a);
        assert_eq!(id("names-test:a"), Some(a), "one holder left");
        release(a);
        assert_eq!(id("names-test:a"), None, "forgotten with its last holder");
        let b = hold("names-test:b");
        assert_eq!(&*name(b), "names-test:b");
        release(b);
    }

    #[test]
    fn thousands_of_names_each_found_by_its_own_id_through_the_table_s_growth() {
        let ids: Vec<u32> = (0..5000)
            .map(|i| hold(&format!("names-grow:{i}")))
            .collect();
        for (i, &held) in ids.iter().enumerate() {
            assert_eq!(id(&format!("names-grow:{i}")), Some(held));
            assert_eq!(&*name(held), format!("names-grow:{i}"));
        }
        for &held in &ids[..2500] {
            release(held);
        }
        for (i, &held) in ids.iter().enumerate() {
            let want = (i >= 2500).then_some(held);
            assert_eq!(id(&format!("names-grow:{i}")), want, "name {i}");
        }
        // Freed ids are given to new names, which are found by them.
        let again = hold("names-grow:again");
        assert_eq!(id("names-grow:again"), Some(again));
        release(again);
        for &held in &ids[2500..] {
            release(held);
        }
    }
}
