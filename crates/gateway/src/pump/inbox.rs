//! The loop's mailbox: mail from the bus becomes writes, and late replies
//! reach their connection.
//!
//! Latency has to stay bounded at every rate (DESIGN: what arrives while a fan-out is
//! still writing joins the writes still to come). A lone mail on idle connections is
//! written at once, target by target: the lowest latency for one message. Every
//! [`SLICE`] targets the loop looks at its mailbox and its time budget; when more mail
//! has arrived, or [`ROUND_BUDGET`] is used, the rest of the fan-out is only queued on
//! its connections, and queued connections are flushed slice by slice — one `writev`
//! per connection for everything queued on it, including messages that arrived
//! meanwhile. Over budget, the loop goes back to its sockets (reads, accepts, timers)
//! and comes back at once.

use super::askers::ASK_EVERY_WRITES;
use super::EventLoop;
use bus::{Inbound, Mail, Reply};
use connection::{Cx, Frames, Outcome};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Targets (or queued connections) handled between two looks at the mailbox and the
/// clock: ~1–2 ms of loopback writes.
pub(super) const SLICE: usize = 256;
/// Time a loop spends on deliveries before it serves its sockets again.
const ROUND_BUDGET: Duration = Duration::from_millis(2);

impl EventLoop {
    /// Runs the mailbox and flushes what it queued, until both are empty or the
    /// round's budget is used (then `more_work` brings the loop back at once).
    pub(super) fn drain_mailbox(&mut self) {
        let deadline = Instant::now() + ROUND_BUDGET;
        let mut inbox = std::mem::take(&mut self.inbox);
        loop {
            self.gateway.mailboxes[self.id as usize].drain(&mut inbox);
            if !inbox.is_empty() {
                let mails = inbox
                    .iter()
                    .filter(|i| matches!(i, Inbound::Deliver(_)))
                    .count();
                // Several mails, or output of this pass still queued: merge.
                let mut queue_only = mails > 1 || self.writer.dirty_pending();
                for item in inbox.drain(..) {
                    match item {
                        Inbound::Deliver(mail) => {
                            queue_only = self.deliver(&mail, queue_only, deadline)
                        }
                        Inbound::Reply { token, reply } => self.late_reply(token, reply),
                        Inbound::Lost { token } => self.lost(token),
                    }
                }
            } else if !self.writer.dirty_pending() {
                break;
            }
            if !self.flush_dirty(deadline) {
                self.more_work = true;
                break;
            }
        }
        self.inbox = inbox;
    }

    /// One mail: every target connection's core writes the message its way; written
    /// at once, or only queued once `queue_only` (returned: whether the rest of this
    /// pass queues).
    fn deliver(&mut self, mail: &Mail, mut queue_only: bool, deadline: Instant) -> bool {
        let mut frames = Frames::of(&mail.msg);
        let (mut sent, mut dropped) = (0u64, 0u64);
        // A fan-out's sends leave a slice at a time (`--io-uring`); a lone recipient
        // is written at once.
        self.writer.start_pass(mail.targets.len());
        for (i, target) in mail.targets.iter().enumerate() {
            let token = target.token;
            if i > 0 && i % SLICE == 0 {
                self.submit_sends();
                if !queue_only && self.should_merge(deadline) {
                    queue_only = true;
                }
            }
            // A storm's mailbox is thousands of small fan-outs (joins and leaves),
            // some long: a back-end's query is read between their writes.
            self.worked(1);
            // Planned for a connection that has closed since: skip.
            let Some(index) = self.conns.live(token) else {
                continue;
            };
            // The slow-consumer policy is judged on what the socket refused, not on
            // what this pass queued (SPEC D4): a connection that would go over the
            // limit with output never tried gets a write first.
            let slot = &self.conns[index];
            if slot.out.is_some()
                && slot.queued_bytes() + mail.msg.payload.len() + 32 > self.config.max_queued
            {
                self.flush(index);
                if self.conns.live(token).is_none() {
                    continue; // the write failed and closed it
                }
            }
            let Some((slot, credentials, _)) = self.conns.for_core(index) else {
                continue; // live: checked above
            };
            let mut cx = Cx {
                now: self.timers.now(),
                config: &self.config,
                queued: slot.queued_bytes(),
                out: &mut self.outbox,
                credentials,
                key: token,
            };
            match slot
                .conn
                .handle_delivery(&mut cx, target.epoch, target.seq, &mut frames)
            {
                Outcome::Sent => sent += 1,
                Outcome::SlowDrop => dropped += 1,
                Outcome::Skipped => {}
            }
            if !self.outbox.is_empty() {
                self.settle(index, queue_only);
            }
        }
        self.submit_sends();
        self.writer.end_pass();
        self.metrics.messages_out.fetch_add(sent, Ordering::Relaxed);
        if dropped > 0 {
            self.metrics
                .slow_drops
                .fetch_add(dropped, Ordering::Relaxed);
        }
        self.metrics
            .record_delivery_latency(Instant::now().saturating_duration_since(mail.published));
        queue_only
    }

    /// Mail arrived or the budget is used: stop writing one by one.
    fn should_merge(&self, deadline: Instant) -> bool {
        self.gateway.mailboxes[self.id as usize].has_mail() || Instant::now() >= deadline
    }

    /// Flushes queued connections slice by slice. Returns false when the budget ran
    /// out with work left; true when all are flushed or new mail should be merged.
    fn flush_dirty(&mut self, deadline: Instant) -> bool {
        loop {
            // With askers, smaller slices: a query is read between them.
            let max = match self.has_askers() {
                true => ASK_EVERY_WRITES,
                false => SLICE,
            };
            let Some(slice) = self.writer.next_dirty_slice(max) else {
                return true;
            };
            // A slot closed (and maybe reused) meanwhile has nothing queued from
            // this pass: flushing it is harmless.
            let written = slice.len();
            self.flush_batched(slice);
            self.worked(written);
            if self.gateway.mailboxes[self.id as usize].has_mail() {
                return true;
            }
            if self.writer.dirty_pending() && Instant::now() >= deadline {
                return false;
            }
        }
    }

    /// Deliveries for `token` were lost before they reached this loop: its client is
    /// told to reconnect and resume (see `Connection::handle_lost`).
    fn lost(&mut self, token: u32) {
        if let Some(index) = self.conns.live(token) {
            self.with_core(index, |conn, cx| conn.handle_lost(cx));
        }
    }

    /// A reply that arrived after the request (a bus across processes).
    fn late_reply(&mut self, token: u32, reply: Reply) {
        self.count_reply(&reply);
        if let Some(index) = self.conns.live(token) {
            self.with_core(index, |conn, cx| conn.handle_reply(cx, reply));
        }
    }
}
