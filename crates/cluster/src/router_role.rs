//! The router role over NATS (`myriad serve --role router`): the [`Hub`] answering
//! every gateway's bundles, and back-ends' publishes on `myriad.pub.<subject>`.
//!
//! One task handles everything in arrival order, so what it sends a gateway leaves
//! in the order the hub decided it: a login's reply before the deliveries that
//! follow it, and each user's deliveries in sequence order. Everything one handled
//! message (a gateway's bundle of calls, a back-end's publish) owes a gateway — its
//! replies and, per publish, one delivery carrying that gateway's recipients — goes
//! to it as ONE [`ToGateway::Bundle`], in the order it was decided.
//!
//! Presence: the hub's router sees a gateway's connection as loop id
//! `seat << LOOP_BITS | loop` ([`crate::loop_id`]), where `seat` is the gateway's
//! number here. A gateway not heard for
//! [`GATEWAY_TIMEOUT`](crate::timing::GATEWAY_TIMEOUT) while others were
//! ([`GATEWAY_TIMEOUT_ALONE`](crate::timing::GATEWAY_TIMEOUT_ALONE) when none
//! was) is forgotten (its connections logged out). A gateway the router does not
//! know — a restarted router, or one forgotten while it was cut off — is asked
//! to send its whole presence again ([`ToGateway::Resync`]); a restarted router also asks every gateway at start. History is not carried over
//! a router restart: the new router's epochs differ, so resuming clients are told
//! of the gap.
//!
//! Shards (`--router-shards K`, shard `i` listening on `myriad.router.<i>`): shard
//! `i` owns user `u` when `u % K == i` — presence, sequence numbers, history — and
//! subject `s` when `s % K == i` — its follower list (the index holds only its own
//! subjects' edges, loaded from the store so) and its publishes: it reaches the
//! followers it owns and forwards the others to their shards, answering once they
//! counted ([`forward`], [`waiting`]). With one router none of that exists: no
//! forward path, no waiting.
//!
//! Layout: [`drain`] (SIGTERM: stop taking publishes, finish, exit), [`gateways`]
//! (the gateway table), [`publishes`] (every publish's one way into the hub, and a
//! run of publish calls), [`forward`] and [`waiting`] (publishing across shards),
//! [`in_order`] (a batch over several shards in its order), [`backend`]
//! (`myriad.pub.<subject>`), [`port`] (a turn of the HTTP publish port's requests;
//! the port itself is [`crate::publish_port`]), [`owed`] (what each gateway is sent,
//! bundled), [`replay`] (those bundles numbered and kept, sent again to a gateway
//! that lost some), [`stats`] (the counters).

use crate::codec::{self, CallRequest, GatewayItem, ToGateway, ToRouter, WireReply};
use crate::fragment;
use crate::loop_id::{self, loops_of};
use crate::publish_port::{self, PublishPort};
use crate::subjects;
use crate::timing::{unix_ns, TICK};
use backend::next_or_never;
use bus::{ConnRef, Mail, Reply, Request};
use bytes::Bytes;
use forward::{is_any_publish, PublishCall};
use futures_util::StreamExt;
#[cfg(test)]
use gateways::silent;
use gateways::Gateways;
use hub::Hub;
use nats_link::Link;
pub use replay::DEFAULT_RING_BYTES;
use stats::Counters;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};
/// One loop's recipients of a message: `(the gateway's own loop, its targets)`.
type LoopTargets = (u16, Vec<bus::Target>);

/// Recipients per delivery message: at ≤ 15 B each (varint token and seq), 64 Ki
/// recipients stay under 1 MiB, NATS's default max_payload, with the payload.
const MAX_TARGETS: usize = 1 << 16;

/// A back-end publisher has no connection; its publishes use this one.
const BACKEND: ConnRef = ConnRef {
    loop_id: loop_id::BACKEND,
    token: 0,
};

/// A gateway's pending items are sent once they weigh this much (NATS refuses
/// messages over its max_payload, 1 MiB by default).
const BUNDLE_BYTES: usize = 256 << 10;

pub struct RouterRole {
    hub: Arc<Hub>,
    /// Which users this router owns (`--router-shards`).
    shards: crate::shards::Shards,
    /// Random per start: gateways log which router asked them.
    instance: u64,
    gateways: Gateways,
    /// What to publish, in order, once the current message is handled.
    out: Vec<(String, Bytes)>,
    /// How many gateways are known, for [`RouterRole::stats_fn`] (read on the admin
    /// listener's thread; the gateway table itself stays on the router's task).
    known_count: Arc<AtomicUsize>,
    /// What it sent the gateways and what went wrong between shards and on the way
    /// to gateways, counted for the stats (read there too).
    counters: Arc<Counters>,
    /// Signalled by the NATS link on every (re)connect ([`RouterRole::nats_events`]).
    reconnected: Arc<tokio::sync::Notify>,
    /// Publishes waiting for other shards' counts (`--router-shards`).
    waiting: waiting::Waiting,
    /// Ordered batches waiting for other shards' parts (`--router-shards`).
    in_order: in_order::InOrder,
    /// Followers to forward to each shard, sent once the current message is handled.
    forwards: forward::Outbox,
    /// Messages from other shards over max_payload, until their last part.
    shard_parts: fragment::Reassembly,
    /// `--publish-listen`: served once the router runs.
    publish_port: Option<PublishPort>,
    /// Each gateway's recent bundles, for a gateway that lost some ([`replay`]).
    rings: replay::Rings,
    /// A message's recipients by gateway while its deliveries are queued ([`owed`]).
    per_seat: owed::PerSeat,
    /// Notified on SIGTERM: start the drain ([`drain`]).
    stop: Arc<tokio::sync::Notify>,
    /// How long a drain may take at most (`--drain`).
    drain: Duration,
    /// While draining: when the drain ends at the latest.
    draining: Option<Instant>,
    /// The publish port's drain, once the port is served.
    port_drain: Option<publish_port::PortDrain>,
}

impl RouterRole {
    pub fn new(hub: Arc<Hub>) -> RouterRole {
        RouterRole {
            hub,
            shards: crate::shards::Shards::default(),
            instance: rand::random(),
            gateways: Gateways::default(),
            out: Vec::new(),
            known_count: Arc::new(AtomicUsize::new(0)),
            counters: Arc::default(),
            reconnected: Arc::default(),
            waiting: waiting::Waiting::default(),
            in_order: in_order::InOrder::new(crate::shards::Shards::default()),
            forwards: Vec::new(),
            shard_parts: fragment::Reassembly::default(),
            publish_port: None,
            rings: replay::Rings::new(replay::DEFAULT_RING_BYTES),
            per_seat: owed::PerSeat::default(),
            stop: Arc::default(),
            drain: Duration::from_secs(5),
            draining: None,
            port_drain: None,
        }
    }

    /// Keeps at most `bytes` of each gateway's recent bundles to send again
    /// (`--replay-bytes`).
    pub fn with_replay_bytes(mut self, bytes: usize) -> RouterRole {
        self.rings.max_bytes = bytes;
        self
    }

    /// This router also answers back-ends' HTTP publishes on `port`.
    pub fn with_publish_port(mut self, port: PublishPort) -> RouterRole {
        self.port_drain = Some(port.drain());
        self.publish_port = Some(port);
        self
    }

    /// This router as shard `shards.index` of `shards.count`.
    pub fn with_shards(mut self, shards: crate::shards::Shards) -> RouterRole {
        self.shards = shards;
        self.in_order = in_order::InOrder::new(shards);
        self.forwards = vec![(Vec::new(), 0); usize::from(shards.count)];
        self.rings.shard = shards.index;
        self.hub.set_friends_shard(shards.index, shards.count);
        self
    }

    /// The callback for the router's [`Link`]: logs NATS events and, on a reconnect,
    /// has the router forget and re-ask every gateway.
    pub fn nats_events(&self) -> impl Fn(async_nats::Event) + Send + Sync + 'static {
        let reconnected = self.reconnected.clone();
        move |event| {
            tracing::info!(%event, "NATS");
            if let async_nats::Event::Connected = event {
                reconnected.notify_one();
            }
        }
    }

    /// Serves until the NATS subscriptions end, or until a drain
    /// ([`RouterRole::stop_handle`]) is done.
    pub fn run(self, link: &Link) -> anyhow::Result<()> {
        let client = link.client.clone();
        link.block_on(async move { self.serve(client).await })
    }

    async fn serve(mut self, client: async_nats::Client) -> anyhow::Result<()> {
        let mut calls = client
            .subscribe(subjects::router(self.shards.index, self.shards.count))
            .await?;
        let mut publishes = client.subscribe(subjects::PUBLISH_ALL).await?;
        let mut stats = client.subscribe(subjects::STATS).await?;
        // Shards hand each other followers and counts.
        let mut forwarded = None;
        if self.shards.count > 1 {
            let subject = subjects::forward(self.shards.index);
            forwarded = Some(client.subscribe(subject).await?);
        }
        // Gateways that outlived a previous router send their presence again.
        let resync = ToGateway::Resync {
            router: self.instance,
        };
        client
            .publish(subjects::GATEWAYS, codec::encode_to_gateway(&resync))
            .await?;
        // One router takes the port's publishes in its own turn; shards send them
        // over NATS to the subject's shard.
        let mut port_calls = match self.publish_port.take() {
            Some(port) if self.shards.count == 1 => Some(port.serve_to_router()?),
            Some(port) => {
                port.serve_over_nats(client.clone())?;
                None
            }
            None => None,
        };
        let mut answers = port::Answers::new();
        let mut tick = tokio::time::interval(TICK);
        // Membership events, from under the hub's lock to this task's publishes.
        let (presence_tx, mut presence_rx) = tokio::sync::mpsc::unbounded_channel();
        self.hub.add_sink(Box::new(move |events, time_ms| {
            for event in events {
                let _ = presence_tx.send(presence::message(event, time_ms));
            }
        }));
        loop {
            tokio::select! {
                Some(message) = presence_rx.recv() => self.out.push(message),
                Some(message) = calls.next() => match codec::decode_to_router(&message.payload) {
                    Ok(msg) => self.handle(msg),
                    Err(e) => tracing::warn!(error = %e, "dropped a message to the router"),
                },
                Some(message) = publishes.next() => {
                    let reply = message.reply.map(|r| r.to_string());
                    self.backend_publish(&message.subject, message.payload, reply);
                }
                Some(call) = publish_port::next_call(&mut port_calls) => {
                    if let Some(rest) = port_calls.as_mut() {
                        self.port_turn(call, rest, &mut answers);
                    }
                }
                Some(message) = next_or_never(&mut forwarded) => {
                    match codec::decode_to_shard(&message.payload) {
                        Ok(msg) => self.handle_shard(msg),
                        Err(e) => tracing::warn!(error = %e, "dropped a message from a shard"),
                    }
                }
                Some(message) = stats.next() => {
                    if let Some(reply) = message.reply {
                        self.out.push((reply.to_string(), Bytes::from(self.stats().to_string())));
                    }
                }
                _ = tick.tick() => {
                    self.presence_pushes();
                    self.friends_to_shards();
                    let now = Instant::now();
                    self.forget_silent(now);
                    let known = &self.gateways.by_id;
                    self.rings.age(|id| known.contains_key(&id), now);
                    self.expire_waiting(now);
                    self.expire_in_order(now);
                }
                _ = self.reconnected.notified() => self.resync_all(Instant::now()),
                _ = self.stop.notified(), if !self.is_draining() => self.start_drain(Instant::now()),
                _ = tokio::time::sleep(drain::DRAIN_CHECK), if self.is_draining() => {}
                else => return Ok(()),
            }
            self.flush_forwards();
            self.flush_all();
            let max_payload = client.server_info().max_payload;
            for (subject, payload) in self.out.drain(..) {
                // What goes to gateways may exceed max_payload (a huge history read),
                // and so may a forward (a large payload to many followers): it crosses
                // in parts. Replies to back-ends are small JSON.
                let parts = if subject.starts_with(subjects::GATEWAY_PREFIX) {
                    fragment::split(payload, max_payload)
                } else if subjects::is_forward(&subject) {
                    fragment::split_for_shard(payload, max_payload)
                } else {
                    vec![payload]
                };
                for part in parts {
                    if let Err(e) = client.publish(subject.clone(), part).await {
                        tracing::warn!(error = %e, "cannot send to a gateway");
                    }
                }
            }
            for (to, reply) in answers.drain(..) {
                let _ = to.send(reply);
            }
            if self.drained(Instant::now()) {
                client.flush().await?;
                tracing::info!("drained: NATS flushed, stopping");
                return Ok(());
            }
        }
    }

    fn handle(&mut self, msg: ToRouter) {
        match msg {
            ToRouter::Bundle { gateway, mut calls } => {
                let Some(seat) = self.known(gateway, true) else {
                    return;
                };
                if self.is_draining() {
                    calls = self.refuse_publishes(gateway, calls);
                }
                let mut calls = calls.into_iter().peekable();
                while let Some(call) = calls.next() {
                    // A shard's part of a batch over several shards, in order.
                    if matches!(call.request, CallRequest::PublishInOrder { .. }) {
                        self.publish_in_order(gateway, call);
                        continue;
                    }
                    // A run of publishes: one publish through the hub (one
                    // durable commit), the shards dividing it if there are several.
                    if is_any_publish(&call) {
                        let mut run = vec![PublishCall::of_gateway(gateway, call)];
                        while let Some(next) = calls.next_if(is_any_publish) {
                            run.push(PublishCall::of_gateway(gateway, next));
                        }
                        self.publish_calls(run);
                        continue;
                    }
                    let conn = ConnRef {
                        loop_id: loop_id::pack(seat, call.loop_id),
                        token: call.token,
                    };
                    let logout = matches!(call.request, CallRequest::Bus(Request::Logout { .. }));
                    let reply = self.call(conn, call.request.into_request());
                    if !logout {
                        let reply = WireReply {
                            loop_id: call.loop_id,
                            token: call.token,
                            part: call.part,
                            reply,
                        };
                        self.push_item(gateway, GatewayItem::Reply(reply), 32);
                    }
                }
            }
            ToRouter::Heartbeat { gateway, place, .. } => {
                if let Some(place) = place {
                    self.take_place(gateway, place);
                }
                if self.known(gateway, true).is_some() {
                    let stats = self.stats().to_string();
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
                let Some(seat) = self.known(gateway, false) else {
                    return;
                };
                let loops = loops_of(seat);
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
                    // A gateway sends its whole presence to every shard.
                    if !self.shards.owns(user) {
                        continue;
                    }
                    let conn = ConnRef {
                        loop_id: loop_id::pack(seat, loop_id),
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
            ToRouter::Replay {
                gateway,
                lane,
                from,
            } => self.replay(gateway, lane, from),
        }
    }

    /// Answers one request other than a publish (publishes take
    /// [`RouterRole::publish_calls`]); any deliveries are queued for the gateways
    /// all the same, each after what that gateway is already owed.
    fn call(&mut self, conn: ConnRef, request: Request) -> Reply {
        let published_ns = unix_ns();
        let mut batches: Vec<(u16, Mail)> = Vec::new();
        let touches_store = matches!(
            request,
            Request::ChangeSubscriptions { .. }
                | Request::Subscriptions { .. }
                | Request::Online { .. }
        );
        let (hub, out) = (&self.hub, &mut batches);
        let handle = move || {
            hub.handle(conn, request, &mut |loop_id, batch| {
                out.push((loop_id, batch))
            })
        };
        // The sync PostgreSQL client blocks on a runtime of its own, which tokio
        // forbids inside this one (the NATS link's): a request that reaches the
        // store runs on a thread of its own. Those are rare (subscription changes
        // and reads, friends online); publishes and logins never touch the store.
        let reply = if touches_store {
            std::thread::scope(|s| s.spawn(handle).join())
                .unwrap_or_else(|_| Reply::Unavailable("the store call panicked".into()))
        } else {
            handle()
        };
        self.queue_deliveries(batches, published_ns);
        reply
    }
}

mod backend;
mod drain;
mod forward;
mod gateways;
mod in_order;
mod owed;
mod port;
mod presence;
mod publishes;
mod replay;
mod stats;
#[cfg(test)]
mod tests;
mod waiting;
