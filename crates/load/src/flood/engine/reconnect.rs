//! `--reconnect` in the engine: an attempt that failed is tried again (reconnects
//! counted apart from first attempts), and connection numbers wait out their backoff
//! in a queue by deadline. What a connection resumes from is `flood::resume`.

use super::Engine;
use crate::flood::resume::backoff;
use crate::flood::stats::FailCounts;
use std::cmp::Reverse;
use std::time::Instant;

impl Engine<'_> {
    /// An attempt that never opened failed: a reconnect is tried again later (counted
    /// apart), a first attempt is counted by `count`.
    pub(super) fn attempt_failed(&mut self, local: u32, count: impl FnOnce(&mut FailCounts)) {
        match self.tracks.get_mut(local as usize) {
            Some(t) if t.retry => {
                t.attempt = t.attempt.saturating_add(1);
                self.tally.counts.resume.reconnect_failures += 1;
                self.schedule(local);
            }
            _ => count(&mut self.tally.counts.fail),
        }
    }

    /// [`Engine::attempt_failed`] for an attempt holding `slot`, which is freed.
    pub(super) fn give_up(&mut self, slot: usize, count: impl FnOnce(&mut FailCounts)) {
        let Some(local) = self.slab[slot].as_ref().map(|c| c.local) else {
            return;
        };
        self.remove_pending(slot);
        self.attempt_failed(local, count);
    }

    /// Queues connection number `local` for a reconnect after its backoff.
    pub(super) fn schedule(&mut self, local: u32) {
        if !self.reconnecting {
            return;
        }
        let attempt = self.tracks[local as usize].attempt;
        self.mask_seed = self
            .mask_seed
            .wrapping_mul(1_664_525)
            .wrapping_add(1_013_904_223);
        let at = Instant::now() + backoff(attempt, self.mask_seed);
        self.waiting.push(Reverse((at, local)));
    }

    /// Starts the reconnects whose backoff is over.
    pub(super) fn reconnect_due(&mut self, now: Instant) {
        while let Some(&Reverse((at, local))) = self.waiting.peek() {
            if at > now || !self.reconnecting {
                break;
            }
            self.waiting.pop();
            self.connect(u64::from(local));
        }
    }
}
