//! The loop's mailbox: delivery batches from the bus become writes, and late replies
//! reach their connection. When several batches arrive together every recipient's
//! bytes are queued first and each connection is written once (coalescing); a lone
//! batch is written at once, so an idle connection is never delayed.

use super::EventLoop;
use crate::core::{Cx, Frames, Outcome};
use bus::{Delivery, Inbound, Reply};
use std::sync::atomic::Ordering;
use std::time::Instant;

impl EventLoop {
    /// Runs what the mailbox holds until it is empty.
    pub(super) fn drain_mailbox(&mut self) {
        let mut inbox = std::mem::take(&mut self.inbox);
        loop {
            self.gateway.mailboxes[self.id as usize].drain(&mut inbox);
            if inbox.is_empty() {
                break;
            }
            let batches = inbox
                .iter()
                .filter(|i| matches!(i, Inbound::Deliver(_)))
                .count();
            let coalesce = batches > 1;
            for item in inbox.drain(..) {
                match item {
                    Inbound::Deliver(batch) => self.deliver(&batch, coalesce),
                    Inbound::Reply { token, reply } => self.late_reply(token, reply),
                }
            }
            if coalesce {
                self.flush_dirty();
            }
            // Pipelined requests behind answered long-polls: after the pass, so a
            // delivery never runs request handling.
            self.run_resumes();
        }
        self.inbox = inbox;
    }

    /// One batch: every target connection's core writes the message its way.
    fn deliver(&mut self, batch: &Delivery, coalesce: bool) {
        let mut frames = Frames::new(&batch.msg.payload);
        let (mut sent, mut dropped) = (0u64, 0u64);
        for &(token, seq) in &batch.targets {
            // Planned for a connection that has closed since: skip.
            let Some(index) = self.live(token) else {
                continue;
            };
            let slot = &mut self.slots[index];
            let mut cx = Cx {
                now: self.now,
                config: &self.config,
                queued: slot.queued_bytes(),
                out: &mut self.outbox,
            };
            match slot.conn.handle_delivery(&mut cx, seq, &mut frames) {
                Outcome::Sent => sent += 1,
                Outcome::SlowDrop => dropped += 1,
                Outcome::Skipped => {}
            }
            if !self.outbox.is_empty() {
                self.settle(index, coalesce);
            }
        }
        self.metrics.messages_out.fetch_add(sent, Ordering::Relaxed);
        if dropped > 0 {
            self.metrics
                .slow_drops
                .fetch_add(dropped, Ordering::Relaxed);
        }
        self.metrics
            .record_delivery_latency(Instant::now().saturating_duration_since(batch.published));
    }

    /// A reply that arrived after the request (a bus across processes).
    fn late_reply(&mut self, token: u32, reply: Reply) {
        self.count_reply(&reply);
        if let Some(index) = self.live(token) {
            self.with_core(index, |conn, cx| conn.handle_reply(cx, reply));
        }
    }
}
