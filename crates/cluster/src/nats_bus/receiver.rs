//! The receiver task: the router's messages on this gateway's subjects into the
//! loops' mailboxes — replies (gathered over router shards, with an expiry timer
//! for the shards that do not answer), deliveries as one batch per loop, in the
//! router's numbered order with lost batches asked for again, resync requests and
//! the router's stats.

use super::numbering::{Numbering, Step};
use super::presence::Presence;
use super::{Outgoing, Shared};
use crate::codec::{self, GatewayItem, GatewayMail, ToGateway, WireReply};
use crate::fragment::Reassembly;
use crate::shard_calls::{self, Gathered, Gathers};
use crate::timing::unix_ns;
use bus::{Inbound, Mail, Mailbox, Reply, Wake};
use futures_util::StreamExt;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Notify};

/// The task that hands the router's messages to the loops.
pub(super) struct Receiver {
    pub(super) mailboxes: Vec<Arc<Mailbox>>,
    pub(super) tx: mpsc::UnboundedSender<Outgoing>,
    /// The logged-in connections, shared with the sender (the same thread).
    pub(super) presence: Arc<Mutex<Presence>>,
    pub(super) shared: Arc<Mutex<Shared>>,
    /// Messages over max_payload, until their last part.
    pub(super) parts: Reassembly,
    /// Calls divided among router shards, whose replies are summed.
    pub(super) gathers: Arc<Mutex<Gathers>>,
    /// Router shards: with one, nothing is gathered and nothing expires.
    pub(super) shards: u16,
    /// The router's batches in their order, lost ones asked for again.
    pub(super) numbering: Numbering,
    /// Notified when NATS reconnected or dropped a message.
    pub(super) lost_some: Arc<Notify>,
    /// The numbering's counts as last copied into `shared`.
    pub(super) counted: (u64, u64, u64),
}

/// How often an open gap in the router's batches is looked at.
const GAP_TICK: Duration = Duration::from_millis(100);

impl Receiver {
    pub(super) async fn run(
        mut self,
        mut messages: impl futures_util::Stream<Item = async_nats::Message> + Unpin,
    ) {
        // Calls a shard did not answer are answered from this timer, not looked for
        // on every reply.
        let mut expiry = (self.shards > 1).then(|| {
            let mut tick = tokio::time::interval(shard_calls::GATHER_TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick
        });
        let mut gap_tick = tokio::time::interval(GAP_TICK);
        gap_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut steps = Vec::new();
        loop {
            tokio::select! {
                message = messages.next() => {
                    let Some(message) = message else {
                        return;
                    };
                    match codec::decode_to_gateway(&message.payload) {
                        Ok(msg) => self.handle(msg, &mut steps),
                        Err(e) => tracing::warn!(error = %e, subject = %message.subject, "dropped"),
                    }
                }
                _ = tick_or_never(&mut expiry) => self.expire(Instant::now()),
                _ = self.lost_some.notified() => {
                    self.numbering.reconnected(Instant::now(), &mut steps);
                }
                _ = gap_tick.tick(), if self.numbering.waiting() => {
                    self.numbering.tick(Instant::now(), &mut steps);
                }
            }
            self.take_steps(&mut steps);
        }
    }

    /// Does what the numbering decided, in order.
    fn take_steps(&mut self, steps: &mut Vec<Step>) {
        for step in steps.drain(..) {
            match step {
                Step::Apply(items) => {
                    for item in items {
                        match item {
                            GatewayItem::Reply(r) => self.reply(r),
                            GatewayItem::Deliver(d) => self.deliver(d),
                        }
                    }
                }
                Step::Ask { shard, lane, from } => {
                    let _ = self.tx.send(Outgoing::Replay { shard, lane, from });
                }
                Step::TellAll => self.tell_all(),
            }
        }
        // Into the shared counters only when they moved: not a lock per message.
        let counts = self.numbering.counts();
        if counts != self.counted {
            self.counted = counts;
            let mut shared = self.shared.lock();
            (
                shared.batch_gaps,
                shared.batches_twice,
                shared.gaps_given_up,
            ) = counts;
        }
    }

    /// Batches were lost for good: every connection is told to resume (each
    /// before anything that follows reaches it).
    fn tell_all(&self) {
        let (all, holders) = {
            let presence = self.presence.lock();
            (presence.all(), presence.channel_holders())
        };
        let users = all.iter().map(|&(l, t, _)| (l, t));
        for (loop_id, token) in users.chain(holders) {
            if let Some(mailbox) = self.mailboxes.get(usize::from(loop_id)) {
                mailbox.push(Inbound::Lost { token }, Wake::Now);
            }
        }
        self.shared.lock().lost_told += all.len() as u64;
        tracing::error!(
            connections = all.len(),
            "the router no longer had batches this gateway lost: every connection told to resume"
        );
    }

    fn handle(&mut self, msg: ToGateway, steps: &mut Vec<Step>) {
        match msg {
            ToGateway::Fragment(part) => {
                let whole = self.parts.add(part);
                match whole.map(|bytes| codec::decode_to_gateway(&bytes)) {
                    Some(Ok(msg)) => self.handle(msg, steps),
                    Some(Err(e)) => tracing::warn!(error = %e, "dropped a message in parts"),
                    None => {}
                }
            }
            ToGateway::Bundle {
                shard,
                lane,
                n,
                items,
            } => self
                .numbering
                .bundle(shard, lane, n, items, Instant::now(), steps),
            ToGateway::Rest { lane, .. } => self.numbering.rest(lane, Instant::now(), steps),
            ToGateway::Missed { lane, from, to } => {
                tracing::warn!(
                    from,
                    to,
                    "the router no longer keeps batches this gateway lost"
                );
                self.numbering.missed(lane, from, to, Instant::now(), steps);
            }
            ToGateway::Resync { router } => {
                tracing::info!(
                    router = format!("{router:016x}"),
                    "router asks for presence"
                );
                let _ = self.tx.send(Outgoing::Resync);
                // The router forgot this gateway's channel subscriptions with its
                // presence: their connections resume and join again (after the
                // presence this resync sends, on the same ordered link).
                let holders = self.presence.lock().take_channel_holders();
                for (loop_id, token) in holders {
                    if let Some(mailbox) = self.mailboxes.get(usize::from(loop_id)) {
                        mailbox.push(Inbound::Lost { token }, Wake::Now);
                    }
                }
            }
            ToGateway::RouterStats(text) => {
                if let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) {
                    let shard = doc["router_shard"].as_u64().unwrap_or(0);
                    self.shared.lock().router_stats.insert(shard, doc);
                }
            }
        }
    }
}

impl Receiver {
    fn reply(&self, r: WireReply) {
        // A login's reply: where the connection's deliveries start.
        let login = match &r.reply {
            Reply::History(h) if r.part.is_none() => Some(h),
            Reply::Joined { login: Some(h), .. } => Some(h),
            _ => None,
        };
        if let Some(h) = login {
            self.presence
                .lock()
                .replied((r.loop_id, r.token), h.epoch, h.last);
        }
        let Some(part) = r.part else {
            return self.answer(r.loop_id, r.token, r.reply);
        };
        let gathered = self.gathers.lock().gather(part, r.reply);
        match gathered {
            Gathered::Done((loop_id, token), answer) => self.answer(loop_id, token, answer),
            Gathered::Waiting => {}
            Gathered::Late => {
                tracing::debug!(part, "a shard's reply after its call was answered: dropped");
                self.shared.lock().gather_replies_late += 1;
            }
        }
    }

    fn answer(&self, loop_id: u16, token: u32, reply: Reply) {
        if let Some(mailbox) = self.mailboxes.get(usize::from(loop_id)) {
            mailbox.push(Inbound::Reply { token, reply }, Wake::Now);
        }
    }

    /// Answers the calls divided among shards that some shard did not answer in time.
    fn expire(&self, now: Instant) {
        let expired = self.gathers.lock().expire(now);
        if expired.is_empty() {
            return;
        }
        if let Some((_, Reply::TimedOut(why))) = expired.first() {
            tracing::warn!(calls = expired.len(), first = %why, "router shards did not answer");
        }
        self.shared.lock().gathers_expired += expired.len() as u64;
        for ((loop_id, token), answer) in expired {
            self.answer(loop_id, token, answer);
        }
    }

    /// One batch per loop: the loops' mailboxes wake once per burst. Each loop's
    /// recipients arrive as the [`bus::Target`]s its batch carries, moved in.
    fn deliver(&self, d: GatewayMail) {
        let published = instant_of(d.published_ns);
        let msg = d.msg;
        let (mut n, mut lost) = (0, 0);
        let mut presence = self.presence.lock();
        for (loop_id, targets) in d.loops {
            let Some(mailbox) = self.mailboxes.get(usize::from(loop_id)) else {
                continue;
            };
            n += targets.len() as u64;
            // A connection that missed messages is told to resume before this one
            // reaches it (it then takes no delivery): resuming from this message's
            // id would skip the lost ones.
            // A channel's numbers are the channel's, not the user's this checks.
            for t in targets.iter().filter(|_| msg.channel.is_none()) {
                if !presence.follows((loop_id, t.token), t.epoch, t.seq) {
                    lost += 1;
                    mailbox.push(Inbound::Lost { token: t.token }, Wake::Now);
                }
            }
            let batch = Mail {
                msg: msg.clone(),
                published,
                targets,
            };
            mailbox.push(Inbound::Deliver(batch), Wake::Now);
        }
        drop(presence);
        let mut shared = self.shared.lock();
        shared.deliveries_received += n;
        if lost > 0 {
            shared.lost_told += lost;
            tracing::warn!(
                connections = lost,
                "deliveries were lost on the way from the router: told to resume"
            );
        }
    }
}

/// `interval`'s next tick, or never without one.
async fn tick_or_never(interval: &mut Option<tokio::time::Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// The local `Instant` of a Unix time in ns (hosts' clocks are assumed in step).
fn instant_of(ns: u64) -> Instant {
    let age = Duration::from_nanos(unix_ns().saturating_sub(ns));
    Instant::now().checked_sub(age).unwrap_or_else(Instant::now)
}
