//! The HTTP API on the client listener (SPEC C1–C3): publish, batch publish,
//! subscriptions, stats and health. Each handler takes a whole request body and returns
//! a whole reply; the event loop owns the bytes on the wire.
//!
//! Lock order here: `store` before `router`, so the store and the index change together
//! and a crash between the two leaves only the store (from which the index is rebuilt).

use crate::shared::Shared;
use bytes::Bytes;
use serde_json::json;
use std::sync::atomic::Ordering;
use wire::Route;

pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Reply {
    fn json(value: serde_json::Value) -> Reply {
        let mut body = serde_json::to_vec(&value).expect("a JSON value always serialises");
        body.push(b'\n');
        Reply {
            status: 200,
            content_type: "application/json",
            body,
        }
    }

    fn error(status: u16, message: impl std::fmt::Display) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{message}\n").into_bytes(),
        }
    }
}

/// How many messages a request published (for the loop's `messages_in` counter).
pub fn published_count(route: &Route, reply: &Reply) -> u64 {
    match route {
        Route::Publish { .. } if reply.status == 200 => 1,
        Route::PublishBatch if reply.status == 200 => {
            serde_json::from_slice::<serde_json::Value>(&reply.body)
                .ok()
                .and_then(|v| v["messages"].as_u64())
                .unwrap_or(0)
        }
        _ => 0,
    }
}

/// The largest body `route` accepts (`None`: the route takes no body).
pub fn body_limit(shared: &Shared, route: &Route) -> Option<usize> {
    match route {
        Route::Publish { .. } => Some(shared.config.max_message),
        Route::PublishBatch | Route::SubscriptionsBulk => Some(shared.config.max_batch),
        _ => None,
    }
}

/// Handles one API request; `from` is the calling loop (see [`Shared::publish`]).
pub fn handle(shared: &Shared, route: &Route, body: &[u8], from: u16) -> Reply {
    match *route {
        Route::Publish { subject } => {
            let counts = shared.publish(subject, Bytes::copy_from_slice(body), from);
            Reply::json(json!({"connections": counts.connections, "users": counts.users}))
        }
        Route::PublishBatch => match wire::parse_batch(body) {
            Err(e) => Reply::error(400, e),
            Ok(items) => {
                let (mut connections, mut users) = (0u64, 0u64);
                for item in &items {
                    let counts =
                        shared.publish(item.subject, Bytes::copy_from_slice(&item.data), from);
                    connections += counts.connections as u64;
                    users += counts.users as u64;
                }
                Reply::json(
                    json!({"messages": items.len(), "connections": connections, "users": users}),
                )
            }
        },
        Route::SubscriptionPut {
            subscriber,
            subject,
        } => change(shared, &[(subscriber, subject)], true),
        Route::SubscriptionDelete {
            subscriber,
            subject,
        } => change(shared, &[(subscriber, subject)], false),
        Route::SubscriptionsBulk => match wire::parse_edges(body) {
            Err(e) => Reply::error(400, e),
            Ok(edges) => change(shared, &edges, true),
        },
        Route::Subscribers { subject } => {
            Reply::json(json!(shared.router.lock().subscribers(subject)))
        }
        Route::Subscriptions { subscriber } => {
            match shared.store.lock().subscriptions(subscriber) {
                Ok(list) => Reply::json(json!(list)),
                Err(e) => Reply::error(503, format_args!("store: {e}")),
            }
        }
        Route::Stats => Reply::json(stats(shared)),
        Route::Health => Reply {
            status: 200,
            content_type: "text/plain; charset=utf-8",
            body: b"ok\n".to_vec(),
        },
        // Subscriptions and polls are transports, handled by the event loop.
        Route::Subscribe { .. } | Route::Poll { .. } => Reply::error(500, "not an API route"),
    }
}

/// Adds or removes edges: the store first (durable), then the index, under the store lock.
fn change(shared: &Shared, edges: &[(u64, u64)], add: bool) -> Reply {
    let mut store = shared.store.lock();
    let result = if add {
        store.add(edges)
    } else {
        store.remove(edges)
    };
    let changed = match result {
        Ok(n) => n,
        Err(e) => return Reply::error(503, format_args!("store: {e}")),
    };
    let mut router = shared.router.lock();
    for &(subscriber, subject) in edges {
        if add {
            router.subscribe(subscriber, subject);
        } else {
            router.unsubscribe(subscriber, subject);
        }
    }
    drop(router);
    drop(store);
    let key = if add { "added" } else { "removed" };
    Reply::json(json!({"edges": edges.len(), key: changed}))
}

/// `GET /stats`: the router's counts and the loops' counters, summed.
pub fn stats(shared: &Shared) -> serde_json::Value {
    let r = shared.router.lock().stats();
    let m = &shared.metrics;
    json!({
        "pid": std::process::id(),
        "loops": shared.loops.len(),
        "connections": shared.connections.load(Ordering::Relaxed),
        "subscribed": r.connections,
        "users_online": r.users_online,
        "users_with_history": r.users_with_history,
        "subscriptions": r.subscriptions,
        "messages_in": r.messages_in,
        "deliveries_planned": r.deliveries,
        "messages_out": m.sum(|l| &l.messages_out),
        "bytes_out": m.sum(|l| &l.bytes_out),
        "connects": m.sum(|l| &l.connects),
        "closes": m.sum(|l| &l.closes),
        "queued_bytes": m.sum(|l| &l.queued_bytes),
        "slow_drops": m.sum(|l| &l.slow_drops),
    })
}
