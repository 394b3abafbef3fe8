//! Where every small channel of a router keeps its subscribers' words: fixed
//! blocks of [`BLOCK`] words in pages, each block linked to the next of its chain.
//!
//! Why not a `Vec` per channel: in a join storm every channel grows one member at
//! a time, all at once, and a growing array leaves its old allocation free each
//! time; those freed arrays are too small for any other channel's next growth, so
//! they stay as holes (measured: ~95 B a connection at 15,000 connections in 20
//! channels of 100 members, ~10 % of the process). A block is never moved or
//! reallocated: a chain grows by one block and gives its last one back when it
//! empties, and any channel takes a given-back block next. The spare is at most a
//! block's worth a channel, and the link one word in [`BLOCK`].

/// Words a block holds, the last one its link.
const BLOCK: usize = 8;
/// Words of a subscriber a block holds.
pub(super) const DATA: usize = BLOCK - 1;
/// Blocks a page holds (32 KiB pages: allocated once, never reallocated).
const PAGE_BLOCKS: usize = 512;
/// No block (the end of a chain, an empty chain, an empty free list).
const NONE: u32 = u32::MAX;

/// The blocks of one router's channels.
#[derive(Debug)]
pub(super) struct Blocks {
    pages: Vec<Box<[u64]>>,
    /// Given-back blocks, linked through their link words.
    free: u32,
    /// Blocks made (in chains or given back): the next new one's number.
    made: u32,
}

impl Default for Blocks {
    fn default() -> Self {
        Blocks {
            pages: Vec::new(),
            free: NONE,
            made: 0,
        }
    }
}

impl Blocks {
    fn word(&self, b: u32, i: usize) -> u64 {
        let b = b as usize;
        self.pages[b / PAGE_BLOCKS][(b % PAGE_BLOCKS) * BLOCK + i]
    }

    fn word_mut(&mut self, b: u32, i: usize) -> &mut u64 {
        let b = b as usize;
        &mut self.pages[b / PAGE_BLOCKS][(b % PAGE_BLOCKS) * BLOCK + i]
    }

    fn next(&self, b: u32) -> u32 {
        self.word(b, DATA) as u32
    }

    fn set_next(&mut self, b: u32, next: u32) {
        *self.word_mut(b, DATA) = u64::from(next);
    }

    /// A block for a chain's end: a given-back one, else a new one.
    fn take(&mut self) -> u32 {
        let b = match self.free {
            NONE => {
                let b = self.made;
                if b as usize == self.pages.len() * PAGE_BLOCKS {
                    self.pages
                        .push(vec![0; PAGE_BLOCKS * BLOCK].into_boxed_slice());
                }
                self.made += 1;
                b
            }
            b => {
                self.free = self.next(b);
                b
            }
        };
        self.set_next(b, NONE);
        b
    }

    /// Gives `b` back.
    fn give(&mut self, b: u32) {
        self.set_next(b, self.free);
        self.free = b;
    }

    /// Bytes of blocks in chains: those made less those given back.
    #[cfg(test)]
    pub(super) fn used_bytes(&self) -> usize {
        let mut free = 0;
        let mut b = self.free;
        while b != NONE {
            free += 1;
            b = self.next(b);
        }
        (self.made as usize - free) * BLOCK * 8
    }

    /// Bytes of every page.
    pub(super) fn heap_bytes(&self) -> usize {
        self.pages.len() * PAGE_BLOCKS * BLOCK * 8
    }
}

/// A place in a chain: a block and a word in it.
#[derive(Clone, Copy)]
struct Cursor {
    block: u32,
    at: usize,
}

impl Cursor {
    fn step(&mut self, blocks: &Blocks) {
        self.at += 1;
        if self.at == DATA {
            self.at = 0;
            self.block = blocks.next(self.block);
        }
    }
}

/// One channel's words: a chain of blocks, 12 bytes.
#[derive(Debug)]
pub(super) struct Chain {
    first: u32,
    last: u32,
    len: u32,
}

impl Default for Chain {
    fn default() -> Self {
        Chain {
            first: NONE,
            last: NONE,
            len: 0,
        }
    }
}

impl Chain {
    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    /// Blocks held.
    pub(super) fn blocks(&self) -> usize {
        self.len().div_ceil(DATA)
    }

    /// The words in order.
    pub(super) fn iter<'a>(&self, blocks: &'a Blocks) -> impl Iterator<Item = u64> + 'a {
        let mut cur = Cursor {
            block: self.first,
            at: 0,
        };
        (0..self.len()).map(move |_| {
            let w = blocks.word(cur.block, cur.at);
            cur.step(blocks);
            w
        })
    }

    /// Adds `w` at the end.
    pub(super) fn push(&mut self, blocks: &mut Blocks, w: u64) {
        let at = self.len() % DATA;
        if at == 0 {
            let b = blocks.take();
            match self.last {
                NONE => self.first = b,
                last => blocks.set_next(last, b),
            }
            self.last = b;
        }
        *blocks.word_mut(self.last, at) = w;
        self.len += 1;
    }

    /// The cursor at word `i`.
    fn cursor(&self, blocks: &Blocks, i: usize) -> Cursor {
        let mut block = self.first;
        for _ in 0..i / DATA {
            block = blocks.next(block);
        }
        Cursor {
            block,
            at: i % DATA,
        }
    }

    /// Takes out the `k` words from word `at`, the words after them moving up.
    pub(super) fn remove(&mut self, blocks: &mut Blocks, at: usize, k: usize) {
        debug_assert!(at + k <= self.len());
        let mut to = self.cursor(blocks, at);
        let mut from = self.cursor(blocks, at + k);
        for _ in at + k..self.len() {
            let w = blocks.word(from.block, from.at);
            *blocks.word_mut(to.block, to.at) = w;
            to.step(blocks);
            from.step(blocks);
        }
        self.len -= k as u32;
        self.truncate_blocks(blocks);
    }

    /// Gives back the blocks past the words held.
    fn truncate_blocks(&mut self, blocks: &mut Blocks) {
        let keep = self.blocks();
        if keep == 0 {
            self.clear(blocks);
            return;
        }
        let last = self.cursor(blocks, (keep - 1) * DATA).block;
        let mut gone = blocks.next(last);
        while gone != NONE {
            let next = blocks.next(gone);
            blocks.give(gone);
            gone = next;
        }
        blocks.set_next(last, NONE);
        self.last = last;
    }

    /// Gives every block back.
    pub(super) fn clear(&mut self, blocks: &mut Blocks) {
        let mut b = self.first;
        while b != NONE {
            let next = blocks.next(b);
            blocks.give(b);
            b = next;
        }
        *self = Chain::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(c: &Chain, blocks: &Blocks) -> Vec<u64> {
        c.iter(blocks).collect()
    }

    #[test]
    fn chains_grow_shrink_and_share_given_back_blocks() {
        let mut blocks = Blocks::default();
        let (mut a, mut b) = (Chain::default(), Chain::default());
        for w in 0..40 {
            a.push(&mut blocks, w);
            b.push(&mut blocks, 1000 + w);
        }
        assert_eq!(words(&a, &blocks), (0..40).collect::<Vec<_>>());
        assert_eq!(words(&b, &blocks), (1000..1040).collect::<Vec<_>>());
        assert_eq!(blocks.used_bytes(), 2 * 40usize.div_ceil(DATA) * BLOCK * 8);
        // Out of the middle, across a block's end, and the last word.
        a.remove(&mut blocks, 5, 2);
        a.remove(&mut blocks, DATA - 1, 2);
        a.remove(&mut blocks, a.len() - 1, 1);
        let mut expected: Vec<u64> = (0..40).collect();
        expected.drain(5..7);
        expected.drain(DATA - 1..DATA + 1);
        expected.pop();
        assert_eq!(words(&a, &blocks), expected);
        assert_eq!(
            blocks.used_bytes(),
            (a.blocks() + b.blocks()) * BLOCK * 8,
            "emptied blocks given back"
        );
        let pages = blocks.pages.len();
        while a.len() > 0 {
            a.remove(&mut blocks, 0, 1);
        }
        assert_eq!((a.first, a.last), (NONE, NONE));
        for w in 0..35 {
            a.push(&mut blocks, w);
        }
        assert_eq!(words(&a, &blocks), (0..35).collect::<Vec<_>>());
        assert_eq!(blocks.pages.len(), pages, "given-back blocks taken again");
        assert_eq!(words(&b, &blocks), (1000..1040).collect::<Vec<_>>());
        a.clear(&mut blocks);
        b.clear(&mut blocks);
        assert_eq!(blocks.used_bytes(), 0);
    }

    #[test]
    fn a_router_past_one_page_keeps_every_chain() {
        let mut blocks = Blocks::default();
        let mut chains: Vec<Chain> = (0..300).map(|_| Chain::default()).collect();
        for round in 0..20u64 {
            for (i, c) in chains.iter_mut().enumerate() {
                c.push(&mut blocks, round * 1000 + i as u64);
            }
        }
        assert!(blocks.pages.len() > 1);
        for (i, c) in chains.iter().enumerate() {
            let expected: Vec<u64> = (0..20).map(|r| r * 1000 + i as u64).collect();
            assert_eq!(words(c, &blocks), expected);
        }
        assert_eq!(blocks.used_bytes(), 300 * 3 * BLOCK * 8);
    }
}
