//! A user's history in the router: reads for a resuming client (the rules are in
//! `crate::history`), the journal of changes for a durable copy, a ring read back
//! at start, and a ring forgotten.

use super::Router;
use crate::history::{Journal, Ring};
use crate::users::UserRef;
use crate::{HistoryRead, Message, UserId};
use std::sync::Arc;
use std::time::Instant;

impl Router {
    /// Drops `user`'s ring (its ttl ran out, or it was pushed out), journalled.
    pub(super) fn forget(&mut self, user: UserId) {
        if self.totals.forget_user(user, &mut self.users) {
            self.users_with_history -= 1;
            if self.config.journal {
                self.journal.push(Journal::Forgot(user));
            }
        }
    }

    /// The history changes made since the last call, oldest first (see
    /// [`Journal`]); empty unless `RouterConfig::journal`.
    pub fn take_journal(&mut self) -> Vec<Journal> {
        std::mem::take(&mut self.journal)
    }

    /// Puts back a durable history of `user` read at start: `msgs` are numbers
    /// `first, first + 1, …` of `epoch`, oldest first. The ring is kept within the
    /// per-user and total bounds as if they had been published now, and counts as
    /// offline since `now` (its ttl starts again). A user who already has history
    /// keeps it. Returns the messages kept.
    pub fn restore(
        &mut self,
        user: UserId,
        epoch: u32,
        first: u64,
        msgs: impl IntoIterator<Item = Arc<Message>>,
        now: Instant,
    ) -> usize {
        if first == 0 {
            return 0;
        }
        let mut state = self.users.get_or_default(user);
        if state.ring().is_some() {
            return 0;
        }
        let mut ring = Box::new(Ring::resume(epoch, first - 1));
        for msg in msgs {
            let pushed = ring.push(&msg, self.config.history, self.config.history_bytes);
            self.totals.record(&pushed);
            if pushed.stored {
                self.totals.trim(&mut ring);
            }
        }
        let kept = ring.len();
        if state.conns().is_empty() {
            ring.offline_since = Some(now);
            self.expiry.push_back((now, user));
        }
        state.set_ring(ring);
        self.users_with_history += 1;
        kept
    }

    /// What a client of `user` resuming at `(epoch, since)` gets; see [`HistoryRead`].
    /// `epoch: None` (a client that never learned one) trusts `since` as a number
    /// of the current ring.
    pub fn history_read(&self, user: UserId, epoch: Option<u32>, since: u64) -> HistoryRead {
        match self.users.get(user).and_then(|s| s.ring) {
            Some(ring) => {
                let (messages, gap) = ring.read(epoch, since);
                HistoryRead {
                    messages,
                    last: ring.last(),
                    gap,
                    epoch: Some(ring.epoch()),
                }
            }
            // No history: a client that saw anything (a number, or an epoch) has
            // lost what came after it.
            None => HistoryRead {
                messages: Vec::new(),
                last: 0,
                gap: since > 0 || epoch.is_some(),
                epoch: None,
            },
        }
    }

    /// [`Router::history_read`] without an epoch.
    pub fn history_since(&self, user: UserId, since: u64) -> HistoryRead {
        self.history_read(user, None, since)
    }

    /// The user's current sequence number (0 if the router holds no state for them).
    pub fn last_seq(&self, user: UserId) -> u64 {
        self.users.get(user).map_or(0, |s| UserRef::last_seq(&s))
    }

    /// The user's current `(epoch, last seq)`: where a new subscriber starts.
    /// `(None, 0)` while the user has no history.
    pub fn position(&self, user: UserId) -> (Option<u32>, u64) {
        match self.users.get(user).and_then(|s| s.ring) {
            Some(r) => (Some(r.epoch()), r.last()),
            None => (None, 0),
        }
    }
}
