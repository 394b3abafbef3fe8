//! The sender task: everything of this gateway to the router — the calls queued
//! since its last wake-up as one bundle (divided among router shards when there are
//! several), heartbeats, the presence it keeps for resyncs, and requests to send
//! lost bundles again.

use super::presence::Presence;
use super::{Outgoing, Shared};
use crate::codec::{self, CallRequest, GatewayId, ToRouter, WireCall};
use crate::shard_calls::{self, Gathers};
use crate::subjects;
use crate::timing::HEARTBEAT;
use async_nats::Client;
use bus::Request;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// A bundle is sent once its payloads reach this size (NATS refuses messages over
/// its max_payload, 1 MiB by default).
const BUNDLE_BYTES: usize = 256 << 10;
/// Connections per [`ToRouter::Presence`] chunk (≤ 17 B each encoded).
const PRESENCE_CHUNK: usize = 32 * 1024;

/// The task that sends everything of this gateway to the router.
pub(super) struct Sender {
    pub(super) client: Client,
    pub(super) id: GatewayId,
    pub(super) place: Option<u32>,
    pub(super) shards: u16,
    pub(super) gathers: Arc<Mutex<Gathers>>,
    /// The logged-in connections, shared with the receiver (the same thread).
    pub(super) presence: Arc<Mutex<Presence>>,
    pub(super) shared: Arc<Mutex<Shared>>,
}

impl Sender {
    pub(super) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Outgoing>) {
        let mut heartbeat = tokio::time::interval(HEARTBEAT);
        let mut items = Vec::new();
        let mut queued = Queued::default();
        loop {
            tokio::select! {
                n = rx.recv_many(&mut items, 4096) => {
                    if n == 0 {
                        return;
                    }
                    // Under the server's max_payload too (a NATS server may lower it).
                    let limit = match self.client.server_info().max_payload {
                        0 => BUNDLE_BYTES,
                        max => BUNDLE_BYTES.min(max / 2),
                    };
                    for item in items.drain(..) {
                        let call = match item {
                            Outgoing::Call(call) => {
                                self.track(&call);
                                call
                            }
                            Outgoing::Resync => {
                                self.send_bundle(&mut queued).await;
                                self.send_presence().await;
                                continue;
                            }
                            Outgoing::Replay { shard, lane, from } => {
                                let msg = ToRouter::Replay {
                                    gateway: self.id,
                                    lane,
                                    from,
                                };
                                self.send_to(&subjects::router(shard, self.shards), &msg)
                                    .await;
                                continue;
                            }
                        };
                        let w = weight(&call);
                        // A large call starts a bundle of its own rather than
                        // pushing the current one past max_payload.
                        if queued.bytes + w > limit && !queued.is_empty() {
                            self.send_bundle(&mut queued).await;
                        }
                        queued.bytes += w;
                        queued.calls.push(call);
                        if queued.bytes >= limit {
                            self.send_bundle(&mut queued).await;
                        }
                    }
                    self.send_bundle(&mut queued).await;
                }
                _ = heartbeat.tick() => {
                    let msg = ToRouter::Heartbeat {
                        gateway: self.id,
                        connections: self.presence.lock().len() as u64,
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
            CallRequest::Bus(Request::Login { user, .. }) => self.presence.lock().login(key, user),
            CallRequest::Bus(Request::Logout { .. }) => self.presence.lock().logout(key),
            CallRequest::Bus(Request::Join {
                user,
                login,
                ref channels,
                ..
            }) => {
                let mut presence = self.presence.lock();
                if let (Some(user), true) = (user, login) {
                    presence.login(key, user);
                }
                presence.join(key, channels.len());
            }
            CallRequest::Bus(Request::Leave { ref channels, .. }) => {
                self.presence.lock().leave(key, channels.len())
            }
            _ => {}
        }
    }

    async fn send_bundle(&mut self, queued: &mut Queued) {
        if queued.is_empty() {
            return;
        }
        queued.bytes = 0;
        let n = queued.calls.len() as u64;
        if self.shards <= 1 {
            let msg = ToRouter::Bundle {
                gateway: self.id,
                calls: std::mem::take(&mut queued.calls),
            };
            self.send_to(subjects::ROUTER, &msg).await;
        } else {
            let shards = crate::shards::Shards {
                index: 0,
                count: self.shards,
            };
            let now = Instant::now();
            let calls = std::mem::take(&mut queued.calls);
            let per_shard = shard_calls::route(calls, shards, &self.gathers, now);
            for (shard, calls) in per_shard.into_iter().enumerate() {
                if !calls.is_empty() {
                    let msg = ToRouter::Bundle {
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
        let all = self.presence.lock().all();
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

/// What goes in the next bundle: calls to route, and their weight.
#[derive(Default)]
struct Queued {
    calls: Vec<WireCall>,
    bytes: usize,
}

impl Queued {
    fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }
}

/// Bytes a call adds to a bundle, roughly.
pub(super) fn weight(call: &WireCall) -> usize {
    16 + match &call.request {
        CallRequest::Bus(Request::Publish { payload, .. }) => payload.len(),
        CallRequest::Bus(Request::PublishBatch { items, .. }) => {
            items.iter().map(|(_, p)| p.len() + 10).sum()
        }
        CallRequest::Bus(Request::ChangeSubscriptions { edges, .. }) => edges.len() * 20,
        _ => 0,
    }
}
