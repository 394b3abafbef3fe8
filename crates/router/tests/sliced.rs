//! Publishing in bounded slices (`begin_publish` / `step_publish`) against two
//! models: the unsliced `handle_publish` on an identical router, and a set model
//! of edges and presence while several sliced publishes interleave with changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use router::{ConnRef, Delivery, Message, PublishCursor, Router, RouterConfig, SubscriptionIndex};

fn conn(user: u64, k: u32) -> ConnRef {
    ConnRef {
        loop_id: k as u16,
        token: user as u32,
    }
}

fn msg(subject: u64) -> Arc<Message> {
    Arc::new(Message {
        subject,
        payload: bytes::Bytes::from_static(b"m"),
    })
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
fn sliced_publishes_equal_unsliced_ones() {
    let mut rng = StdRng::seed_from_u64(1);
    let now = Instant::now();
    let (mut whole, mut sliced) = (new_router(), new_router());
    for _ in 0..3000 {
        let (a, b) = (rng.gen_range(0..40u64), rng.gen_range(0..40u64));
        match rng.gen_range(0..10) {
            0..=1 => {
                whole.subscribe(a, b);
                sliced.subscribe(a, b);
            }
            2 => {
                whole.unsubscribe(a, b);
                sliced.unsubscribe(a, b);
            }
            3 => {
                let c = conn(a, rng.gen_range(0..3));
                whole.handle_login(a, c);
                sliced.handle_login(a, c);
            }
            4 => {
                let c = conn(a, rng.gen_range(0..3));
                whole.handle_logout(a, c, now);
                sliced.handle_logout(a, c, now);
            }
            _ => {
                let mut want = Vec::new();
                let counts = whole.handle_publish(msg(a), now, &mut |c, s| want.push((c, s)));
                let mut got = Vec::new();
                let mut cur = sliced.begin_publish(msg(a), now);
                let mut steps = 0;
                while !sliced.step_publish(&mut cur, rng.gen_range(1..6), &mut |d| {
                    got.push((d.conn, d.seq))
                }) {
                    steps += 1;
                    assert!(steps < 1000);
                }
                assert_eq!(cur.counts(), counts);
                assert_eq!(cur.remaining(), 0);
                want.sort_by_key(|(c, s)| (c.loop_id, c.token, *s));
                got.sort_by_key(|(c, s)| (c.loop_id, c.token, *s));
                assert_eq!(got, want);
            }
        }
    }
    assert_eq!(whole.stats(), sliced.stats());
    for u in 0..40 {
        assert_eq!(whole.position(u), sliced.position(u));
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

struct Open {
    cur: PublishCursor,
    /// The connections it must reach, fixed at its first step.
    want: Option<BTreeSet<ConnRef>>,
    got: Vec<ConnRef>,
}

#[test]
fn interleaved_sliced_publishes_with_edge_changes_match_the_model() {
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
    let mut open: Vec<Open> = Vec::new();
    let mut finished = 0;
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
            3 if open.len() < 4 => open.push(Open {
                cur: r.begin_publish(msg(rng.gen_range(0..5)), now),
                want: None,
                got: Vec::new(),
            }),
            _ if !open.is_empty() => {
                let i = rng.gen_range(0..open.len());
                let o = &mut open[i];
                if o.want.is_none() {
                    let users = m.recipients(o.cur.subject());
                    o.want = Some(users.iter().flat_map(|u| m.online[u].clone()).collect());
                }
                let mut handed: Vec<Delivery> = Vec::new();
                let done = r.step_publish(&mut o.cur, rng.gen_range(1..8), &mut |d| handed.push(d));
                for d in handed {
                    // Per connection: the user's numbers, in order, without holes.
                    let prev = last_seen.insert(d.conn, d.seq).unwrap_or(0);
                    assert_eq!(d.seq, prev + 1, "{:?}", d.conn);
                    o.got.push(d.conn);
                }
                if done {
                    let o = open.swap_remove(i);
                    let want = o.want.expect("stepped");
                    let got: BTreeSet<ConnRef> = o.got.iter().copied().collect();
                    assert_eq!(got.len(), o.got.len(), "a connection reached twice");
                    assert_eq!(got, want);
                    let counts = o.cur.counts();
                    assert_eq!(counts.connections as usize, want.len());
                    let users: BTreeSet<u32> = want.iter().map(|c| c.token).collect();
                    assert_eq!(counts.users as usize, users.len());
                    finished += 1;
                }
            }
            _ => {}
        }
    }
    assert!(finished > 1000, "{finished}");
}

#[test]
fn changes_between_slices_follow_the_documented_rules() {
    let now = Instant::now();
    // Subject 100 with subscribers 1..=6, each online with one connection.
    let mut r = Router::new(
        RouterConfig::default(),
        SubscriptionIndex::from_edges((1..=6).map(|u| (u, 100))),
    );
    for u in 1..=6 {
        r.handle_login(u, conn(u, 0));
    }
    let mut got = Vec::new();
    let mut cur = r.begin_publish(msg(100), now);
    // First slice: the subject itself (offline) and the first subscribers.
    assert!(!r.step_publish(&mut cur, 3, &mut |d| got.push(d.conn.token)));
    let reached: BTreeSet<u32> = got.iter().copied().collect();
    let unreached: Vec<u64> = (1..=6u64)
        .filter(|u| !reached.contains(&(*u as u32)))
        .collect();
    assert_eq!(unreached.len(), 4);
    // Between slices: an edge added (7), an edge removed (an unreached user), a
    // second connection for an unreached user, an unreached user's connection closed.
    r.subscribe(7, 100);
    r.handle_login(7, conn(7, 0));
    r.unsubscribe(unreached[0], 100);
    r.handle_login(unreached[1], conn(unreached[1], 1));
    r.handle_logout(unreached[2], conn(unreached[2], 0), now);
    let mut rest = Vec::new();
    while !r.step_publish(&mut cur, 2, &mut |d| rest.push(d.conn)) {}
    let tokens: BTreeSet<u32> = rest.iter().map(|c| c.token).collect();
    assert!(
        !tokens.contains(&7),
        "an edge added mid-publish does not receive"
    );
    assert!(
        tokens.contains(&(unreached[0] as u32)),
        "an edge removed mid-publish still receives"
    );
    assert_eq!(
        rest.iter()
            .filter(|c| c.token == unreached[1] as u32)
            .count(),
        2,
        "a connection opened before its user is reached receives"
    );
    assert!(
        !tokens.contains(&(unreached[2] as u32)),
        "a closed connection does not"
    );
    assert_eq!(cur.counts().users, 6 - 1);
    assert_eq!(cur.counts().connections, 6 - 1 + 1);
    // Stepping a finished cursor does nothing.
    assert!(r.step_publish(&mut cur, 10, &mut |_| panic!("delivered twice")));
}
