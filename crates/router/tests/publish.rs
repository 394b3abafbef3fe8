//! Publishing against two models: the same publish to an explicit recipient list
//! (`Reach::Users`, what a router shard is forwarded) on an identical router, and a
//! set model of edges and presence while publishes interleave with changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use router::{ConnRef, Delivery, Message, Reach, Router, RouterConfig, SubscriptionIndex};

fn conn(user: u64, k: u32) -> ConnRef {
    ConnRef {
        loop_id: k as u16,
        token: user as u32,
    }
}

fn msg(subject: u64) -> Arc<Message> {
    Arc::new(Message::to_subject(
        subject,
        bytes::Bytes::from_static(b"m"),
    ))
}

fn new_router() -> Router {
    Router::new(
        RouterConfig {
            epoch_seed: 42,
            ..RouterConfig::default()
        },
        SubscriptionIndex::new(),
    )
}

#[test]
fn publishes_to_the_listed_recipients_equal_publishes_to_the_followers() {
    let mut rng = StdRng::seed_from_u64(1);
    let now = Instant::now();
    let (mut whole, mut listed) = (new_router(), new_router());
    for _ in 0..3000 {
        let (a, b) = (rng.gen_range(0..40u64), rng.gen_range(0..40u64));
        match rng.gen_range(0..10) {
            0..=1 => {
                whole.subscribe(a, b);
                listed.subscribe(a, b);
            }
            2 => {
                whole.unsubscribe(a, b);
                listed.unsubscribe(a, b);
            }
            3 => {
                let c = conn(a, rng.gen_range(0..3));
                whole.handle_login(a, c);
                listed.handle_login(a, c);
            }
            4 => {
                let c = conn(a, rng.gen_range(0..3));
                whole.handle_logout(a, c, now);
                listed.handle_logout(a, c, now);
            }
            _ => {
                let mut want = Vec::new();
                let counts = whole.handle_publish(&msg(a), &Reach::Followers, now, &mut |d| {
                    want.push((d.conn, d.seq))
                });
                let mut got = Vec::new();
                let reach = Reach::Users {
                    users: listed.recipients(a),
                    counted: true,
                };
                let listed_counts =
                    listed.handle_publish(&msg(a), &reach, now, &mut |d| got.push((d.conn, d.seq)));
                assert_eq!(listed_counts, counts);
                want.sort_by_key(|(c, s)| (c.loop_id, c.token, *s));
                got.sort_by_key(|(c, s)| (c.loop_id, c.token, *s));
                assert_eq!(got, want);
            }
        }
    }
    assert_eq!(whole.stats(), listed.stats());
    for u in 0..40 {
        assert_eq!(whole.position(u), listed.position(u));
    }
}

/// The set model: edges and who is online with which connections.
#[derive(Default)]
struct Model {
    edges: BTreeSet<(u64, u64)>,
    online: BTreeMap<u64, BTreeSet<ConnRef>>,
}

impl Model {
    fn recipients(&self, subject: u64) -> BTreeSet<u64> {
        let mut r: BTreeSet<u64> = self
            .edges
            .iter()
            .filter(|(_, s)| *s == subject)
            .map(|(a, _)| *a)
            .collect();
        r.insert(subject);
        r
    }
}

#[test]
fn publishes_interleaved_with_edge_changes_match_the_model() {
    let mut rng = StdRng::seed_from_u64(2);
    let now = Instant::now();
    let mut r = new_router();
    let mut m = Model::default();
    // Everyone online with one or two connections for the whole run, so each
    // connection must see its user's sequence numbers 1, 2, 3, ... in order.
    for u in 0..30u64 {
        for k in 0..rng.gen_range(1..=2u32) {
            r.handle_login(u, conn(u, k));
            m.online.entry(u).or_default().insert(conn(u, k));
        }
    }
    let mut last_seen: BTreeMap<ConnRef, u64> = BTreeMap::new();
    let mut published = 0;
    for _ in 0..20_000 {
        match rng.gen_range(0..10) {
            0..=2 => {
                let (a, b) = (rng.gen_range(0..30u64), rng.gen_range(0..5u64));
                if rng.gen_bool(0.6) {
                    assert_eq!(r.subscribe(a, b), m.edges.insert((a, b)));
                } else {
                    assert_eq!(r.unsubscribe(a, b), m.edges.remove(&(a, b)));
                }
            }
            _ => {
                let subject = rng.gen_range(0..5);
                let users = m.recipients(subject);
                let want: BTreeSet<ConnRef> =
                    users.iter().flat_map(|u| m.online[u].clone()).collect();
                let mut handed: Vec<Delivery> = Vec::new();
                let counts = r.handle_publish(&msg(subject), &Reach::Followers, now, &mut |d| {
                    handed.push(d)
                });
                let mut got = Vec::new();
                for d in handed {
                    // Per connection: the user's numbers, in order, without holes.
                    let prev = last_seen.insert(d.conn, d.seq).unwrap_or(0);
                    assert_eq!(d.seq, prev + 1, "{:?}", d.conn);
                    got.push(d.conn);
                }
                let reached: BTreeSet<ConnRef> = got.iter().copied().collect();
                assert_eq!(reached.len(), got.len(), "a connection reached twice");
                assert_eq!(reached, want);
                assert_eq!(counts.connections as usize, want.len());
                let users: BTreeSet<u32> = want.iter().map(|c| c.token).collect();
                assert_eq!(counts.users as usize, users.len());
                published += 1;
            }
        }
    }
    assert!(published > 1000, "{published}");
}
