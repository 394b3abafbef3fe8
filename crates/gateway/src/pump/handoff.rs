//! The hand-off between loops: the one place a loop runs another loop's state. A
//! loop's state sits in a [`LoopCell`]; its own thread holds the lock for a round of
//! events and lets go while it sleeps in `epoll_wait`. After a bus call, mail the
//! call left for a sleeping loop is run by the calling thread when it is small
//! ([`RUN_ELSEWHERE_MAX`]), so on the unicast path a message crosses loops without
//! a wake-up; otherwise the owner is woken.
//!
//! Not here: what running the mail does (`inbox`), or who posts it (the bus).

use super::EventLoop;
use std::sync::Arc;
use std::time::Instant;

/// A loop's state, shared: its own thread holds the lock for each round of events
/// and lets go while it sleeps in `epoll_wait`; then another loop may take it to
/// run this loop's mailbox ([`EventLoop::drain_for_another`]). `None` once the
/// loop has ended.
pub type LoopCell = parking_lot::Mutex<Option<EventLoop>>;

/// Every loop's cell of one process, indexed by loop id: made empty by
/// `Server::start`, which puts each loop in its cell before its thread starts.
pub type LoopCells = Arc<[LoopCell]>;

/// Mail of at most this many recipient connections is run by the loop that
/// posted it when the owner sleeps (a unicast message: one write, no wake-up);
/// more is left to the owner, so a fan-out's halves stay on their own cores.
pub const RUN_ELSEWHERE_MAX: usize = 16;

/// `loops` empty cells.
pub fn cells(loops: usize) -> LoopCells {
    (0..loops).map(|_| LoopCell::new(None)).collect()
}

impl EventLoop {
    /// After a bus call on this loop's thread: each mailbox the call left unwoken
    /// ([`bus::mailbox`]) is run here and now when its loop sleeps and the mail
    /// is small — the message is written without waking that loop — else its loop
    /// is woken as before. Only `try_lock`: a loop never waits for another here.
    pub(super) fn settle_wakes(&self) {
        if !bus::mailbox::take_deferred() {
            return;
        }
        for (id, mailbox) in self.gateway.mailboxes.iter().enumerate() {
            if !mailbox.take_unwoken() {
                continue;
            }
            let ran = mailbox.weight() <= RUN_ELSEWHERE_MAX
                && self.loops[id]
                    .try_lock()
                    .is_some_and(|mut cell| cell.as_mut().map(|l| l.drain_for_another()).is_some());
            if !ran {
                mailbox.wake();
            }
        }
    }

    /// Runs this loop's mailbox on another loop's thread, while this loop sleeps
    /// (see [`EventLoop::settle_wakes`]). What a round would do next (more of a
    /// fan-out, mail this drain posted to its own loop) wakes this loop.
    fn drain_for_another(&mut self) {
        self.set_clock(Instant::now());
        self.drain_mailbox();
        if self.more_work || self.own_mail || !self.resume.is_empty() || !self.reread.is_empty() {
            self.gateway.mailboxes[self.id as usize].wake();
        }
    }
}
