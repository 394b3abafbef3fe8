//! A loop's write side, what it knows without the sockets: the bytes queued on
//! them, the connections a merged delivery pass queued output on (flushed a slice at
//! a time, see `inbox`), and the io_uring ring (`--io-uring`) with the decision to
//! gather a pass's sends in it. The writes themselves go through the slab's sockets
//! (`io`).

use super::send_batch::{SendBatch, Sent, MIN_BATCH};
use connection::Outbox;
use std::ops::Range;
use std::os::fd::RawFd;

pub(super) struct Writer {
    /// `--io-uring`: a fan-out's sends gathered and submitted together.
    send_batch: Option<SendBatch>,
    /// A pass (a delivery, the timers) is gathering its sends in `send_batch`.
    batching: bool,
    /// Connections that got queued output during a merged delivery pass, flushed in
    /// order from `dirty_pos` (see `inbox`).
    dirty: Vec<usize>,
    dirty_pos: usize,
    /// Output bytes queued on this loop's sockets (mirrored into metrics each tick).
    queued: usize,
}

impl Writer {
    /// A writer sending through `ring` when there is one, else one `writev` each.
    pub(super) fn new(ring: Option<SendBatch>) -> Writer {
        Writer {
            send_batch: ring,
            batching: false,
            dirty: Vec::new(),
            dirty_pos: 0,
            queued: 0,
        }
    }

    /// Output bytes queued on the loop's sockets.
    pub(super) fn queued(&self) -> usize {
        self.queued
    }

    /// `bytes` more were queued behind a socket.
    pub(super) fn add_queued(&mut self, bytes: usize) {
        self.queued += bytes;
    }

    /// `bytes` queued left with a closed connection or moved on.
    pub(super) fn remove_queued(&mut self, bytes: usize) {
        self.queued -= bytes;
    }

    /// A connection's queue went from `before` bytes to `after`.
    pub(super) fn requeued(&mut self, before: usize, after: usize) {
        self.queued = self.queued + after - before;
    }

    /// A pass of `sends` sends starts: they are gathered in the ring when there is
    /// one and they are enough to save syscalls ([`MIN_BATCH`]).
    pub(super) fn start_pass(&mut self, sends: usize) {
        self.batching = self.send_batch.is_some() && sends >= MIN_BATCH;
    }

    /// The pass is over: sends go one by one again.
    pub(super) fn end_pass(&mut self) {
        self.batching = false;
    }

    /// A pass is gathering its sends.
    pub(super) fn batching(&self) -> bool {
        self.batching
    }

    /// Gathers the outbox's bytes for connection `index` (socket `fd`) in the ring;
    /// false if the ring refused them (or there is none): write them now.
    pub(super) fn gather(&mut self, index: usize, fd: RawFd, outbox: &Outbox) -> bool {
        self.send_batch
            .as_mut()
            .is_some_and(|batch| batch.add(index, fd, outbox))
    }

    /// The ring holds gathered bytes of connection `index`.
    pub(super) fn holds(&self, index: usize) -> bool {
        self.send_batch.as_ref().is_some_and(|b| b.holds(index))
    }

    /// The ring, taken out to submit what it gathered; `None` when there is no ring
    /// or nothing gathered.
    pub(super) fn take_gathered(&mut self) -> Option<SendBatch> {
        self.send_batch.take_if(|batch| !batch.is_empty())
    }

    /// The ring, taken out to flush `connections` queues at once; `None` when there
    /// is none or they are too few to save syscalls (flush them one by one).
    pub(super) fn take_for_flush(&mut self, connections: usize) -> Option<SendBatch> {
        let few = connections < MIN_BATCH;
        self.send_batch.take_if(|_| !few)
    }

    /// Submits `batch` (taken out of the writer) and puts it back — unless it
    /// failed: a ring that failed once is not trusted again, writev from then on.
    /// Returns what became of each send and how many were tried; give the sends
    /// back with [`Writer::recycle`] when done with them.
    pub(super) fn submit(&mut self, mut batch: SendBatch) -> (Vec<Sent>, usize) {
        let done = batch.submit();
        let tried = done.iter().filter(|s| !s.untried).count();
        self.send_batch = (!batch.failed()).then_some(batch);
        (done, tried)
    }

    /// Gives the ring its sends' storage back.
    pub(super) fn recycle(&mut self, done: Vec<Sent>) {
        if let Some(batch) = self.send_batch.as_mut() {
            batch.recycle(done);
        }
    }

    /// Connection `index` got output queued by a merged pass: flushed with the
    /// next slices.
    pub(super) fn mark_dirty(&mut self, index: usize) {
        self.dirty.push(index);
    }

    /// Queued connections are left to flush.
    pub(super) fn dirty_pending(&self) -> bool {
        self.dirty_pos < self.dirty.len()
    }

    /// The connection at position `i` of the list to flush.
    pub(super) fn dirty_at(&self, i: usize) -> usize {
        self.dirty[i]
    }

    /// The positions of the next at most `max` queued connections to flush (passed
    /// over from now on), or `None` once all are: the list is then emptied.
    pub(super) fn next_dirty_slice(&mut self, max: usize) -> Option<Range<usize>> {
        if !self.dirty_pending() {
            self.dirty.clear();
            self.dirty_pos = 0;
            return None;
        }
        let slice = self.dirty_pos..(self.dirty_pos + max).min(self.dirty.len());
        self.dirty_pos = slice.end;
        Some(slice)
    }

    /// After a mass disconnect: the flush list lets go of its memory, unless a pass
    /// still needs it.
    pub(super) fn shrink(&mut self) {
        if !self.dirty_pending() {
            self.dirty = Vec::new();
            self.dirty_pos = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Queued connections come out in the order queued, a slice at a time; one
    /// queued during the passes joins the last slice; the list empties at the end.
    #[test]
    fn the_flush_list_comes_out_in_slices_in_order() {
        let mut writer = Writer::new(None);
        assert_eq!(writer.next_dirty_slice(256), None);
        for index in 0..600 {
            writer.mark_dirty(index * 2);
        }
        assert!(writer.dirty_pending());
        assert_eq!(writer.next_dirty_slice(256), Some(0..256));
        assert_eq!(writer.dirty_at(255), 510);
        assert_eq!(writer.next_dirty_slice(256), Some(256..512));
        writer.mark_dirty(7);
        assert_eq!(writer.next_dirty_slice(256), Some(512..601));
        assert_eq!(writer.dirty_at(600), 7);
        assert!(!writer.dirty_pending());
        assert_eq!(writer.next_dirty_slice(256), None);
        writer.mark_dirty(3);
        assert_eq!(
            writer.next_dirty_slice(256),
            Some(0..1),
            "emptied, starts over"
        );
    }

    /// Shrinking never drops connections still to flush.
    #[test]
    fn shrinking_keeps_a_pending_flush_list() {
        let mut writer = Writer::new(None);
        writer.mark_dirty(1);
        writer.mark_dirty(2);
        writer.shrink();
        assert_eq!(writer.next_dirty_slice(1), Some(0..1));
        writer.shrink();
        assert_eq!(writer.next_dirty_slice(1), Some(1..2));
        writer.shrink();
        assert_eq!(writer.dirty.capacity(), 0);
        assert_eq!(writer.next_dirty_slice(1), None);
    }

    #[test]
    fn queued_bytes_follow_the_queues() {
        let mut writer = Writer::new(None);
        writer.add_queued(100);
        writer.requeued(100, 30);
        assert_eq!(writer.queued(), 30);
        writer.requeued(30, 50);
        writer.remove_queued(50);
        assert_eq!(writer.queued(), 0);
    }

    /// Without a ring nothing is gathered: every send is a `writev` at once.
    #[test]
    fn without_a_ring_no_pass_gathers() {
        let mut writer = Writer::new(None);
        writer.start_pass(10_000);
        assert!(!writer.batching());
        assert!(!writer.holds(0));
        assert!(writer.take_gathered().is_none());
        assert!(writer.take_for_flush(10_000).is_none());
        assert!(!writer.gather(0, 0, &Outbox::new(0)));
    }

    /// With a ring, a pass gathers from [`MIN_BATCH`] sends on; fewer go one by one.
    #[test]
    fn a_pass_gathers_only_enough_sends() {
        let Ok(ring) = SendBatch::new() else {
            return; // no io_uring in this kernel or sandbox: the path above is taken
        };
        let mut writer = Writer::new(Some(ring));
        writer.start_pass(MIN_BATCH - 1);
        assert!(!writer.batching());
        writer.start_pass(MIN_BATCH);
        assert!(writer.batching());
        writer.end_pass();
        assert!(!writer.batching());
        assert!(writer.take_gathered().is_none(), "nothing gathered");
        assert!(writer.take_for_flush(MIN_BATCH - 1).is_none());
        assert!(writer.take_for_flush(MIN_BATCH).is_some());
    }
}
