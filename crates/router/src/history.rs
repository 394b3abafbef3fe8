//! The bounded history ring of one user (SPEC B6): the last messages delivered to
//! the user, with their per-user sequence numbers, so SSE `Last-Event-ID`,
//! long-poll `since` and WebSocket / stream resume lose nothing within the window
//! and report a gap beyond it. It is allocated only when a first message reaches
//! the user, so an idle connection pays nothing for it.
//!
//! Bounds: at most `capacity` messages and at most `max_bytes` charged bytes
//! ([`charge`]: payload plus [`ENTRY_OVERHEAD`]); the oldest go first. The router
//! also trims rings from the front to keep the total of all rings bounded (`budget`).
//!
//! Each ring has an *epoch*, fixed when it is created: sequence numbers restart at
//! 1 in a new ring (a restarted server, or history dropped after its ttl), and the
//! epoch is what tells a client's position in an old ring from one in this ring.
//!
//! Sequence numbers are implicit: the newest message has `seq`, the one before it
//! `seq - 1`, and so on; storing only the `Arc` keeps an entry at 8 bytes.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use crate::Message;

/// Bytes charged per kept message on top of its payload: the ring's `Arc` slot
/// (8) and the message's share of the ring's spare capacity and allocator slack.
pub const ENTRY_OVERHEAD: usize = 16;

/// Bytes a message is charged in a ring.
pub fn charge(msg: &Message) -> usize {
    msg.payload.len() + ENTRY_OVERHEAD
}

/// A change to history that a durable copy (`--history-store`) must follow, in
/// the order the router made it. Collected only when `RouterConfig::journal` is
/// set; the router never reads it back.
#[derive(Clone, Debug)]
pub enum Journal {
    /// `user`'s ring kept `msg` as number `seq` of `epoch` (`seq == 1`: a new
    /// ring, whatever was kept before it is gone).
    Kept {
        user: crate::UserId,
        epoch: u32,
        seq: u64,
        msg: Arc<Message>,
    },
    /// `user`'s history is gone (ttl expiry, or a message too big left a hole).
    Forgot(crate::UserId),
}

/// Issues ring epochs: a mix of the router's seed and a counter, so rings created
/// by one router never share an epoch (until 2^32 of them), and nearby seeds (two
/// start times a second apart) do not give overlapping sequences of epochs.
#[derive(Debug)]
pub(crate) struct Epochs {
    pub seed: u64,
    pub issued: u64,
}

impl Epochs {
    pub fn next(&mut self) -> u32 {
        self.issued += 1;
        let mut x = self.seed ^ self.issued.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        // Murmur3's 64-bit finaliser.
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^= x >> 33;
        (x >> 32) as u32
    }
}

/// Recent messages of one user plus their sequence counter.
#[derive(Debug)]
pub struct Ring {
    /// Sequence number of the newest message (0 before the first).
    seq: u64,
    /// When the user's last connection closed; `None` while online.
    pub(crate) offline_since: Option<Instant>,
    /// Newest at the back.
    buf: VecDeque<Arc<Message>>,
    /// This ring's incarnation (see the module doc).
    epoch: u32,
    /// Charged bytes of the kept messages (≤ the per-user limit ≤ u32::MAX).
    bytes: u32,
}

/// What one [`Ring::push`] did, for the router's totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pushed {
    /// The message's sequence number.
    pub seq: u64,
    /// Whether the message is kept (false: history off, or the message alone is
    /// over the per-user byte limit).
    pub stored: bool,
    /// Charged bytes added (the message, if stored).
    pub added: usize,
    /// Messages and charged bytes dropped from the front to make room.
    pub dropped: usize,
    pub dropped_bytes: usize,
}

impl Ring {
    pub fn new(epoch: u32) -> Ring {
        Ring::resume(epoch, 0)
    }

    /// A ring of `epoch` whose next message gets `seq + 1`: a durable history
    /// read back at start continues its numbers (the caller pushes what was kept
    /// after setting `seq` to the first kept message's number minus one).
    pub fn resume(epoch: u32, seq: u64) -> Ring {
        Ring {
            seq,
            offline_since: None,
            buf: VecDeque::new(),
            epoch,
            bytes: 0,
        }
    }

    /// Appends `msg` (next sequence number), dropping the oldest entries beyond
    /// `capacity` messages or `max_bytes` charged bytes.
    pub fn push(&mut self, msg: &Arc<Message>, capacity: usize, max_bytes: usize) -> Pushed {
        self.seq += 1;
        let mut p = Pushed {
            seq: self.seq,
            ..Pushed::default()
        };
        let cost = charge(msg);
        let max_bytes = max_bytes.min(u32::MAX as usize);
        if capacity == 0 || cost > max_bytes {
            // Not kept: everything older is now beyond a hole, and the ring must
            // not keep messages older than one it lost (reads would skip the hole).
            while self.buf.front().is_some() {
                p.dropped += 1;
                p.dropped_bytes += self.pop_front();
            }
            return p;
        }
        while self.buf.len() >= capacity || self.bytes as usize + cost > max_bytes {
            p.dropped += 1;
            p.dropped_bytes += self.pop_front();
        }
        self.buf.push_back(Arc::clone(msg));
        self.bytes += cost as u32;
        p.stored = true;
        p.added = cost;
        p
    }

    /// Drops the oldest kept message; returns its charged bytes (0 if empty).
    pub fn pop_front(&mut self) -> usize {
        match self.buf.pop_front() {
            Some(m) => {
                let c = charge(&m);
                self.bytes -= c as u32;
                c
            }
            None => 0,
        }
    }

    /// Sequence number of the newest message.
    pub fn last(&self) -> u64 {
        self.seq
    }

    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Messages kept.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Charged bytes kept.
    pub fn bytes(&self) -> usize {
        self.bytes as usize
    }

    /// Sequence number of the oldest message still kept (`last + 1` when empty).
    pub fn first_kept(&self) -> u64 {
        self.seq + 1 - self.buf.len() as u64
    }

    /// What a client at `(epoch, since)` should get: `(messages, gap)`.
    ///
    /// Recoverable position (same epoch or none given, `since ≤ last`): the
    /// messages after `since`; `gap` when some of those are no longer kept.
    /// Otherwise (another epoch: a restart or a dropped history; or `since` ahead of
    /// `last`): everything still kept, with `gap` set, so the client moves to this
    /// ring's numbers instead of waiting for numbers that will never come.
    pub fn read(&self, epoch: Option<u32>, since: u64) -> (Vec<(u64, Arc<Message>)>, bool) {
        let first = self.first_kept();
        let foreign = epoch.is_some_and(|e| e != self.epoch) || since > self.seq;
        let (skip, gap) = if foreign {
            (0, true)
        } else {
            (since.saturating_sub(first - 1) as usize, since + 1 < first)
        };
        let out = self
            .buf
            .iter()
            .enumerate()
            .skip(skip)
            .map(|(i, m)| (first + i as u64, Arc::clone(m)))
            .collect();
        (out, gap)
    }

    /// Heap bytes held by the ring (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Ring>() + self.buf.capacity() * std::mem::size_of::<Arc<Message>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(n: u8) -> Arc<Message> {
        Arc::new(Message::to_subject(1, bytes::Bytes::from(vec![n])))
    }

    fn seqs(m: &[(u64, Arc<Message>)]) -> Vec<u64> {
        m.iter().map(|(s, _)| *s).collect()
    }

    const BIG: usize = usize::MAX;

    #[test]
    fn keeps_the_newest_and_reports_gaps() {
        let mut r = Ring::new(7);
        for n in 1..=10u8 {
            assert_eq!(r.push(&msg(n), 4, BIG).seq, u64::from(n));
        }
        assert_eq!(r.first_kept(), 7);
        let (m, gap) = r.read(None, 8);
        assert!(!gap);
        assert_eq!(seqs(&m), vec![9, 10]);
        assert_eq!(m[0].1.payload[0], 9);
        let (m, gap) = r.read(Some(7), 6);
        assert!(!gap, "6 is just before the first kept: nothing lost");
        assert_eq!(m.len(), 4);
        let (m, gap) = r.read(None, 2);
        assert!(gap);
        assert_eq!(m.len(), 4);
        let (m, gap) = r.read(Some(7), 10);
        assert!(m.is_empty() && !gap);
    }

    #[test]
    fn foreign_positions_get_everything_kept_and_a_gap() {
        let mut r = Ring::new(7);
        for n in 1..=3u8 {
            r.push(&msg(n), 8, BIG);
        }
        // Ahead of us: our state was lost (restart or expiry without an epoch).
        let (m, gap) = r.read(None, 11);
        assert!(gap);
        assert_eq!(seqs(&m), vec![1, 2, 3], "the client moves to our numbers");
        // Another epoch, even with a plausible seq.
        let (m, gap) = r.read(Some(8), 2);
        assert!(gap);
        assert_eq!(seqs(&m), vec![1, 2, 3]);
        assert_eq!(r.epoch(), 7);
    }

    #[test]
    fn a_resumed_ring_continues_its_numbers() {
        let mut r = Ring::resume(9, 41);
        assert_eq!(r.push(&msg(42), 8, BIG).seq, 42);
        let (m, gap) = r.read(Some(9), 41);
        assert_eq!((seqs(&m), gap), (vec![42], false));
        let (m, gap) = r.read(Some(9), 40);
        assert_eq!((seqs(&m), gap), (vec![42], true), "41 was not restored");
    }

    #[test]
    fn zero_capacity_counts_only() {
        let mut r = Ring::new(0);
        r.push(&msg(1), 0, BIG);
        r.push(&msg(2), 0, BIG);
        assert_eq!(r.last(), 2);
        let (m, gap) = r.read(None, 0);
        assert!(m.is_empty() && gap);
        let (m, gap) = r.read(None, 2);
        assert!(m.is_empty() && !gap);
    }

    #[test]
    fn byte_limit_drops_the_oldest_and_refuses_a_message_alone_too_big() {
        let mut r = Ring::new(0);
        let one = charge(&msg(0));
        for n in 1..=5u8 {
            let p = r.push(&msg(n), 100, 3 * one);
            assert!(p.stored);
            assert_eq!(p.added, one);
        }
        assert_eq!((r.len(), r.bytes(), r.first_kept()), (3, 3 * one, 3));
        let huge = Arc::new(Message::to_subject(
            1,
            bytes::Bytes::from(vec![0u8; 3 * one]),
        ));
        let p = r.push(&huge, 100, 3 * one);
        assert!(!p.stored);
        assert_eq!((p.seq, p.dropped, p.dropped_bytes), (6, 3, 3 * one));
        assert_eq!((r.len(), r.bytes()), (0, 0));
        let (m, gap) = r.read(None, 4);
        assert!(m.is_empty() && gap, "5 and 6 are lost");
        assert!(r.push(&msg(7), 100, 3 * one).stored);
        let (m, gap) = r.read(None, 6);
        assert_eq!((seqs(&m), gap), (vec![7], false));
    }
}
