//! A counting global allocator for the memory examples and tests: live heap bytes,
//! live allocations by size, and a per-thread switch so one thread's allocations can
//! be left out. Each user installs it with
//! `#[global_allocator] static ALLOC: counting::Counting = counting::Counting;`.

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
/// Live allocations by size; sizes ≥ the table's end land in its last slot.
static BY_SIZE: [AtomicIsize; 65536] = [const { AtomicIsize::new(0) }; 65536];

thread_local! {
    /// Whether this thread's allocations count (const-initialised: no allocation).
    static COUNTED: Cell<bool> = const { Cell::new(true) };
}

fn note(size: usize, d: isize) {
    if !COUNTED.with(|c| c.get()) {
        return;
    }
    LIVE.fetch_add(size as isize * d, Relaxed);
    BY_SIZE[size.min(BY_SIZE.len() - 1)].fetch_add(d, Relaxed);
}

// SAFETY: forwards every call to the system allocator; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size(), 1);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        note(l.size(), -1);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        note(l.size(), -1);
        note(n, 1);
        System.realloc(p, l, n)
    }
}

/// Live heap bytes counted so far.
pub fn live() -> isize {
    LIVE.load(Relaxed)
}

/// Count (or stop counting) this thread's allocations; returns the previous setting.
pub fn count_this_thread(on: bool) -> bool {
    COUNTED.with(|c| c.replace(on))
}

/// Live allocations by size; the snapshot's own vector is not counted.
pub fn snapshot() -> Vec<isize> {
    let was = count_this_thread(false);
    let v = BY_SIZE.iter().map(|a| a.load(Relaxed)).collect();
    count_this_thread(was);
    v
}

/// Allocations by size that appeared since `before` (uncounted, like `snapshot`).
pub fn diff(before: &[isize]) -> Vec<isize> {
    let now = snapshot();
    let was = count_this_thread(false);
    let d = now.iter().zip(before).map(|(a, b)| a - b).collect();
    count_this_thread(was);
    d
}

/// "n×size" for every size whose count changed by at least `min` per `per`.
pub fn describe(sizes: &[isize], per: isize, min: f64) -> String {
    sizes
        .iter()
        .enumerate()
        .filter(|(_, n)| **n as f64 / per as f64 >= min)
        .map(|(size, n)| {
            let each = *n as f64 / per as f64;
            if per == 1 {
                format!("{n}×{size}")
            } else {
                format!("{each:.1}×{size}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
