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
//!
//! A publish need not wait at all ([`GroupCommit::push_later`]): its hand-out and
//! answer go to the committer thread as a job, which writes everything queued and
//! then runs the jobs in ticket order. An event loop publishing this way keeps
//! serving while its publishes wait for the disk, and a group holds every publish
//! queued during the previous write, so groups grow with the load.
//!
//! A write that fails is reported to everyone who waited for it ([`NotStored`]):
//! the messages are still in memory and still delivered, but a restart would not
//! replay them, so the publisher is told instead of getting a plain 200.

use parking_lot::{Condvar, Mutex};
use router::history::Journal;
use std::collections::VecDeque;
use std::sync::Arc;
use store::history::HistoryLog;

pub struct GroupCommit {
    shared: Arc<Queue>,
    committer: Option<std::thread::JoinHandle<()>>,
}

/// The commit queue both sides hold: publishes push journal entries, the committer
/// thread writes them in groups and runs what waits on each.
struct Queue {
    state: Mutex<State>,
    changed: Condvar,
    log: Mutex<Box<dyn HistoryLog>>,
    /// Messages kept per user (`--history`): the stored rows' bound.
    keep: usize,
}

/// What runs after a commit: a publish's hand-out and answer, told whether the
/// write held.
pub type Then = Box<dyn FnOnce(Result<(), NotStored>) + Send>;

/// Why a durable history write failed (the store's error text), shared by every
/// publish of the failed group.
pub type NotStored = Arc<str>;

/// Failed writes remembered for their waiters: a waiter asks right after its
/// write, so a few are plenty.
const FAILURES_KEPT: usize = 64;

/// A publish waiting for the committer thread.
struct Job {
    position: u64,
    ticket: u64,
    /// False when the journal was empty: nothing of this publish was written.
    stores: bool,
    then: Then,
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
    /// The committer thread's work, in ticket order.
    jobs: VecDeque<Job>,
    /// Set on drop: the committer finishes its jobs and ends.
    closing: bool,
    /// Recent failed writes: positions `(after, upto]` and the error.
    failures: VecDeque<(u64, u64, NotStored)>,
}

impl State {
    /// Whether the write that covered `position` (already committed) failed.
    fn outcome(&self, position: u64) -> Result<(), NotStored> {
        match self
            .failures
            .iter()
            .find(|(after, upto, _)| *after < position && position <= *upto)
        {
            Some((_, _, why)) => Err(why.clone()),
            None => Ok(()),
        }
    }
}

impl GroupCommit {
    pub fn new(log: Box<dyn HistoryLog>, keep: usize) -> std::io::Result<GroupCommit> {
        let shared = Arc::new(Queue {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            log: Mutex::new(log),
            keep,
        });
        let committer = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("myriad-history-commit".into())
                .spawn(move || shared.run_jobs())?
        };
        Ok(GroupCommit {
            shared,
            committer: Some(committer),
        })
    }

    /// Queues `journal` (call under the router lock); returns the position to wait
    /// for with [`GroupCommit::wait_committed`].
    pub fn push(&self, journal: Vec<Journal>) -> u64 {
        push(&mut self.shared.state.lock(), journal)
    }

    /// Queues `journal` and takes the next delivery ticket (call under the router
    /// lock): `(position, ticket)`. A caller whose journal was empty wrote nothing
    /// and ignores [`GroupCommit::wait_committed`]'s outcome.
    pub fn push_publish(&self, journal: Vec<Journal>) -> (u64, u64) {
        let mut state = self.shared.state.lock();
        let position = push(&mut state, journal);
        state.tickets += 1;
        (position, state.tickets)
    }

    /// Queues `journal`, takes the next delivery ticket and leaves `then` to the
    /// committer thread, which runs it in ticket order once `journal` is written
    /// (call under the router lock). Never waits.
    pub fn push_later(&self, journal: Vec<Journal>, then: Then) {
        let stores = !journal.is_empty();
        let mut state = self.shared.state.lock();
        let position = push(&mut state, journal);
        state.tickets += 1;
        let ticket = state.tickets;
        state.jobs.push_back(Job {
            position,
            ticket,
            stores,
            then,
        });
        drop(state);
        self.shared.changed.notify_all();
    }

    /// Returns once everything up to `position` is written, writing it if no
    /// other thread is (call without the router lock); `Err` when that write
    /// failed.
    pub fn wait_committed(&self, position: u64) -> Result<(), NotStored> {
        self.shared.wait_committed(position)
    }

    /// Runs `deliver` once every earlier ticket has delivered, then lets the next
    /// one go.
    pub fn in_turn(&self, ticket: u64, deliver: impl FnOnce()) {
        self.shared.in_turn(ticket, deliver)
    }
}

fn push(state: &mut State, journal: Vec<Journal>) -> u64 {
    if !journal.is_empty() {
        state.queued.extend(journal);
        state.pushed += 1;
    }
    state.pushed
}

impl Queue {
    fn wait_committed(&self, position: u64) -> Result<(), NotStored> {
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
            let written = crate::durable::write(&mut **self.log.lock(), &batch, self.keep);
            state = self.state.lock();
            if let Err(e) = written {
                // The messages are still in memory and still delivered; a restart
                // reports the hole to resuming clients as a gap, and every waiter
                // of this group tells its publisher.
                tracing::error!(error = %e, "durable history write failed");
                if state.failures.len() == FAILURES_KEPT {
                    state.failures.pop_front();
                }
                let after = state.committed;
                state
                    .failures
                    .push_back((after, upto, Arc::from(e.to_string())));
            }
            state.committed = upto;
            state.writing = false;
            self.changed.notify_all();
        }
        state.outcome(position)
    }

    fn in_turn(&self, ticket: u64, deliver: impl FnOnce()) {
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

    /// The committer thread: takes every job queued, writes everything queued in
    /// one transaction (or waits for the write under way), runs the jobs in ticket
    /// order; until the commit is dropped and no job is left.
    fn run_jobs(&self) {
        loop {
            let mut state = self.state.lock();
            while state.jobs.is_empty() && !state.closing {
                self.changed.wait(&mut state);
            }
            if state.jobs.is_empty() {
                return;
            }
            let jobs = std::mem::take(&mut state.jobs);
            drop(state);
            let upto = jobs.iter().map(|j| j.position).max().unwrap_or(0);
            let _ = self.wait_committed(upto);
            for job in jobs {
                let outcome = match job.stores {
                    true => self.state.lock().outcome(job.position),
                    false => Ok(()),
                };
                self.in_turn(job.ticket, || (job.then)(outcome));
            }
        }
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        self.shared.state.lock().closing = true;
        self.shared.changed.notify_all();
        if let Some(t) = self.committer.take() {
            let _ = t.join();
        }
    }
}
