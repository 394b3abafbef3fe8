//! [`NatsBus`]: the gateway's [`Bus`] when the router runs in another process.
//!
//! `call` never blocks a loop: it queues the request for the link's sender task and
//! returns `None` (the reply comes later through the loop's mailbox), except
//! `Logout`, answered `Done` at once. The sender task drains whatever queued since
//! its last wake-up and sends it as ONE [`ToRouter::Bundle`] (logins, logouts and
//! publishes of all loops together: bundling by wake-up, so a quiet gateway sends
//! at once and a busy one sends few large messages). The receiver task turns the
//! router's messages on this gateway's subject into mailbox items: replies to their
//! connection's loop, each delivery as one batch per loop. With several router
//! shards, a call divided among them is answered once all parts replied, or from
//! the receiver's timer with an error when one did not ([`crate::shard_calls`]).
//!
//! The link keeps this gateway's presence (connection → user, and the last message
//! number each connection was sent: [`presence`]) so that it can send it again when
//! the router asks ([`ToGateway::Resync`](codec::ToGateway::Resync): the router
//! restarted, or forgot a silent gateway) or after NATS reconnects, and so that a
//! connection whose deliveries skip numbers — NATS lost some on the way, e.g. while
//! nats-server had cut this gateway off — is told to resume rather than miss them.
//! That costs ~32 B per logged-in connection in this process: the loops' slabs are
//! not reachable from the link's thread.
//!
//! Before that check comes another: the router's bundles are numbered, and a
//! gateway that lost some asks for them again and gets them in order
//! ([`numbering`]); only what the router no longer keeps makes its connections
//! resume.

mod numbering;
mod presence;
mod receiver;
mod sender;

use crate::codec::{self, CallRequest, GatewayId, ToRouter, WireCall};
use crate::fragment::Reassembly;
use crate::shard_calls::Gathers;
use crate::subjects;
use async_nats::Client;
use bus::{Bus, ConnRef, Mailbox, Reply, Request};
use nats_link::Link;
use parking_lot::Mutex;
use receiver::Receiver;
use sender::{weight, Sender};
use std::sync::Arc;
use tokio::sync::mpsc;

/// What the loops (and the link's events) hand the sender task.
enum Outgoing {
    Call(WireCall),
    /// Send the whole presence again (the router asked, or NATS reconnected).
    Resync,
    /// Ask router shard `shard` for its bundles of `lane` from `from` on again
    /// ([`numbering`]).
    Replay {
        shard: u16,
        lane: u64,
        from: u64,
    },
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
    /// answer within [`crate::shard_calls::GATHER_TIMEOUT`], and replies that came
    /// after.
    gathers_expired: u64,
    gather_replies_late: u64,
    /// Times the NATS connection was lost. What the router sent this gateway while
    /// it was down is lost; a connection that missed some is told to resume at its
    /// next delivery ([`presence`]).
    disconnects: u64,
    /// Messages the NATS client dropped because this gateway's subscription queue
    /// was full (its slow-consumer events): lost the same way.
    slow_consumer_drops: u64,
    /// Connections told to resume: their deliveries skipped numbers, or bundles
    /// were lost for good ([`numbering`]).
    lost_told: u64,
    /// Router bundles that skipped numbers (the missing ones asked again), came
    /// twice (dropped), and gaps no answer filled in time.
    batch_gaps: u64,
    batches_twice: u64,
    gaps_given_up: u64,
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
    /// Notified when NATS reconnected or dropped a message: the receiver asks for
    /// what it may have lost.
    lost_some: Arc<tokio::sync::Notify>,
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
    /// Connects to NATS as `nats` says, as a new gateway, in the supervisor's `place`
    /// if any, talking to `shards` routers.
    pub fn connect(
        nats: &nats_link::NatsConfig,
        place: Option<u32>,
        shards: u16,
    ) -> anyhow::Result<GatewayLink> {
        let id: GatewayId = rand::random();
        let (tx, rx) = mpsc::unbounded_channel();
        let events = tx.clone();
        let shared: Arc<Mutex<Shared>> = Arc::default();
        let counts = shared.clone();
        let lost_some: Arc<tokio::sync::Notify> = Arc::default();
        let ask = lost_some.clone();
        let link = Link::connect(nats, &format!("myriad gateway {id:016x}"), move |event| {
            match event {
                // A reconnect: what crossed meanwhile may be lost; tell the router
                // everything again.
                async_nats::Event::Connected => {
                    tracing::info!(%event, "NATS");
                    let _ = events.send(Outgoing::Resync);
                    ask.notify_one();
                }
                async_nats::Event::Disconnected => {
                    counts.lock().disconnects += 1;
                    tracing::warn!(
                        "NATS connection lost: deliveries the router sends this gateway \
                         until it is back are lost"
                    );
                }
                async_nats::Event::SlowConsumer(_) => {
                    counts.lock().slow_consumer_drops += 1;
                    ask.notify_one();
                    tracing::error!(
                        %event,
                        "NATS dropped a message for this gateway: its subscription queue is full"
                    );
                }
                _ => tracing::info!(%event, "NATS"),
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
            shared,
            tx,
            lost_some,
            parts: Mutex::new(Some(Parts {
                rx,
                mine: mine?,
                all: all?,
            })),
        })
    }

    /// The NATS servers, redacted ([`nats_link::NatsConfig::shown`]).
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
            "nats_disconnects": shared.disconnects,
            "nats_slow_consumer_drops": shared.slow_consumer_drops,
            "nats_lost_told": shared.lost_told,
            "nats_batch_gaps": shared.batch_gaps,
            "nats_batches_twice": shared.batches_twice,
            "nats_gaps_given_up": shared.gaps_given_up,
        });
        if let (Some(doc), Some(router)) = (doc.as_object_mut(), merge_shards(&shared.router_stats))
        {
            doc.extend(router);
        }
        doc
    }

    /// Starts the sender and receiver tasks for the loops' `mailboxes` (at most
    /// [`MAX_LOOPS`](crate::loop_id::MAX_LOOPS); loop ids beyond the mailboxes are
    /// ignored) and returns the bus for the loops.
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
        let presence: Arc<Mutex<presence::Presence>> = Arc::default();
        let sender = Sender {
            client: client.clone(),
            id: self.id,
            place: self.place,
            shards: self.shards,
            gathers: self.gathers.clone(),
            presence: presence.clone(),
            shared: self.shared.clone(),
        };
        self.link.spawn(sender.run(rx));
        let receiver = Receiver {
            mailboxes,
            tx: self.tx.clone(),
            presence,
            shared: self.shared.clone(),
            parts: Reassembly::default(),
            gathers: self.gathers.clone(),
            shards: self.shards,
            numbering: numbering::Numbering::default(),
            lost_some: self.lost_some.clone(),
            counted: (0, 0, 0),
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
            request: CallRequest::Bus(request),
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

/// Room kept under max_payload for the bundle's header (version, gateway id, counts).
const BUNDLE_HEADER: usize = 64;

/// A request that NATS would refuse (its bundle over the server's max_payload, 1 MiB
/// by default) is answered here at once with a clear error, instead of the client
/// waiting for a reply that never comes. Encoded only when the rough weight says it
/// may be near the limit.
fn too_large(client: &Client, call: &WireCall) -> Option<Reply> {
    let max = client.server_info().max_payload;
    if max == 0 || weight(call) < max / 4 {
        return None;
    }
    let msg = ToRouter::Bundle {
        gateway: 0,
        calls: vec![call.clone()],
    };
    let size = codec::encode_to_router(&msg).len() + BUNDLE_HEADER;
    (size > max).then(|| {
        Reply::Unavailable(format!(
            "the request is too large for the NATS link to the router: {size} bytes encoded, \
             the NATS server's max_payload is {max} bytes; send it in smaller parts (fewer \
             lines per POST) or raise max_payload in nats-server's configuration"
        ))
    })
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
