//! The bounded history ring of one user (SPEC B6): the last `capacity` messages
//! delivered to the user, with their per-user sequence numbers, so SSE
//! `Last-Event-ID`, long-poll `since` and WebSocket resume lose nothing within the
//! window and report a gap beyond it. It is allocated only when a first message
//! reaches the user, so an idle connection pays nothing for it.
//!
//! Sequence numbers are implicit: the newest message has `seq`, the one before it
//! `seq - 1`, and so on; storing only the `Arc` keeps an entry at 8 bytes.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use crate::Message;

/// Recent messages of one user plus their sequence counter.
#[derive(Debug)]
pub struct Ring {
    /// Sequence number of the newest message (0 before the first).
    seq: u64,
    /// When the user's last connection closed; `None` while online.
    pub(crate) offline_since: Option<Instant>,
    /// Newest at the back; grows on demand up to `capacity`.
    buf: VecDeque<Arc<Message>>,
}

impl Ring {
    pub fn new() -> Ring {
        Ring {
            seq: 0,
            offline_since: None,
            buf: VecDeque::new(),
        }
    }

    /// Appends `msg`, dropping the oldest entry beyond `capacity`; returns its seq.
    pub fn push(&mut self, msg: &Arc<Message>, capacity: usize) -> u64 {
        self.seq += 1;
        if capacity == 0 {
            return self.seq;
        }
        while self.buf.len() >= capacity {
            self.buf.pop_front();
        }
        self.buf.push_back(Arc::clone(msg));
        self.seq
    }

    /// Sequence number of the newest message.
    pub fn last(&self) -> u64 {
        self.seq
    }

    /// Sequence number of the oldest message still kept (`last + 1` when empty).
    pub fn first_kept(&self) -> u64 {
        self.seq + 1 - self.buf.len() as u64
    }

    /// Messages with `seq > since`, oldest first, and whether some were dropped.
    pub fn since(&self, since: u64) -> (Vec<(u64, Arc<Message>)>, bool) {
        let first = self.first_kept();
        if since > self.seq {
            // The client saw numbers we never issued: our state was lost.
            return (Vec::new(), true);
        }
        let gap = since + 1 < first;
        let skip = since.saturating_sub(first - 1) as usize;
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

impl Default for Ring {
    fn default() -> Self {
        Ring::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(n: u8) -> Arc<Message> {
        Arc::new(Message {
            subject: 1,
            payload: bytes::Bytes::from(vec![n]),
        })
    }

    #[test]
    fn keeps_the_newest_and_reports_gaps() {
        let mut r = Ring::new();
        for n in 1..=10u8 {
            assert_eq!(r.push(&msg(n), 4), u64::from(n));
        }
        assert_eq!(r.first_kept(), 7);
        let (m, gap) = r.since(8);
        assert!(!gap);
        assert_eq!(m.iter().map(|(s, _)| *s).collect::<Vec<_>>(), vec![9, 10]);
        assert_eq!(m[0].1.payload[0], 9);
        let (m, gap) = r.since(6);
        assert!(!gap, "6 is just before the first kept: nothing lost");
        assert_eq!(m.len(), 4);
        let (m, gap) = r.since(2);
        assert!(gap);
        assert_eq!(m.len(), 4);
        let (m, gap) = r.since(10);
        assert!(m.is_empty() && !gap);
        let (m, gap) = r.since(11);
        assert!(
            m.is_empty() && gap,
            "a future seq means our state was forgotten"
        );
    }

    #[test]
    fn zero_capacity_counts_only() {
        let mut r = Ring::new();
        r.push(&msg(1), 0);
        r.push(&msg(2), 0);
        assert_eq!(r.last(), 2);
        let (m, gap) = r.since(0);
        assert!(m.is_empty() && gap);
        let (m, gap) = r.since(2);
        assert!(m.is_empty() && !gap);
    }
}
