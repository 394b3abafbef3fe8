//! [`NatsBus`]: the gateway's [`Bus`] when the router runs in another process.
//!
//! `call` never blocks a loop: it queues the request for the link's sender task and
//! returns `None` (the reply comes later through the loop's mailbox), except
//! `Logout`, answered `Done` at once. The sender task drains whatever queued since
//! its last wake-up and sends it as ONE [`ToRouter::Batch`] (logins, logouts and
//! publishes of all loops together: batching by wake-up, so a quiet gateway sends
//! at once and a busy one sends few large messages). The receiver task turns the
//! router's messages on this gateway's subject into mailbox items: replies to their
//! connection's loop, each delivery as one batch per loop. With several router
//! shards, a call divided among them is answered once all parts replied, or from
//! the receiver's timer with an error when one did not ([`crate::shard_calls`]).
//!
//! The sender task also keeps this gateway's presence (connection → user) so that
//! it can send it again when the router asks ([`ToGateway::Resync`]: the router
//! restarted, or forgot a silent gateway) or after NATS reconnects. That costs
//! ~24 B per logged-in connection in this process: the loops' slabs are not
//! reachable from the link's thread.

use crate::codec::{
    self, GatewayId, GatewayItem, ToGateway, ToRouter, WireAnswer, WireCall, WireDelivery,
    WireReply,
};
use crate::convert::{reply_from_wire, request_to_wire};
use crate::fragment::Reassembly;
use crate::link::Link;
use crate::shard_calls::{self, Gathered, Gathers};
use crate::subjects;
use async_nats::Client;
use bus::{Bus, ConnRef, Delivery, Inbound, Mailbox, Message, Reply, Request, Target};
use futures_util::StreamExt;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// Loop ids a gateway may use: the router packs (gateway slot, loop) into one u16
/// loop id with this many bits for the loop.
pub const LOOP_BITS: u32 = 6;
/// Most loops a gateway process may run (see [`LOOP_BITS`]).
pub const MAX_LOOPS: usize = 1 << LOOP_BITS;

/// Between heartbeats; the router forgets a gateway silent for
/// [`crate::router_role::GATEWAY_TIMEOUT`].
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// A batch is sent once its payloads reach this size (NATS refuses messages over
/// its max_payload, 1 MiB by default).
const BATCH_BYTES: usize = 256 << 10;
/// Connections per [`ToRouter::Presence`] chunk (≤ 17 B each encoded).
const PRESENCE_CHUNK: usize = 32 * 1024;

/// What the loops (and the link's events) hand the sender task.
enum Outgoing {
    Call(WireCall),
    /// Send the whole presence again (the router asked, or NATS reconnected).
    Resync,
}

/// Counters and the router's last stats, for this gateway's `/stats`.
#[derive(Default)]
struct Shared {
    /// The last counters of each router shard, by shard.
    router_stats: std::collections::BTreeMap<u64, serde_json::Value>,
    batches_sent: u64,
    calls_sent: u64,
    deliveries_received: u64,
    /// Calls divided among shards answered with an error because a shard did not
    /// answer within [`shard_calls::GATHER_TIMEOUT`], and replies that came after.
    gathers_expired: u64,
    gather_replies_late: u64,
}

pub struct NatsBus {
    tx: mpsc::UnboundedSender<Outgoing>,
    client: Client,
}

/// The gateway side of the link: made before the loops (for `/stats` and so that
/// NATS reconnects can ask for a resync), started once the loops' mailboxes exist.
pub struct GatewayLink {
    link: Link,
    pub id: GatewayId,
    /// The supervisor's number for this gateway (`--supervised-place`).
    place: Option<u32>,
    /// Router shards (`--router-shards`), and the calls divided among them.
    shards: u16,
    gathers: Arc<Mutex<Gathers>>,
    shared: Arc<Mutex<Shared>>,
    tx: mpsc::UnboundedSender<Outgoing>,
    /// Taken by [`GatewayLink::start`].
    parts: Mutex<Option<Parts>>,
}

/// What the tasks need once the loops exist: the queue of calls and the
/// subscriptions (made at connect, so nothing sent to this gateway is missed).
struct Parts {
    rx: mpsc::UnboundedReceiver<Outgoing>,
    mine: async_nats::Subscriber,
    all: async_nats::Subscriber,
}

impl GatewayLink {
    /// Connects to NATS at `url` as a new gateway, in the supervisor's `place` if any,
    /// talking to `shards` routers.
    pub fn connect(url: &str, place: Option<u32>, shards: u16) -> anyhow::Result<GatewayLink> {
        let id: GatewayId = rand::random();
        let (tx, rx) = mpsc::unbounded_channel();
        let events = tx.clone();
        let link = Link::connect(url, &format!("myriad gateway {id:016x}"), move |event| {
            tracing::info!(%event, "NATS");
            if let async_nats::Event::Connected = event {
                // A reconnect: what crossed meanwhile may be lost; tell the router
                // everything again.
                let _ = events.send(Outgoing::Resync);
            }
        })?;
        let client = link.client.clone();
        let own = subjects::gateway(id);
        let (mine, all) = link.block_on(async move {
            let mine = client.subscribe(own).await;
            let all = client.subscribe(subjects::GATEWAYS).await;
            (mine, all)
        });
        Ok(GatewayLink {
            link,
            id,
            place,
            shards: shards.max(1),
            gathers: Arc::default(),
            shared: Arc::default(),
            tx,
            parts: Mutex::new(Some(Parts {
                rx,
                mine: mine?,
                all: all?,
            })),
        })
    }

    pub fn url(&self) -> &str {
        &self.link.url
    }

    /// This gateway's part of `/stats`: its id, link counters and the router's
    /// counters as of the last heartbeat.
    pub fn stats(&self) -> serde_json::Value {
        let gathers_waiting = self.gathers.lock().len();
        let shared = self.shared.lock();
        let mut doc = serde_json::json!({
            "role": "gateway",
            "gateway_id": format!("{:016x}", self.id),
            "nats": self.link.url,
            "nats_batches_sent": shared.batches_sent,
            "nats_calls_sent": shared.calls_sent,
            "nats_deliveries_received": shared.deliveries_received,
            "nats_gathers_waiting": gathers_waiting,
            "nats_gathers_expired": shared.gathers_expired,
            "nats_gather_replies_late": shared.gather_replies_late,
        });
        if let (Some(doc), Some(router)) = (doc.as_object_mut(), merge_shards(&shared.router_stats))
        {
            doc.extend(router);
        }
        doc
    }

    /// Starts the sender and receiver tasks for the loops' `mailboxes` (at most
    /// [`MAX_LOOPS`]; loop ids beyond the mailboxes are ignored) and returns the
    /// bus for the loops.
    ///
    /// # Panics
    /// When called twice.
    pub fn start(&self, mailboxes: Vec<Arc<Mailbox>>) -> Arc<NatsBus> {
        let Parts { rx, mine, all } = self
            .parts
            .lock()
            .take()
            .expect("GatewayLink::start called twice");
        let client = self.link.client.clone();
        let sender = Sender {
            client: client.clone(),
            id: self.id,
            place: self.place,
            shards: self.shards,
            gathers: self.gathers.clone(),
            presence: HashMap::new(),
            shared: self.shared.clone(),
        };
        self.link.spawn(sender.run(rx));
        let receiver = Receiver {
            mailboxes,
            tx: self.tx.clone(),
            shared: self.shared.clone(),
            parts: Reassembly::default(),
            gathers: self.gathers.clone(),
            shards: self.shards,
        };
        self.link
            .spawn(receiver.run(futures_util::stream::select(mine, all)));
        Arc::new(NatsBus {
            tx: self.tx.clone(),
            client,
        })
    }
}

impl Bus for NatsBus {
    fn call(&self, conn: ConnRef, request: Request) -> Option<Reply> {
        let logout = matches!(request, Request::Logout { .. });
        let connected = self.client.connection_state() == async_nats::connection::State::Connected;
        if !connected && !logout {
            return Some(Reply::Unavailable(
                "the NATS link to the router is down".into(),
            ));
        }
        let call = WireCall {
            loop_id: conn.loop_id,
            token: conn.token,
            part: None,
            request: request_to_wire(request),
        };
        if let Some(refusal) = too_large(&self.client, &call) {
            return Some(refusal);
        }
        if self.tx.send(Outgoing::Call(call)).is_err() {
            return Some(Reply::Unavailable("the NATS link has stopped".into()));
        }
        logout.then_some(Reply::Done)
    }
}

/// The task that sends everything of this gateway to the router.
struct Sender {
    client: Client,
    id: GatewayId,
    place: Option<u32>,
    shards: u16,
    gathers: Arc<Mutex<Gathers>>,
    /// (loop, token) → user, for resyncs.
    presence: HashMap<(u16, u32), u64>,
    shared: Arc<Mutex<Shared>>,
}

impl Sender {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Outgoing>) {
        let mut heartbeat = tokio::time::interval(HEARTBEAT);
        let mut items = Vec::new();
        let mut calls = Vec::new();
        loop {
            tokio::select! {
                n = rx.recv_many(&mut items, 4096) => {
                    if n == 0 {
                        return;
                    }
                    // Under the server's max_payload too (a NATS server may lower it).
                    let limit = match self.client.server_info().max_payload {
                        0 => BATCH_BYTES,
                        max => BATCH_BYTES.min(max / 2),
                    };
                    let mut bytes = 0;
                    for item in items.drain(..) {
                        match item {
                            Outgoing::Call(call) => {
                                self.track(&call);
                                let w = weight(&call);
                                // A large call starts a batch of its own rather than
                                // pushing the current one past max_payload.
                                if bytes + w > limit && !calls.is_empty() {
                                    self.send_batch(&mut calls).await;
                                    bytes = 0;
                                }
                                bytes += w;
                                calls.push(call);
                                if bytes >= limit {
                                    self.send_batch(&mut calls).await;
                                    bytes = 0;
                                }
                            }
                            Outgoing::Resync => {
                                self.send_batch(&mut calls).await;
                                bytes = 0;
                                self.send_presence().await;
                            }
                        }
                    }
                    self.send_batch(&mut calls).await;
                }
                _ = heartbeat.tick() => {
                    let msg = ToRouter::Heartbeat {
                        gateway: self.id,
                        connections: self.presence.len() as u64,
                        place: self.place,
                    };
                    self.send(&msg).await;
                }
            }
        }
    }

    fn track(&mut self, call: &WireCall) {
        let key = (call.loop_id, call.token);
        match call.request {
            codec::WireRequest::Login { user, .. } => {
                self.presence.insert(key, user);
            }
            codec::WireRequest::Logout { .. } => {
                self.presence.remove(&key);
            }
            _ => {}
        }
    }

    async fn send_batch(&mut self, calls: &mut Vec<WireCall>) {
        if calls.is_empty() {
            return;
        }
        let n = calls.len() as u64;
        if self.shards <= 1 {
            let msg = ToRouter::Batch {
                gateway: self.id,
                calls: std::mem::take(calls),
            };
            self.send_to(subjects::ROUTER, &msg).await;
        } else {
            let shards = crate::Shards {
                index: 0,
                count: self.shards,
            };
            let now = Instant::now();
            let per_shard = shard_calls::route(std::mem::take(calls), shards, &self.gathers, now);
            for (shard, calls) in per_shard.into_iter().enumerate() {
                if !calls.is_empty() {
                    let msg = ToRouter::Batch {
                        gateway: self.id,
                        calls,
                    };
                    let subject = subjects::router(shard as u16, self.shards);
                    self.send_to(&subject, &msg).await;
                }
            }
        }
        let mut shared = self.shared.lock();
        shared.batches_sent += 1;
        shared.calls_sent += n;
    }

    async fn send_presence(&mut self) {
        let all: Vec<(u16, u32, u64)> = self
            .presence
            .iter()
            .map(|(&(l, t), &u)| (l, t, u))
            .collect();
        let mut chunks = all.chunks(PRESENCE_CHUNK);
        let first = chunks.next().unwrap_or(&[]);
        let msg = ToRouter::Presence {
            gateway: self.id,
            replace: true,
            conns: first.to_vec(),
        };
        self.send(&msg).await;
        for chunk in chunks {
            let msg = ToRouter::Presence {
                gateway: self.id,
                replace: false,
                conns: chunk.to_vec(),
            };
            self.send(&msg).await;
        }
        tracing::info!(connections = all.len(), "presence sent to the router");
    }

    /// To every router shard (heartbeats, presence: each shard keeps what it owns).
    async fn send(&self, msg: &ToRouter) {
        for shard in 0..self.shards {
            self.send_to(&subjects::router(shard, self.shards), msg)
                .await;
        }
    }

    async fn send_to(&self, subject: &str, msg: &ToRouter) {
        if let Err(e) = self
            .client
            .publish(subject.to_string(), codec::encode_to_router(msg))
            .await
        {
            tracing::warn!(error = %e, "cannot send to the router");
        }
    }
}

/// Room kept under max_payload for the batch's header (version, gateway id, counts).
const BATCH_HEADER: usize = 64;

/// A request that NATS would refuse (its batch over the server's max_payload, 1 MiB
/// by default) is answered here at once with a clear error, instead of the client
/// waiting for a reply that never comes. Encoded only when the rough weight says it
/// may be near the limit.
fn too_large(client: &Client, call: &WireCall) -> Option<Reply> {
    let max = client.server_info().max_payload;
    if max == 0 || weight(call) < max / 4 {
        return None;
    }
    let msg = ToRouter::Batch {
        gateway: 0,
        calls: vec![call.clone()],
    };
    let size = codec::encode_to_router(&msg).len() + BATCH_HEADER;
    (size > max).then(|| {
        Reply::Unavailable(format!(
            "the request is too large for the NATS link to the router: {size} bytes encoded, \
             the NATS server's max_payload is {max} bytes; send it in smaller parts (fewer \
             lines per POST) or raise max_payload in nats-server's configuration"
        ))
    })
}

/// Bytes a call adds to a batch, roughly.
fn weight(call: &WireCall) -> usize {
    16 + match &call.request {
        codec::WireRequest::Publish { payload, .. } => payload.len(),
        codec::WireRequest::PublishBatch { items } => items.iter().map(|(_, p)| p.len() + 10).sum(),
        codec::WireRequest::ChangeSubscriptions { edges, .. } => edges.len() * 20,
        _ => 0,
    }
}

/// The task that hands the router's messages to the loops.
struct Receiver {
    mailboxes: Vec<Arc<Mailbox>>,
    tx: mpsc::UnboundedSender<Outgoing>,
    shared: Arc<Mutex<Shared>>,
    /// Messages over max_payload, until their last part.
    parts: Reassembly,
    /// Calls divided among router shards, whose replies are summed.
    gathers: Arc<Mutex<Gathers>>,
    /// Router shards: with one, nothing is gathered and nothing expires.
    shards: u16,
}

impl Receiver {
    async fn run(
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
        loop {
            tokio::select! {
                message = messages.next() => {
                    let Some(message) = message else {
                        return;
                    };
                    match codec::decode_to_gateway(&message.payload) {
                        Ok(msg) => self.handle(msg),
                        Err(e) => tracing::warn!(error = %e, subject = %message.subject, "dropped"),
                    }
                }
                _ = tick_or_never(&mut expiry) => self.expire(Instant::now()),
            }
        }
    }

    fn handle(&mut self, msg: ToGateway) {
        match msg {
            ToGateway::Part(part) => {
                let whole = self.parts.add(part);
                match whole.map(|bytes| codec::decode_to_gateway(&bytes)) {
                    Some(Ok(msg)) => self.handle(msg),
                    Some(Err(e)) => tracing::warn!(error = %e, "dropped a message in parts"),
                    None => {}
                }
            }
            ToGateway::Batch(items) => {
                for item in items {
                    match item {
                        GatewayItem::Reply(r) => self.reply(r),
                        GatewayItem::Deliver(d) => self.deliver(d),
                    }
                }
            }
            ToGateway::Resync { router } => {
                tracing::info!(
                    router = format!("{router:016x}"),
                    "router asks for presence"
                );
                let _ = self.tx.send(Outgoing::Resync);
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

    fn answer(&self, loop_id: u16, token: u32, answer: WireAnswer) {
        if let Some(mailbox) = self.mailboxes.get(usize::from(loop_id)) {
            let reply = reply_from_wire(answer);
            mailbox.push(Inbound::Reply { token, reply }, false);
        }
    }

    /// Answers the calls divided among shards that some shard did not answer in time.
    fn expire(&self, now: Instant) {
        let expired = self.gathers.lock().expire(now);
        if expired.is_empty() {
            return;
        }
        if let Some((_, WireAnswer::Unavailable(why))) = expired.first() {
            tracing::warn!(calls = expired.len(), first = %why, "router shards did not answer");
        }
        self.shared.lock().gathers_expired += expired.len() as u64;
        for ((loop_id, token), answer) in expired {
            self.answer(loop_id, token, answer);
        }
    }

    /// One batch per loop: the loops' mailboxes wake once per burst.
    fn deliver(&self, d: WireDelivery) {
        let published = instant_of(d.published_ns);
        let msg = Arc::new(Message {
            subject: d.subject,
            payload: d.payload,
        });
        let mut n = 0;
        for (loop_id, targets) in d.loops {
            let Some(mailbox) = self.mailboxes.get(usize::from(loop_id)) else {
                continue;
            };
            n += targets.len() as u64;
            let targets = targets
                .into_iter()
                .map(|(token, epoch, seq)| Target { token, epoch, seq })
                .collect();
            let batch = Delivery {
                msg: msg.clone(),
                published,
                targets,
            };
            mailbox.push(Inbound::Deliver(batch), false);
        }
        self.shared.lock().deliveries_received += n;
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

/// The router shards' counters as one: counts add up (each user, each subject's
/// edges and publishes live on one shard); gateways are the most any shard knows.
fn merge_shards(
    shards: &std::collections::BTreeMap<u64, serde_json::Value>,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let mut merged = shards.values().next()?.as_object()?.clone();
    for other in shards.values().skip(1).filter_map(|v| v.as_object()) {
        for (key, value) in other {
            let (Some(a), Some(b)) = (merged.get(key).and_then(|v| v.as_u64()), value.as_u64())
            else {
                continue;
            };
            let v = match key.as_str() {
                // Every shard hears from every gateway.
                "gateways" => a.max(b),
                "router_pid" | "router_shard" => a,
                _ => a + b,
            };
            merged.insert(key.clone(), v.into());
        }
    }
    merged.insert("router_shards".into(), shards.len().into());
    Some(merged)
}

/// Now in ns since the Unix epoch (what crosses processes for latency).
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The local `Instant` of a Unix time in ns (hosts' clocks are assumed in step).
fn instant_of(ns: u64) -> Instant {
    let age = Duration::from_nanos(unix_ns().saturating_sub(ns));
    Instant::now().checked_sub(age).unwrap_or_else(Instant::now)
}
