//! Connections per client address (`--max-per-ip`): the [`Prefix`] a peer is
//! counted under — its IPv4 address, or its IPv6 /64 (one host's privacy
//! addresses, or one subscriber's delegated /64, share a limit); an IPv4-mapped
//! IPv6 address counts as IPv4 — and the [`PeerTable`] of counts.
//!
//! Loopback peers are never counted (a local load generator, a reverse proxy on
//! the same host for which one address is every client): that is decided from the
//! address ([`Prefix::of`] is `None`), never from a key's value, so no remote
//! address can fall into the exemption, and keys keep every bit of their prefix,
//! so no two prefixes share a count.
//!
//! The table lives in one memory mapping: private to the process by default, or —
//! under `serve --processes` — a shared one the supervisor creates (a memfd its
//! gateways inherit), so the limit holds for the server as a whole rather than per
//! gateway. Each connection keeps a 4-byte handle (its entry's number + 1, 0: not
//! counted) in its slab slot; the entry stays put while a connection holds it.
//!
//! Layout of the mapping: a header; `capacity` entries (prefix, total); an open-
//! addressing index (entry numbers, linear probing with backward-shift deletion,
//! twice the capacity so it is never full); and one column of counts per gateway
//! place (`held[place][entry]`), the source of truth the totals are rebuilt from.
//! Every word is an atomic; the entries, the index and the totals change only under
//! a spin lock in the header that holds the locker's pid, taken once per accept
//! and once per close of a counted connection for a hash probe and two counters
//! (no system call; loopback peers never take it).
//!
//! A gateway that dies holding counts (or even the lock): the supervisor, before it
//! starts the place again, calls [`PeerTable::reclaim`], which takes the lock (from
//! the dead pid if need be), zeroes that place's column and rebuilds totals, free
//! entries and the index from the columns that remain. Gateways wait for the lock
//! meanwhile (the supervisor looks every 20 ms).
//!
//! Memory: 16 B per entry, 8 B of index, 4 B per place, in a mapping of
//! `capacity` entries the kernel backs page by page as it is used.

use mapping::{map, Locked};
pub use prefix::Prefix;
use prefix::TAG_FREE;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

mod mapping;
mod prefix;

const MAGIC: u64 = u64::from_le_bytes(*b"myrpeer1");
/// Most entries a table has (the rest of a million-connection server's distinct
/// addresses would be refused as "too many client addresses").
pub const MAX_CAPACITY: u32 = 1 << 22;
/// Fewest entries a table has.
const MIN_CAPACITY: u32 = 1024;
/// Most gateway places a shared table has (a supervisor's gateways).
const MAX_PLACES: u32 = 1 << 16;

/// Why a connection was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("too many connections from this address")]
    PerAddress,
    #[error("too many client addresses at once")]
    TableFull,
}

/// Why a shared table could not be made or opened.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("per-address table: {0}")]
    Os(#[from] std::io::Error),
    #[error("per-address table: descriptor {fd} holds no table of this version")]
    NotATable { fd: i32 },
    #[error("per-address table: place {place} beyond its {places} places")]
    NoPlace { place: u32, places: u32 },
}

#[repr(C)]
struct Header {
    magic: AtomicU64,
    capacity: AtomicU32,
    index_len: AtomicU32,
    places: AtomicU32,
    /// 0, or the pid of the process holding the lock.
    lock: AtomicU32,
    /// Entries ever handed out (the rest are zero and untouched).
    used: AtomicU32,
    /// Freed entries, chained through their `count` word (entry + 1; 0 ends).
    free: AtomicU32,
    /// The index's hash key (random per table: no chosen-prefix probe chains).
    seed: AtomicU64,
}

#[repr(C)]
struct Entry {
    bits: AtomicU64,
    tag: AtomicU32,
    /// The total count while used; the next free entry (+1) while free.
    count: AtomicU32,
}

const HEADER: usize = 64;

/// Connection counts per [`Prefix`], for one process or shared by a supervisor's
/// gateways (see the module doc).
pub struct PeerTable {
    base: *mut u8,
    len: usize,
    capacity: u32,
    index_len: u32,
    places: u32,
    /// This process's column.
    place: u32,
    /// The lock word's value while this process holds it.
    me: u32,
}

// SAFETY: the mapping is only reached through atomics; it lives until drop.
unsafe impl Send for PeerTable {}
unsafe impl Sync for PeerTable {}

impl std::fmt::Debug for PeerTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTable")
            .field("capacity", &self.capacity)
            .field("places", &self.places)
            .field("place", &self.place)
            .finish()
    }
}

/// The table's capacity for a server of `max_connections` (each used entry holds
/// at least one connection, so that many entries can never be full).
pub fn capacity_for(max_connections: usize) -> u32 {
    (max_connections.min(MAX_CAPACITY as usize) as u32).max(MIN_CAPACITY)
}

fn sizes(capacity: u32, places: u32) -> (u32, usize) {
    let index_len = (capacity as usize * 2).next_power_of_two() as u32;
    let len = HEADER
        + capacity as usize * std::mem::size_of::<Entry>()
        + index_len as usize * 4
        + places as usize * capacity as usize * 4;
    (index_len, len)
}

impl PeerTable {
    /// A table of this process alone.
    pub fn private(capacity: u32) -> Result<PeerTable, TableError> {
        let capacity = capacity.clamp(MIN_CAPACITY, MAX_CAPACITY);
        let (index_len, len) = sizes(capacity, 1);
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        let base = map(len, flags, -1)?;
        let table = PeerTable::at(base, len, capacity, index_len, 1, 0);
        table.init();
        Ok(table)
    }

    /// A table for `places` gateway processes in a memfd they inherit (the
    /// descriptor is left open across exec on purpose); the supervisor's own view
    /// has no place and only [`PeerTable::reclaim`]s.
    pub fn shared(capacity: u32, places: u32) -> Result<(PeerTable, i32), TableError> {
        let capacity = capacity.clamp(MIN_CAPACITY, MAX_CAPACITY);
        let places = places.clamp(1, MAX_PLACES);
        let (index_len, len) = sizes(capacity, places);
        // SAFETY: a NUL-terminated name; no flags: no close-on-exec.
        let fd = unsafe { libc::memfd_create(c"myriad-peers".as_ptr(), 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: ftruncate on the descriptor just made.
        if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            let e = std::io::Error::last_os_error();
            // SAFETY: closing our own descriptor.
            unsafe { libc::close(fd) };
            return Err(e.into());
        }
        let base = map(len, libc::MAP_SHARED, fd)?;
        let table = PeerTable::at(base, len, capacity, index_len, places, u32::MAX);
        table.init();
        Ok((table, fd))
    }

    /// A gateway's view of the supervisor's table on inherited descriptor `fd`.
    pub fn open(fd: i32, place: u32) -> Result<PeerTable, TableError> {
        // SAFETY: fstat into a zeroed struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let len = st.st_size as usize;
        if len < HEADER {
            return Err(TableError::NotATable { fd });
        }
        let base = map(len, libc::MAP_SHARED, fd)?;
        // SAFETY: the mapping is at least a header long and page aligned.
        let header = unsafe { &*(base as *const Header) };
        let (capacity, places) = (
            header.capacity.load(Ordering::Acquire),
            header.places.load(Ordering::Acquire),
        );
        // Sizes only from a header this version wrote (within its bounds): no
        // arithmetic on what another file holds.
        let ours = header.magic.load(Ordering::Acquire) == MAGIC
            && (MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity)
            && (1..=MAX_PLACES).contains(&places);
        let (index_len, want) = if ours {
            sizes(capacity, places)
        } else {
            (0, 0)
        };
        // Dropped on refusal: unmaps what was mapped.
        let table = PeerTable::at(base, len, capacity, index_len, places, place);
        if !ours || want != len {
            return Err(TableError::NotATable { fd });
        }
        if place >= places {
            return Err(TableError::NoPlace { place, places });
        }
        Ok(table)
    }

    fn at(
        base: *mut u8,
        len: usize,
        capacity: u32,
        index_len: u32,
        places: u32,
        place: u32,
    ) -> Self {
        PeerTable {
            base,
            len,
            capacity,
            index_len,
            places,
            place,
            me: std::process::id(),
        }
    }

    fn init(&self) {
        let h = self.header();
        h.capacity.store(self.capacity, Ordering::Relaxed);
        h.index_len.store(self.index_len, Ordering::Relaxed);
        h.places.store(self.places, Ordering::Relaxed);
        let seed =
            std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u64);
        h.seed.store(seed | 1, Ordering::Relaxed);
        h.magic.store(MAGIC, Ordering::Release);
    }

    /// Counts one more connection of `prefix` unless it already has `limit`;
    /// returns the connection's handle (never 0).
    pub fn admit(&self, prefix: Prefix, limit: u32) -> Result<u32, Refused> {
        let _lock = self.lock(None);
        let (tag, bits) = prefix.words();
        let e = match self.find(tag, bits) {
            Ok(e) => {
                if self.entry(e).count.load(Ordering::Relaxed) >= limit {
                    return Err(Refused::PerAddress);
                }
                e
            }
            Err(slot) => {
                if limit == 0 {
                    return Err(Refused::PerAddress);
                }
                let e = self.allocate().ok_or(Refused::TableFull)?;
                let entry = self.entry(e);
                entry.bits.store(bits, Ordering::Relaxed);
                entry.tag.store(tag, Ordering::Relaxed);
                entry.count.store(0, Ordering::Relaxed);
                self.index(slot).store(e + 1, Ordering::Relaxed);
                e
            }
        };
        // The column first: what a reclaim rebuilds the total from.
        self.held(self.place, e).fetch_add(1, Ordering::Relaxed);
        self.entry(e).count.fetch_add(1, Ordering::Relaxed);
        Ok(e + 1)
    }

    /// Gives back what [`PeerTable::admit`] counted under `handle`.
    pub fn release(&self, handle: u32) {
        let Some(e) = handle.checked_sub(1).filter(|&e| e < self.capacity) else {
            return;
        };
        let _lock = self.lock(None);
        let held = self.held(self.place, e);
        if held.load(Ordering::Relaxed) == 0 {
            // Reclaimed meanwhile (only after this process was declared dead).
            return;
        }
        held.fetch_sub(1, Ordering::Relaxed);
        let entry = self.entry(e);
        if entry.count.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.remove(e);
        }
    }

    /// The connections counted under `prefix` (in every place).
    pub fn count(&self, prefix: Prefix) -> u32 {
        let _lock = self.lock(None);
        let (tag, bits) = prefix.words();
        self.find(tag, bits)
            .map_or(0, |e| self.entry(e).count.load(Ordering::Relaxed))
    }

    /// The supervisor, once gateway `place` (process `dead`) is gone: drops every
    /// count of that place and rebuilds the rest from the other places' columns.
    pub fn reclaim(&self, place: u32, dead: u32) {
        if place >= self.places {
            return;
        }
        let _lock = self.lock(Some(dead));
        let h = self.header();
        let used = h.used.load(Ordering::Relaxed).min(self.capacity);
        for e in 0..used {
            self.held(place, e).store(0, Ordering::Relaxed);
        }
        for i in 0..self.index_len {
            self.index(i).store(0, Ordering::Relaxed);
        }
        let mut free = 0;
        for e in (0..used).rev() {
            let entry = self.entry(e);
            let total: u32 = (0..self.places)
                .map(|p| self.held(p, e).load(Ordering::Relaxed))
                .sum();
            let tag = entry.tag.load(Ordering::Relaxed);
            if total == 0 || tag == TAG_FREE {
                entry.tag.store(TAG_FREE, Ordering::Relaxed);
                entry.count.store(free, Ordering::Relaxed);
                free = e + 1;
                continue;
            }
            entry.count.store(total, Ordering::Relaxed);
            let Err(slot) = self.find(tag, entry.bits.load(Ordering::Relaxed)) else {
                continue; // cannot happen: every prefix has one entry
            };
            self.index(slot).store(e + 1, Ordering::Relaxed);
        }
        h.free.store(free, Ordering::Relaxed);
    }

    /// `Ok(entry)` holding (tag, bits), or `Err(index slot)` where it would go.
    fn find(&self, tag: u32, bits: u64) -> Result<u32, u32> {
        let mask = self.index_len - 1;
        let mut i = self.home(tag, bits);
        loop {
            let v = self.index(i).load(Ordering::Relaxed);
            if v == 0 {
                return Err(i);
            }
            let entry = self.entry(v - 1);
            if entry.bits.load(Ordering::Relaxed) == bits
                && entry.tag.load(Ordering::Relaxed) == tag
            {
                return Ok(v - 1);
            }
            i = (i + 1) & mask;
        }
    }

    fn home(&self, tag: u32, bits: u64) -> u32 {
        let seed = self.header().seed.load(Ordering::Relaxed);
        let mut h = (bits ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(tag);
        h ^= h >> 29;
        h = h.wrapping_mul(seed);
        h ^= h >> 32;
        (h as u32) & (self.index_len - 1)
    }

    /// Takes entry `e` (count 0) out of the index and onto the free list.
    fn remove(&self, e: u32) {
        let entry = self.entry(e);
        let (tag, bits) = (
            entry.tag.load(Ordering::Relaxed),
            entry.bits.load(Ordering::Relaxed),
        );
        let mask = self.index_len - 1;
        let mut i = self.home(tag, bits);
        while self.index(i).load(Ordering::Relaxed) != e + 1 {
            if self.index(i).load(Ordering::Relaxed) == 0 {
                break; // not indexed (cannot happen)
            }
            i = (i + 1) & mask;
        }
        // Backward shift: later members of the probe run move up into the hole.
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let v = self.index(j).load(Ordering::Relaxed);
            if v == 0 {
                break;
            }
            let other = self.entry(v - 1);
            let k = self.home(
                other.tag.load(Ordering::Relaxed),
                other.bits.load(Ordering::Relaxed),
            );
            // Whether j's home lies cyclically in (i, j]: then it stays.
            let stays = if i <= j {
                i < k && k <= j
            } else {
                i < k || k <= j
            };
            if !stays {
                self.index(i).store(v, Ordering::Relaxed);
                i = j;
            }
        }
        self.index(i).store(0, Ordering::Relaxed);
        let h = self.header();
        entry.tag.store(TAG_FREE, Ordering::Relaxed);
        entry
            .count
            .store(h.free.load(Ordering::Relaxed), Ordering::Relaxed);
        h.free.store(e + 1, Ordering::Relaxed);
    }

    fn allocate(&self) -> Option<u32> {
        let h = self.header();
        let free = h.free.load(Ordering::Relaxed);
        if free != 0 {
            let e = free - 1;
            h.free.store(
                self.entry(e).count.load(Ordering::Relaxed),
                Ordering::Relaxed,
            );
            return Some(e);
        }
        let used = h.used.load(Ordering::Relaxed);
        if used >= self.capacity {
            return None;
        }
        h.used.store(used + 1, Ordering::Relaxed);
        Some(used)
    }

    /// Spins until the lock is this process's. With `stale`: a lock held by that
    /// (dead) pid is taken over.
    fn lock(&self, stale: Option<u32>) -> Locked<'_> {
        let word = &self.header().lock;
        let mut spins = 0u32;
        loop {
            match word.compare_exchange_weak(0, self.me, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Locked(word),
                Err(holder) if Some(holder) == stale && holder != 0 => {
                    if word
                        .compare_exchange(holder, self.me, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                    {
                        return Locked(word);
                    }
                }
                Err(_) => {}
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                // Another thread or process holds it and may be descheduled.
                std::thread::yield_now();
            }
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a header and lives as long as `self`.
        unsafe { &*(self.base as *const Header) }
    }

    fn entry(&self, e: u32) -> &Entry {
        debug_assert!(e < self.capacity);
        let at = HEADER + e as usize * std::mem::size_of::<Entry>();
        // SAFETY: in bounds (e < capacity, see `sizes`) and 8-byte aligned.
        unsafe { &*(self.base.add(at) as *const Entry) }
    }

    fn index(&self, i: u32) -> &AtomicU32 {
        let at = HEADER + self.capacity as usize * std::mem::size_of::<Entry>() + i as usize * 4;
        debug_assert!(at + 4 <= self.len);
        // SAFETY: in bounds (i < index_len) and 4-byte aligned.
        unsafe { &*(self.base.add(at) as *const AtomicU32) }
    }

    fn held(&self, place: u32, e: u32) -> &AtomicU32 {
        let at = HEADER
            + self.capacity as usize * std::mem::size_of::<Entry>()
            + self.index_len as usize * 4
            + (place as usize * self.capacity as usize + e as usize) * 4;
        debug_assert!(at + 4 <= self.len);
        // SAFETY: in bounds (place < places, e < capacity) and 4-byte aligned.
        unsafe { &*(self.base.add(at) as *const AtomicU32) }
    }
}

impl Drop for PeerTable {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once; no reference outlives `self`.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests;
