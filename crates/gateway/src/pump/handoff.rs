//! The hand-off between loops: the one place a loop runs another loop's state. A
//! loop's state sits in a [`LoopCell`]; its own thread holds the lock for a round of
//! events and lets go while it sleeps in `epoll_wait`. At the end of a round, each
//! mailbox the round's bus calls filled without waking ([`bus::Wake::Later`]) is
//! settled once: when its loop sleeps and the mail is small ([`RUN_ELSEWHERE_MAX`])
//! this thread writes it, so on the unicast path a message crosses loops without a
//! wake-up; otherwise the owner is woken.
//!
//! Bounded to writes: running another loop's mail here only hands messages to its
//! connections and writes them. What that could lead to — a bus call (a logout of
//! a connection whose write failed), held input to read again, more of a fan-out —
//! stays in that loop's state and wakes its owner, which does it in its own round.
//! So no loop runs another's requests, and nothing runs inside a bus call.
//!
//! Why keep it rather than always wake (docs/decisions/one-direction-pump.md): the
//! wake-up is an eventfd write, a context switch and a second core's cache misses
//! for a single 100-byte write.

use super::EventLoop;
use std::sync::Arc;
use std::time::Instant;

/// A loop's state, shared: its own thread holds the lock for each round of events
/// and lets go while it sleeps in `epoll_wait`; then another loop may take it to
/// write this loop's mail ([`EventLoop::drain_for_another`]). `None` once the
/// loop has ended.
pub type LoopCell = parking_lot::Mutex<Option<EventLoop>>;

/// Every loop's cell of one process, indexed by loop id: made empty by
/// `Server::start`, which puts each loop in its cell before its thread starts.
pub type LoopCells = Arc<[LoopCell]>;

/// Mail of at most this many recipient connections is written by the loop that
/// posted it when the owner sleeps (a unicast message: one write, no wake-up);
/// more is left to the owner, so a fan-out's halves stay on their own cores.
pub const RUN_ELSEWHERE_MAX: usize = 16;

/// `loops` empty cells.
pub fn cells(loops: usize) -> LoopCells {
    (0..loops).map(|_| LoopCell::new(None)).collect()
}

impl EventLoop {
    /// At the end of a round that made bus calls: every other loop's mailbox left
    /// unwoken is written here when that loop sleeps and the mail is small, else
    /// its loop is woken. Only `try_lock`: a loop never waits for another here.
    pub(super) fn settle_wakes(&mut self) {
        if !std::mem::take(&mut self.called) {
            return;
        }
        for (id, mailbox) in self.gateway.mailboxes.iter().enumerate() {
            if id == self.id as usize || !mailbox.take_unwoken() {
                continue; // its own mail: drained by `finish_round`
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

    /// Writes this loop's mail on another loop's thread, while this loop sleeps
    /// (see [`EventLoop::settle_wakes`]). Whatever the mail leads to beyond writes
    /// (calls, held input, more of a fan-out) wakes this loop to do it.
    fn drain_for_another(&mut self) {
        self.set_clock(Instant::now());
        // Writes only: its askers' queries are requests, its own thread's to run.
        self.askers.held = true;
        self.drain_mailbox();
        self.askers.held = false;
        if self.more_work
            || !self.calls.is_empty()
            || !self.resume.is_empty()
            || !self.reread.is_empty()
        {
            self.gateway.mailboxes[self.id as usize].wake();
        }
    }
}
