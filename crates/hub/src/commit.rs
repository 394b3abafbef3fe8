//! Group commit of durable history (`--history-store store`): the router lock is
//! not held across the SQLite write, and concurrent publishes share one transaction.
//!
//! Under the router lock a publish only *queues* its journal and takes a delivery
//! ticket (so queue order and ticket order are the router's sequence order). After
//! the router lock is released, whichever waiter finds no write under way writes
//! everything queued in one transaction (the leader); the others wait for it. A
//! publish then hands out its deliveries in ticket order and is answered: a 200 and
//! every number a client sees still come after the commit, and each user's messages
//! still reach every loop in sequence order. History reads wait for the commit of
//! everything queued when they read, so a resumed client never holds a number a
//! kill -9 would lose.

use parking_lot::{Condvar, Mutex};
use router::history::Journal;
use store::history::HistoryLog;

pub struct GroupCommit {
    state: Mutex<State>,
    changed: Condvar,
    log: Mutex<Box<dyn HistoryLog>>,
    /// Messages kept per user (`--history`): the stored rows' bound.
    keep: usize,
}

#[derive(Default)]
struct State {
    queued: Vec<Journal>,
    /// Journal pushes so far / pushes written (positions in one count).
    pushed: u64,
    committed: u64,
    writing: bool,
    /// Delivery tickets handed out / delivery tickets done.
    tickets: u64,
    delivered: u64,
}

impl GroupCommit {
    pub fn new(log: Box<dyn HistoryLog>, keep: usize) -> GroupCommit {
        GroupCommit {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            log: Mutex::new(log),
            keep,
        }
    }

    /// Queues `journal` (call under the router lock); returns the position to wait
    /// for with [`GroupCommit::wait_committed`].
    pub fn push(&self, journal: Vec<Journal>) -> u64 {
        let mut state = self.state.lock();
        if !journal.is_empty() {
            state.queued.extend(journal);
            state.pushed += 1;
        }
        state.pushed
    }

    /// Queues `journal` and takes the next delivery ticket (call under the router
    /// lock): `(position, ticket)`.
    pub fn push_publish(&self, journal: Vec<Journal>) -> (u64, u64) {
        let position = self.push(journal);
        let mut state = self.state.lock();
        state.tickets += 1;
        (position, state.tickets)
    }

    /// The position everything queued so far will have (call under the router
    /// lock, e.g. when history is read).
    pub fn position(&self) -> u64 {
        self.state.lock().pushed
    }

    /// Returns once everything up to `position` is written, writing it if no
    /// other thread is (call without the router lock).
    pub fn wait_committed(&self, position: u64) {
        let mut state = self.state.lock();
        while state.committed < position {
            if state.writing {
                self.changed.wait(&mut state);
                continue;
            }
            state.writing = true;
            let batch = std::mem::take(&mut state.queued);
            let upto = state.pushed;
            drop(state);
            if let Err(e) = crate::durable::write(&mut **self.log.lock(), &batch, self.keep) {
                // The messages are still in memory; a restart reports the gap
                // through the epoch check.
                tracing::error!(error = %e, "durable history write failed");
            }
            state = self.state.lock();
            state.committed = upto;
            state.writing = false;
            self.changed.notify_all();
        }
    }

    /// Runs `deliver` once every earlier ticket has delivered, then lets the next
    /// one go.
    pub fn in_turn(&self, ticket: u64, deliver: impl FnOnce()) {
        let mut state = self.state.lock();
        while state.delivered + 1 != ticket {
            self.changed.wait(&mut state);
        }
        drop(state);
        deliver();
        let mut state = self.state.lock();
        state.delivered = ticket;
        self.changed.notify_all();
    }
}
