//! What the gateways are owed: each handled message's replies and deliveries,
//! gathered per gateway and sent as ONE [`ToGateway::Bundle`](crate::codec::ToGateway::Bundle)
//! each (sooner when one weighs [`BUNDLE_BYTES`]), numbered and kept for a replay
//! ([`super::replay`]); a publish's recipients on one gateway cross as one delivery,
//! split only past [`MAX_TARGETS`]. A loop's recipients are the hub's
//! [`bus::Target`]s, moved from its delivery into the message, never copied one by one.

use super::{LoopTargets, RouterRole, BUNDLE_BYTES, MAX_TARGETS};
use crate::codec::{GatewayId, GatewayItem, GatewayMail};
use crate::loop_id;
use bus::{Mail, Message};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// One message's recipients grouped by gateway seat while a publish's loop
/// deliveries are queued: the seat indexes its entry (no search over the gateways
/// touched so far), and each loop's targets are moved in as the hub made them.
/// Kept between messages so that its table is sized once.
#[derive(Default)]
pub(super) struct PerSeat {
    /// By seat: that gateway's loops and their targets (empty when untouched).
    loops: Vec<Vec<LoopTargets>>,
    /// The seats with loops, in the order they were first touched.
    touched: Vec<u16>,
}

impl PerSeat {
    fn add(&mut self, seat: u16, local: u16, targets: Vec<bus::Target>) {
        let i = usize::from(seat);
        if self.loops.len() <= i {
            self.loops.resize_with(i + 1, Vec::new);
        }
        if self.loops[i].is_empty() {
            self.touched.push(seat);
        }
        self.loops[i].push((local, targets));
    }

    /// Every touched seat with its loops, in the order first touched; leaves none.
    fn take(&mut self) -> Vec<(u16, Vec<LoopTargets>)> {
        let loops = &mut self.loops;
        self.touched
            .drain(..)
            .map(|seat| (seat, std::mem::take(&mut loops[usize::from(seat)])))
            .collect()
    }
}

impl RouterRole {
    /// Queues what a handled request owes the gateways: one publish (or several,
    /// for a PublishBatch or a run of publishes) whose batches of one message are
    /// consecutive; each message goes to each gateway once.
    pub(super) fn queue_deliveries(&mut self, deliveries: Vec<(u16, Mail)>, published_ns: u64) {
        let mut current: Option<Arc<Message>> = None;
        for (loop_id, delivery) in deliveries {
            if let Some(msg) = current.take_if(|m| !Arc::ptr_eq(m, &delivery.msg)) {
                self.queue_for_gateways(msg, published_ns);
            }
            current.get_or_insert_with(|| delivery.msg.clone());
            let (seat, local) = loop_id::unpack(loop_id);
            self.per_seat.add(seat, local, delivery.targets);
        }
        if let Some(msg) = current {
            self.queue_for_gateways(msg, published_ns);
        }
    }

    /// Queues one delivery of `msg` per gateway seat grouped so far, after what
    /// that gateway is already owed.
    fn queue_for_gateways(&mut self, msg: Arc<Message>, published_ns: u64) {
        for (seat, loops) in self.per_seat.take() {
            // A seat freed meanwhile (its gateway was forgotten): nobody to send to.
            let Some(Some(gateway)) = self.gateways.by_seat.get(usize::from(seat)).copied() else {
                continue;
            };
            for loops in split_targets(loops, MAX_TARGETS) {
                let weight =
                    msg.payload.len() + 16 + 8 * loops.iter().map(|l| l.1.len()).sum::<usize>();
                let delivery = GatewayMail {
                    msg: msg.clone(),
                    published_ns,
                    loops,
                };
                self.push_item(gateway, GatewayItem::Deliver(delivery), weight);
            }
        }
    }

    /// Adds `item` to what `gateway` is owed; sends it all once it weighs
    /// [`BUNDLE_BYTES`].
    pub(super) fn push_item(&mut self, gateway: GatewayId, item: GatewayItem, weight: usize) {
        let Some(gw) = self.gateways.by_id.get_mut(&gateway) else {
            return;
        };
        gw.items.push(item);
        gw.bytes += weight;
        if gw.bytes >= BUNDLE_BYTES {
            self.flush(gateway);
        }
    }

    /// Queues everything `gateway` is owed as one message.
    fn flush(&mut self, gateway: GatewayId) {
        if let Some(gw) = self.gateways.by_id.get_mut(&gateway) {
            if !gw.items.is_empty() {
                gw.bytes = 0;
                let items = std::mem::take(&mut gw.items);
                let bytes = self.rings.number(gateway, items, Instant::now());
                self.out.push((gw.subject.clone(), bytes));
                self.counters.batches_to_gateways.fetch_add(1, Relaxed);
            }
        }
    }

    /// Queues one message for every gateway that is owed something.
    pub(super) fn flush_all(&mut self) {
        let owed: Vec<GatewayId> = self
            .gateways
            .by_id
            .iter()
            .filter(|(_, gw)| !gw.items.is_empty())
            .map(|(&id, _)| id)
            .collect();
        for id in owed {
            self.flush(id);
        }
    }
}

/// Splits one gateway's recipients into messages of at most `max` targets each
/// (one message in the common case).
pub(super) fn split_targets(loops: Vec<LoopTargets>, max: usize) -> Vec<Vec<LoopTargets>> {
    let total: usize = loops.iter().map(|(_, t)| t.len()).sum();
    if total <= max {
        return vec![loops];
    }
    let mut out = Vec::new();
    let mut current: Vec<LoopTargets> = Vec::new();
    let mut room = max;
    for (loop_id, targets) in loops {
        let mut rest = &targets[..];
        while !rest.is_empty() {
            let take = rest.len().min(room);
            current.push((loop_id, rest[..take].to_vec()));
            rest = &rest[take..];
            room -= take;
            if room == 0 {
                out.push(std::mem::take(&mut current));
                room = max;
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}
