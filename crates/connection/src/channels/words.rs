//! Where the connections' channel lists keep their words: [`Words`], an array of
//! 4-byte words behind one 8-byte pointer, in blocks of a few fixed sizes carved
//! from pages the process shares.
//!
//! Why not the allocator (hand-rolled because the per-connection budget forces it):
//! a connection's list is one small, long-lived allocation made among the connect's
//! short-lived ones (the request's buffers, the join's messages). glibc gives each
//! chunk an 8-byte header and rounds it to 16 bytes (a 1-channel list of 24 bytes
//! took 32), and the short-lived chunks freed around the lists stay as holes the
//! next connect's do not fit (a held 1-channel server: ~30 B a connection free in
//! holes). Here a list of one word is kept in the pointer's own 8 bytes (a
//! WebSocket in one channel: nothing beside its connection), a block has no header
//! (its first word is the length), the smallest is 12 bytes, and a class's pages
//! hold only lists, so a block given back is the next list's of that size. A class
//! whose blocks are all given back gives its pages back to the allocator.
//! Fuzzed through the connection core (`core` target), and tested below against a
//! plain `Vec`.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ops::{Deref, DerefMut, Range};
use std::ptr::NonNull;
use std::sync::Mutex;

/// Block sizes in words, the length word included. A list longer than the last
/// (a placed connection past 63 streams) is one allocation of its exact size.
const CLASSES: [usize; 14] = [3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256];
/// Words a page holds (32 KiB).
const PAGE: usize = 8192;

/// The class of a block holding `len` words besides its length (`None`: too long,
/// an allocation of its own).
fn class_of(len: usize) -> Option<usize> {
    CLASSES.iter().position(|&c| c > len)
}

fn layout(words: usize) -> Layout {
    Layout::array::<u32>(words).expect("a list's size fits a layout")
}

/// One class's pages and the blocks given back.
struct Class {
    pages: Vec<Page>,
    /// Blocks carved from the pages so far (the next one's place).
    made: usize,
    /// A given-back block, which holds the next (as an unaligned address in its
    /// first two words: a block is at least 12 bytes and 4-byte aligned).
    free: Option<NonNull<u32>>,
    /// Blocks held by lists.
    used: usize,
}

/// A page's memory, owned by its class.
struct Page(NonNull<u32>);

// SAFETY: a page is plain memory; only the pool (under its lock) and the one
// `Words` that took a block of it touch it.
unsafe impl Send for Page {}
unsafe impl Send for Class {}

impl Class {
    const fn new() -> Class {
        Class {
            pages: Vec::new(),
            made: 0,
            free: None,
            used: 0,
        }
    }

    fn take(&mut self, size: usize) -> NonNull<u32> {
        self.used += 1;
        if let Some(block) = self.free {
            // SAFETY: a given-back block holds the next one's address in its first
            // 8 bytes, written by `give`.
            self.free = unsafe {
                block
                    .as_ptr()
                    .cast::<Option<NonNull<u32>>>()
                    .read_unaligned()
            };
            return block;
        }
        let per_page = PAGE / size;
        if self.made == self.pages.len() * per_page {
            // SAFETY: the layout is non-zero.
            let page = unsafe { alloc(layout(PAGE)) }.cast::<u32>();
            let page = NonNull::new(page).unwrap_or_else(|| handle_alloc_error(layout(PAGE)));
            self.pages.push(Page(page));
        }
        let (page, at) = (self.made / per_page, self.made % per_page);
        self.made += 1;
        // SAFETY: `at * size + size <= PAGE`: the block lies inside the page.
        unsafe { self.pages[page].0.add(at * size) }
    }

    fn give(&mut self, block: NonNull<u32>) {
        self.used -= 1;
        if self.used == 0 {
            for page in self.pages.drain(..) {
                // SAFETY: allocated by `take` with this layout; no block of it is held.
                unsafe { dealloc(page.0.as_ptr().cast(), layout(PAGE)) };
            }
            (self.made, self.free) = (0, None);
            return;
        }
        // SAFETY: the block is at least 12 bytes, given back by its only holder.
        unsafe {
            block
                .as_ptr()
                .cast::<Option<NonNull<u32>>>()
                .write_unaligned(self.free)
        };
        self.free = Some(block);
    }
}

/// The process's pool, one lock for all classes: lists are made and resized on a
/// connect, a subscribe or a leave, not per message.
static POOL: Mutex<[Class; CLASSES.len()]> = Mutex::new([const { Class::new() }; CLASSES.len()]);

/// A block for `len` words besides its first (which the caller writes).
fn take(len: usize) -> NonNull<u32> {
    match class_of(len) {
        Some(c) => POOL.lock().unwrap_or_else(|e| e.into_inner())[c].take(CLASSES[c]),
        None => {
            // SAFETY: the layout is non-zero.
            let p = unsafe { alloc(layout(len + 1)) }.cast::<u32>();
            NonNull::new(p).unwrap_or_else(|| handle_alloc_error(layout(len + 1)))
        }
    }
}

/// Gives back `block`, holding `len` words besides its length.
fn give(block: NonNull<u32>, len: usize) {
    match class_of(len) {
        Some(c) => POOL.lock().unwrap_or_else(|e| e.into_inner())[c].give(block),
        // SAFETY: allocated by `take` with this layout.
        None => unsafe { dealloc(block.as_ptr().cast(), layout(len + 1)) },
    }
}

/// An array of words with a byte of its owner's (`meta`), in 8 bytes: a list of
/// one word or none is kept inside them (an 8-byte pointer, free for a
/// connection's one channel), a longer one in a block of the pool whose first
/// word holds its length and the byte. Every word is initialised (new words are
/// zero).
///
/// Inside the 8 bytes, bit 0 set tells the inline form from a block's address
/// (4-byte aligned, never odd): the low half holds the marker, the length (bit 1)
/// and the byte (bits 8–15), the high half the word. Little-endian 64-bit only,
/// where the high half is the second `u32` of the 8 bytes (checked below).
pub(super) struct Words {
    block: NonNull<u32>,
}

const _: () = assert!(cfg!(target_endian = "little") && usize::BITS == 64);

/// The inline form's marker.
const INLINE: usize = 1;
/// A block's first word: the length below, the byte above.
const LEN_BITS: u32 = 24;

// SAFETY: a `Words` owns its block alone, as a `Box<[u32]>` owns its memory.
unsafe impl Send for Words {}
unsafe impl Sync for Words {}

impl Words {
    /// `words` with the byte `meta`.
    pub(super) fn new(meta: u8, words: &[u32]) -> Words {
        if let [] | [_] = words {
            let word = words.first().map_or(0, |&w| w as usize);
            let bits = INLINE | words.len() << 1 | usize::from(meta) << 8 | word << 32;
            // Never read through: an odd value is the inline form, not an address.
            let block = NonNull::new(bits as *mut u32).expect("bit 0 is set");
            return Words { block };
        }
        let block = take(words.len());
        // SAFETY: the new block holds `words.len()` words besides its first, which
        // is written here (the length and the byte).
        unsafe {
            block.write(words.len() as u32 | u32::from(meta) << LEN_BITS);
            std::ptr::copy_nonoverlapping(words.as_ptr(), block.add(1).as_ptr(), words.len());
        }
        Words { block }
    }

    fn bits(&self) -> usize {
        self.block.as_ptr() as usize
    }

    fn inline(&self) -> bool {
        self.bits() & INLINE != 0
    }

    /// The block's first word (not inline).
    fn head(&self) -> u32 {
        // SAFETY: not inline: a block of the pool or of its own, its first word set.
        unsafe { self.block.read() }
    }

    /// The owner's byte.
    pub(super) fn meta(&self) -> u8 {
        match self.inline() {
            true => (self.bits() >> 8) as u8,
            false => (self.head() >> LEN_BITS) as u8,
        }
    }

    /// Makes it `len` words long: the first ones kept, any new ones zero. It moves
    /// only when its form or size class changes.
    pub(super) fn resize(&mut self, len: usize) {
        let old = self.len();
        let keep = old.min(len);
        if !self.inline() && len > 1 && class_of(old).is_some() && class_of(old) == class_of(len) {
            // SAFETY: the block holds its class's words, at least `len` besides
            // its first; the words past `keep` are zeroed before the length
            // covers them.
            unsafe {
                self.block.add(1 + keep).write_bytes(0, len - keep);
                self.block
                    .write(len as u32 | u32::from(self.meta()) << LEN_BITS);
            }
            return;
        }
        let mut words = self[..keep].to_vec();
        words.resize(len, 0);
        *self = Words::new(self.meta(), &words);
    }

    /// Takes the words of `range` out, moving the rest down.
    pub(super) fn remove(&mut self, range: Range<usize>) {
        let len = self.len();
        self.copy_within(range.end..len, range.start);
        self.resize(len - range.len());
    }

    /// Where the words are, and how many.
    fn raw(&self) -> (*const u32, usize) {
        match self.inline() {
            // The high half of the 8 bytes (little-endian).
            true => {
                let at = std::ptr::from_ref(&self.block).cast::<u32>();
                (at.wrapping_add(1), (self.bits() >> 1) & 1)
            }
            // SAFETY: a block's words follow its first.
            false => (
                unsafe { self.block.add(1).as_ptr() },
                (self.head() & ((1 << LEN_BITS) - 1)) as usize,
            ),
        }
    }
}

impl Deref for Words {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        let (at, len) = self.raw();
        // SAFETY: `raw` gives `len` initialised words that live as long as `self`
        // (inside it, or in its block).
        unsafe { std::slice::from_raw_parts(at, len) }
    }
}

impl DerefMut for Words {
    fn deref_mut(&mut self) -> &mut [u32] {
        let (at, len) = self.raw();
        let at = match self.inline() {
            true => std::ptr::from_mut(&mut self.block)
                .cast::<u32>()
                .wrapping_add(1),
            false => at.cast_mut(),
        };
        // SAFETY: as `deref`, and `&mut self` holds them alone (inline: the high
        // half of its own 8 bytes, reached through `&mut self`).
        unsafe { std::slice::from_raw_parts_mut(at, len) }
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        if !self.inline() {
            give(self.block, self.len());
        }
    }
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_keeps_its_words_through_growth_removal_and_every_class() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut lists: Vec<(Words, Vec<u32>, u8)> = Vec::new();
        for step in 0..20_000u32 {
            match next(6) {
                0 | 1 if lists.len() < 300 => {
                    let n = next(40);
                    let model: Vec<u32> = (0..n).map(|i| step ^ i as u32).collect();
                    let meta = step as u8;
                    lists.push((Words::new(meta, &model), model, meta));
                }
                2 if !lists.is_empty() => {
                    let i = next(lists.len());
                    let (w, m, _) = &mut lists[i];
                    let most = if next(20) == 0 { 700 } else { 60 };
                    let len = next(most);
                    w.resize(len);
                    m.resize(len, 0);
                }
                3 if !lists.is_empty() => {
                    let i = next(lists.len());
                    let (w, m, _) = &mut lists[i];
                    if !m.is_empty() {
                        let at = next(m.len());
                        let span = next(m.len() - at + 1);
                        let end = at + span;
                        w.remove(at..end);
                        m.drain(at..end);
                    }
                }
                4 if !lists.is_empty() => {
                    let i = next(lists.len());
                    let (w, m, _) = &mut lists[i];
                    if !m.is_empty() {
                        let at = next(m.len());
                        w[at] = step;
                        m[at] = step;
                    }
                }
                _ if !lists.is_empty() => {
                    let i = next(lists.len());
                    drop(lists.swap_remove(i));
                }
                _ => {}
            }
            for (w, m, meta) in &lists {
                assert_eq!(&w[..], &m[..], "step {step}");
                assert_eq!(w.meta(), *meta, "step {step}");
            }
        }
    }

    #[test]
    fn a_list_is_8_bytes_one_word_stays_inside_them_and_a_short_one_takes_12_bytes() {
        assert_eq!(std::mem::size_of::<Option<Words>>(), 8);
        for words in [&[][..], &[u32::MAX][..]] {
            let mut w = Words::new(0xa5, words);
            assert!(w.inline(), "{words:?}");
            assert_eq!((&w[..], w.meta()), (words, 0xa5));
            w.resize(2);
            assert!(!w.inline());
            assert_eq!((w.len(), w.meta()), (2, 0xa5));
            w.remove(0..1);
            assert!(w.inline());
            assert_eq!(w.meta(), 0xa5);
        }
        assert_eq!(class_of(2), Some(0), "two words and the length");
        assert_eq!(CLASSES[0] * 4, 12);
        assert_eq!(class_of(255), Some(CLASSES.len() - 1));
        assert_eq!(
            class_of(256),
            None,
            "longer lists are allocations of their own"
        );
    }
}
