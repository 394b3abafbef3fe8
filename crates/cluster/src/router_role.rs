//! The router role over NATS (`myriad serve --role router`): the [`Hub`] answering
//! every gateway's batches, and back-ends' publishes on `myriad.pub.<subject>`.
//!
//! One task handles everything in arrival order, so what it sends a gateway leaves
//! in the order the hub decided it: a login's reply before the deliveries that
//! follow it, and each user's deliveries in sequence order. Per publish each
//! gateway holding recipients gets one message ([`ToGateway::Deliver`]); the replies
//! to one batch go back as one [`ToGateway::Replies`] per gateway, sent before any
//! later delivery to that gateway.
//!
//! Presence: the hub's router sees a gateway's connection as loop id
//! `slot << LOOP_BITS | loop`, where `slot` is the gateway's number here. A gateway
//! not heard for [`GATEWAY_TIMEOUT`] is forgotten (its connections logged out). A
//! gateway the router does not know — a restarted router, or one forgotten while it
//! was cut off — is asked to send its whole presence again ([`ToGateway::Resync`]);
//! a restarted router also asks every gateway at start. History is not carried over
//! a router restart: the new router's epochs differ, so resuming clients are told
//! of the gap.

use crate::codec::{self, GatewayId, ToGateway, ToRouter, WireDelivery, WireReply};
use crate::convert::{reply_to_wire, request_from_wire};
use crate::link::Link;
use crate::nats_bus::{unix_ns, LOOP_BITS};
use crate::subjects;
use bus::{ConnRef, Delivery, Reply, Request};
use bytes::Bytes;
use futures_util::StreamExt;
use hub::Hub;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A gateway silent this long (three missed heartbeats) is forgotten.
pub const GATEWAY_TIMEOUT: Duration = Duration::from_secs(3);
/// Most gateways one router serves: the slots of the 16-bit loop id, less the
/// last, whose top loop id is [`BACKEND`]'s.
pub const MAX_GATEWAYS: usize = (1 << (16 - LOOP_BITS)) - 1;

/// Recipients of one message per gateway slot: `(slot, [(loop, [(token, seq)])])`.
type PerSlot = Vec<(u16, Vec<(u16, Vec<codec::WireTarget>)>)>;

/// A back-end publisher has no connection; its publishes use this one.
const BACKEND: ConnRef = ConnRef {
    loop_id: u16::MAX,
    token: 0,
};

struct Gateway {
    slot: u16,
    subject: String,
    last_seen: Instant,
    /// Replies decided but not sent yet (sent before the next delivery, or at the
    /// end of the batch).
    replies: Vec<WireReply>,
}

/// Known gateways by id, and by slot.
#[derive(Default)]
struct Gateways {
    by_id: HashMap<GatewayId, Gateway>,
    by_slot: Vec<Option<GatewayId>>,
}

pub struct RouterRole {
    hub: Arc<Hub>,
    /// Random per start: gateways log which router asked them.
    instance: u64,
    gateways: Gateways,
    /// What to publish, in order, once the current message is handled.
    out: Vec<(String, Bytes)>,
}

impl RouterRole {
    pub fn new(hub: Arc<Hub>) -> RouterRole {
        RouterRole {
            hub,
            instance: rand::random(),
            gateways: Gateways::default(),
            out: Vec::new(),
        }
    }

    /// Serves until the NATS subscriptions end (the process is killed).
    pub fn run(self, link: &Link) -> anyhow::Result<()> {
        let client = link.client.clone();
        link.block_on(async move { self.serve(client).await })
    }

    async fn serve(mut self, client: async_nats::Client) -> anyhow::Result<()> {
        let mut calls = client.subscribe(subjects::ROUTER).await?;
        let mut publishes = client.subscribe(subjects::PUBLISH_ALL).await?;
        // Gateways that outlived a previous router send their presence again.
        let resync = ToGateway::Resync {
            router: self.instance,
        };
        client
            .publish(subjects::GATEWAYS, codec::encode_to_gateway(&resync))
            .await?;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                Some(message) = calls.next() => match codec::decode_to_router(&message.payload) {
                    Ok(msg) => self.handle(msg),
                    Err(e) => tracing::warn!(error = %e, "dropped a message to the router"),
                },
                Some(message) = publishes.next() => {
                    let answer = self.backend_publish(&message.subject, message.payload);
                    if let Some(reply) = message.reply {
                        self.out.push((reply.to_string(), Bytes::from(answer)));
                    }
                }
                _ = tick.tick() => self.forget_silent(Instant::now()),
                else => return Ok(()),
            }
            for (subject, payload) in self.out.drain(..) {
                if let Err(e) = client.publish(subject, payload).await {
                    tracing::warn!(error = %e, "cannot send to a gateway");
                }
            }
        }
    }

    fn handle(&mut self, msg: ToRouter) {
        match msg {
            ToRouter::Batch { gateway, calls } => {
                let Some(slot) = self.known(gateway, true) else {
                    return;
                };
                for call in calls {
                    let conn = ConnRef {
                        loop_id: slot << LOOP_BITS | call.loop_id,
                        token: call.token,
                    };
                    let logout = matches!(call.request, codec::WireRequest::Logout { .. });
                    let request = request_from_wire(call.request);
                    let reply = self.call(conn, request);
                    if !logout {
                        if let Some(gw) = self.gateways.by_id.get_mut(&gateway) {
                            gw.replies.push(WireReply {
                                loop_id: call.loop_id,
                                token: call.token,
                                reply: reply_to_wire(reply),
                            });
                        }
                    }
                }
                self.flush_replies(gateway);
            }
            ToRouter::Heartbeat { gateway, .. } => {
                if self.known(gateway, true).is_some() {
                    let stats = hub::stats_json(&self.hub.stats()).to_string();
                    let subject = subjects::gateway(gateway);
                    let msg = ToGateway::RouterStats(stats);
                    self.out.push((subject, codec::encode_to_gateway(&msg)));
                }
            }
            ToRouter::Presence {
                gateway,
                replace,
                conns,
            } => {
                // A presence message is the resync itself: no need to ask for one.
                let Some(slot) = self.known(gateway, false) else {
                    return;
                };
                let loops = loops_of(slot);
                if replace {
                    let dropped = self.hub.logout_loops(loops.clone(), Instant::now());
                    tracing::info!(
                        gateway = format!("{gateway:016x}"),
                        dropped,
                        "presence replaced"
                    );
                }
                let n = conns.len();
                for (loop_id, token, user) in conns {
                    let conn = ConnRef {
                        loop_id: slot << LOOP_BITS | loop_id,
                        token,
                    };
                    self.hub.login_quietly(user, conn);
                }
                tracing::info!(
                    gateway = format!("{gateway:016x}"),
                    connections = n,
                    "presence"
                );
            }
        }
    }

    /// The gateway's slot, registering it if new (then asking it for its presence
    /// when `ask`). `None` when every slot is taken.
    fn known(&mut self, gateway: GatewayId, ask: bool) -> Option<u16> {
        let now = Instant::now();
        if let Some(gw) = self.gateways.by_id.get_mut(&gateway) {
            gw.last_seen = now;
            return Some(gw.slot);
        }
        let slots = &mut self.gateways.by_slot;
        let slot = match slots.iter().position(Option::is_none) {
            Some(free) => free,
            None if slots.len() < MAX_GATEWAYS => {
                slots.push(None);
                slots.len() - 1
            }
            None => {
                tracing::error!(max = MAX_GATEWAYS, "too many gateways: one ignored");
                return None;
            }
        };
        slots[slot] = Some(gateway);
        let subject = subjects::gateway(gateway);
        tracing::info!(gateway = format!("{gateway:016x}"), slot, "gateway joined");
        if ask {
            let resync = ToGateway::Resync {
                router: self.instance,
            };
            self.out
                .push((subject.clone(), codec::encode_to_gateway(&resync)));
        }
        self.gateways.by_id.insert(
            gateway,
            Gateway {
                slot: slot as u16,
                subject,
                last_seen: now,
                replies: Vec::new(),
            },
        );
        Some(slot as u16)
    }

    /// Answers one request; a publish's deliveries are queued for sending, one
    /// message per gateway, each after that gateway's pending replies.
    fn call(&mut self, conn: ConnRef, request: Request) -> Reply {
        let published_ns = unix_ns();
        let mut batches: Vec<(u16, Delivery)> = Vec::new();
        let reply = self.hub.handle(conn, request, &mut |loop_id, batch| {
            batches.push((loop_id, batch))
        });
        if batches.is_empty() {
            return reply;
        }
        // One publish (or several, for a PublishBatch): the batches of one message
        // are consecutive; each message goes to each gateway once.
        let mut current: Option<Arc<bus::Message>> = None;
        let mut per_slot: PerSlot = Vec::new();
        for (loop_id, batch) in batches {
            if let Some(msg) = current.take_if(|m| !Arc::ptr_eq(m, &batch.msg)) {
                self.queue_deliveries(&msg, &mut per_slot, published_ns);
            }
            current.get_or_insert_with(|| batch.msg.clone());
            let slot = loop_id >> LOOP_BITS;
            let local = loop_id & ((1 << LOOP_BITS) - 1);
            let targets = batch
                .targets
                .iter()
                .map(|t| (t.token, t.epoch, t.seq))
                .collect();
            match per_slot.iter_mut().find(|(s, _)| *s == slot) {
                Some((_, loops)) => loops.push((local, targets)),
                None => per_slot.push((slot, vec![(local, targets)])),
            }
        }
        if let Some(msg) = current {
            self.queue_deliveries(&msg, &mut per_slot, published_ns);
        }
        reply
    }

    /// Queues one message per gateway slot in `per_slot` (emptied), each after the
    /// replies that gateway is owed.
    fn queue_deliveries(&mut self, msg: &bus::Message, per_slot: &mut PerSlot, published_ns: u64) {
        for (slot, loops) in per_slot.drain(..) {
            // A slot freed meanwhile (its gateway was forgotten): nobody to send to.
            let Some(Some(gateway)) = self.gateways.by_slot.get(usize::from(slot)).copied() else {
                continue;
            };
            self.flush_replies(gateway);
            let delivery = ToGateway::Deliver(WireDelivery {
                subject: msg.subject,
                payload: msg.payload.clone(),
                published_ns,
                loops,
            });
            self.out.push((
                subjects::gateway(gateway),
                codec::encode_to_gateway(&delivery),
            ));
        }
    }

    fn flush_replies(&mut self, gateway: GatewayId) {
        if let Some(gw) = self.gateways.by_id.get_mut(&gateway) {
            if !gw.replies.is_empty() {
                let msg = ToGateway::Replies(std::mem::take(&mut gw.replies));
                self.out
                    .push((gw.subject.clone(), codec::encode_to_gateway(&msg)));
            }
        }
    }

    /// A back-end's publish to `myriad.pub.<subject>` (payload = the message, as
    /// the body of `POST /pub/<subject>`); the answer is the same JSON.
    fn backend_publish(&mut self, subject: &str, payload: Bytes) -> String {
        let Some(id) = subject
            .strip_prefix(subjects::PUBLISH_PREFIX)
            .and_then(|s| s.parse::<u64>().ok())
        else {
            return serde_json::json!({"error": format!("bad subject {subject}: want myriad.pub.<u64>")})
                .to_string();
        };
        match self.call(
            BACKEND,
            Request::Publish {
                subject: id,
                payload,
            },
        ) {
            Reply::Published {
                connections, users, ..
            } => serde_json::json!({"connections": connections, "users": users}).to_string(),
            Reply::Unavailable(why) => serde_json::json!({ "error": why }).to_string(),
            other => serde_json::json!({ "error": format!("{other:?}") }).to_string(),
        }
    }

    /// Forgets gateways silent for [`GATEWAY_TIMEOUT`]: logs their connections out.
    fn forget_silent(&mut self, now: Instant) {
        let silent: Vec<GatewayId> = self
            .gateways
            .by_id
            .iter()
            .filter(|(_, gw)| now.saturating_duration_since(gw.last_seen) >= GATEWAY_TIMEOUT)
            .map(|(&id, _)| id)
            .collect();
        for id in silent {
            if let Some(gw) = self.gateways.by_id.remove(&id) {
                self.gateways.by_slot[usize::from(gw.slot)] = None;
                let dropped = self.hub.logout_loops(loops_of(gw.slot), now);
                tracing::warn!(
                    gateway = format!("{id:016x}"),
                    dropped,
                    "gateway silent: forgotten"
                );
            }
        }
    }
}

/// The router-side loop ids of gateway `slot`.
fn loops_of(slot: u16) -> std::ops::Range<u16> {
    let first = slot << LOOP_BITS;
    first..first + (1 << LOOP_BITS)
}
