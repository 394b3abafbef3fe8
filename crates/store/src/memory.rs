//! The `memory` backend: two ordered sets, nothing durable. For throwaway runs and
//! as the reference the other backends are tested against.

use std::collections::BTreeSet;

use crate::{Store, StoreError};

/// Edges in both orientations so both listings are range scans.
#[derive(Debug, Default)]
pub struct MemoryStore {
    /// (subject, subscriber)
    by_subject: BTreeSet<(u64, u64)>,
    /// (subscriber, subject)
    by_subscriber: BTreeSet<(u64, u64)>,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }
}

impl Store for MemoryStore {
    fn add(&mut self, edges: &[(u64, u64)]) -> Result<usize, StoreError> {
        let mut new = 0;
        for &(subscriber, subject) in edges {
            if self.by_subject.insert((subject, subscriber)) {
                self.by_subscriber.insert((subscriber, subject));
                new += 1;
            }
        }
        Ok(new)
    }

    fn remove(&mut self, edges: &[(u64, u64)]) -> Result<usize, StoreError> {
        let mut existed = 0;
        for &(subscriber, subject) in edges {
            if self.by_subject.remove(&(subject, subscriber)) {
                self.by_subscriber.remove(&(subscriber, subject));
                existed += 1;
            }
        }
        Ok(existed)
    }

    fn subscribers(&mut self, subject: u64) -> Result<Vec<u64>, StoreError> {
        Ok(self
            .by_subject
            .range((subject, 0)..=(subject, u64::MAX))
            .map(|e| e.1)
            .collect())
    }

    fn subscriptions(&mut self, subscriber: u64) -> Result<Vec<u64>, StoreError> {
        Ok(self
            .by_subscriber
            .range((subscriber, 0)..=(subscriber, u64::MAX))
            .map(|e| e.1)
            .collect())
    }

    fn for_each_edge(&mut self, f: &mut dyn FnMut(u64, u64)) -> Result<u64, StoreError> {
        for &(subject, subscriber) in &self.by_subject {
            f(subscriber, subject);
        }
        Ok(self.by_subject.len() as u64)
    }

    fn bulk_load(
        &mut self,
        edges: &mut dyn Iterator<Item = (u64, u64)>,
        progress: &dyn Fn(u64),
    ) -> Result<u64, StoreError> {
        let mut new = 0u64;
        let mut n = 0u64;
        for (subscriber, subject) in edges {
            n += 1;
            if n & (crate::bulk::PROGRESS_EVERY - 1) == 0 {
                progress(n);
            }
            if self.by_subject.insert((subject, subscriber)) {
                self.by_subscriber.insert((subscriber, subject));
                new += 1;
            }
        }
        progress(n);
        Ok(new)
    }

    fn edge_count(&mut self) -> Result<u64, StoreError> {
        Ok(self.by_subject.len() as u64)
    }
}
