//! What one HTTP/2 connection may make the server do for nothing in return: frames
//! that cost the server work but carry no request (SETTINGS, PING, PRIORITY, unknown
//! types, empty DATA and header fragments) and streams that end without an answer
//! (reset by the peer right after opening them — "rapid reset", CVE-2023-44487 —, or
//! refused by us). Each is a leaky bucket in wheel ticks: a burst up to its size,
//! then its steady rate; past it the connection gets GOAWAY ENHANCE_YOUR_CALM.
//!
//! Honest clients stay far below: a browser sends one SETTINGS and a few PRIORITY
//! frames per connection and resets a stream when a page closes its EventSource; a
//! back-end publishing over one connection opens thousands of streams a second, and
//! each of those is answered, so it costs nothing here.

use connection::Tick;

/// One leaky bucket: `level` falls by one per tick (100 a second) since `at`.
#[derive(Debug, Clone, Copy)]
pub(in crate::pump) struct Bucket {
    level: u32,
    at: Tick,
}

impl Bucket {
    pub(in crate::pump) fn new(now: Tick) -> Bucket {
        Bucket { level: 0, at: now }
    }

    /// Counts one event at `now`: false once more than `size` are pending.
    pub(in crate::pump) fn take(&mut self, now: Tick, size: u32) -> bool {
        let drained = now.wrapping_sub(self.at);
        // A clock that went backwards (never, but wrapping ticks) drains nothing.
        if drained < u32::MAX / 2 {
            self.level = self.level.saturating_sub(drained);
            self.at = now;
        }
        self.level += 1;
        self.level <= size
    }
}

/// Frames with no request in them: a burst of this many, then 100 a second.
pub(in crate::pump) const IDLE_FRAMES: u32 = 500;
/// Streams that end unanswered (reset by the peer or refused by us): a burst of this
/// many, then 100 a second.
pub(in crate::pump) const UNANSWERED_STREAMS: u32 = 200;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_steady_rate() {
        let mut b = Bucket::new(0);
        assert!((0..10).all(|_| b.take(0, 10)));
        assert!(!b.take(0, 10), "the 11th at once");
        // Five ticks later five more fit.
        let mut b = Bucket::new(0);
        (0..10).for_each(|_| {
            b.take(0, 10);
        });
        assert!((0..5).all(|_| b.take(5, 10)));
        assert!(!b.take(5, 10));
        // One a tick forever is fine.
        let mut b = Bucket::new(100);
        assert!((100..10_000).all(|t| b.take(t, 2)));
    }

    #[test]
    fn ticks_wrap() {
        let mut b = Bucket::new(u32::MAX - 1);
        assert!(b.take(u32::MAX - 1, 1));
        assert!(b.take(3, 1), "drained across the wrap");
    }
}
