//! A channel's members mirrored for presence lists read without the router lock.
//!
//! `GET /presence/<channel>` under load waited on the router lock (hundreds of ms
//! at its worst while a connect storm held it: a holder preempted on a busy box).
//! A channel whose list was asked gets a [`Mirror`]: a copy of its members and
//! connection count behind a lock of its own, updated by the router at the very
//! points its members change, under the router lock, before the change's request
//! is answered. A list read from the mirror is therefore exact (every join and
//! leave answered before the ask is in it) and waits only for another change of
//! the same channel (an O(1) update), never for the router.
//!
//! Cost: the members once more (~16 B + slack each) for channels someone lists,
//! dropped with the channel or after [`UNREAD`] without a list. Kept beside the
//! channels' map, not in each channel's entry: few channels have one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::hash::IdHashBuilder;
use crate::UserId;

/// A mirror not read for this long is dropped (at the router's tick).
pub const UNREAD: Duration = Duration::from_secs(60);

/// One channel's members and connections, as the router last left them.
#[derive(Debug)]
pub struct Mirror {
    state: Mutex<State>,
    /// When it was created, and ms since then at the last read.
    born: Instant,
    read_ms: AtomicU64,
}

#[derive(Debug)]
struct State {
    members: HashMap<UserId, u32, IdHashBuilder>,
    connections: usize,
    /// Bumped by every change: an answer made at version v is still the answer
    /// while the version is v.
    version: u64,
}

impl super::Channels {
    /// Channel `name`'s [`Mirror`], made now if it had none; `None` for a
    /// channel that does not exist.
    pub fn mirror(&mut self, name: &str) -> Option<Arc<Mirror>> {
        let (key, c) = self.map.get_key_value(name)?;
        let blocks = &self.blocks;
        let m = self
            .mirrors
            .entry(key.clone())
            .or_insert_with(|| Mirror::new(c.subs.members(blocks), c.subs.len()));
        Some(m.clone())
    }

    /// Drops the mirrors not read for [`UNREAD`]; how many are left. Called by the
    /// tick only while some channel has one (`mirrored`).
    pub(crate) fn drop_unread_mirrors(&mut self, now: Instant) -> usize {
        self.mirrors.retain(|_, m| !m.unread(now));
        self.mirrors.len()
    }
}

impl Mirror {
    pub(crate) fn new(members: Vec<(UserId, u32)>, connections: usize) -> Arc<Mirror> {
        Arc::new(Mirror {
            state: Mutex::new(State {
                members: members.into_iter().collect(),
                connections,
                version: 0,
            }),
            born: Instant::now(),
            read_ms: AtomicU64::new(0),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Only plain inserts and removes happen under it: a poisoned state is
        // still whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `user` now holds `n` connections here (0: gone); `connections` in all.
    pub(crate) fn set(&self, user: Option<UserId>, n: u32, connections: usize) {
        let mut s = self.state();
        if let Some(user) = user {
            match n {
                0 => s.members.remove(&user),
                n => s.members.insert(user, n),
            };
        }
        s.connections = connections;
        s.version += 1;
    }

    /// The whole channel again (after a gateway's death removed many at once).
    pub(crate) fn reset(&self, members: Vec<(UserId, u32)>, connections: usize) {
        let mut s = self.state();
        s.members.clear();
        s.members.extend(members);
        s.connections = connections;
        s.version += 1;
    }

    /// The version now (see `State::version`).
    pub fn version(&self) -> u64 {
        self.state().version
    }

    /// (user, connections) of every member (with `list`), the member count, the
    /// connection count and the version they are of.
    pub fn copy(&self, list: bool) -> (Vec<(UserId, u32)>, u64, u64, u64) {
        self.read_ms
            .store(self.born.elapsed().as_millis() as u64, Ordering::Relaxed);
        let s = self.state();
        let members = match list {
            true => s.members.iter().map(|(&u, &n)| (u, n)).collect(),
            false => Vec::new(),
        };
        (
            members,
            s.members.len() as u64,
            s.connections as u64,
            s.version,
        )
    }

    /// Not read for [`UNREAD`] at `now`.
    pub(crate) fn unread(&self, now: Instant) -> bool {
        let read = self.born + Duration::from_millis(self.read_ms.load(Ordering::Relaxed));
        now.saturating_duration_since(read) >= UNREAD
    }

    /// Heap bytes (for memory accounting).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.state().members.capacity() * (std::mem::size_of::<(UserId, u32)>() + 1)
    }
}
