//! Router behaviour: exact publish counts, history and its ttl, presence churn.

use std::time::{Duration, Instant};

use super::*;
use crate::{PublishCounts, Reach};

fn conn(loop_id: u16, token: u32) -> ConnRef {
    ConnRef { loop_id, token }
}

fn msg(subject: u64, text: &'static str) -> Arc<Message> {
    Arc::new(Message::to_subject(
        subject,
        bytes::Bytes::from_static(text.as_bytes()),
    ))
}

fn publish(r: &mut Router, subject: u64, now: Instant) -> (PublishCounts, Vec<(ConnRef, u64)>) {
    let mut got = Vec::new();
    let counts = r.handle_publish(&msg(subject, "x"), &Reach::Followers, now, &mut |d| {
        got.push((d.conn, d.seq))
    });
    got.sort_by_key(|(c, _)| (c.loop_id, c.token));
    (counts, got)
}

#[test]
fn publish_reaches_subject_and_subscribers_with_exact_counts() {
    let now = Instant::now();
    // 2 and 3 follow 1; 1 follows itself; 4 follows nobody.
    let index = SubscriptionIndex::from_edges([(2, 1), (3, 1), (1, 1)]);
    let mut r = Router::new(RouterConfig::default(), index);
    r.handle_login(1, conn(0, 1));
    r.handle_login(2, conn(0, 2));
    r.handle_login(2, conn(1, 2)); // two connections for user 2
    r.handle_login(4, conn(1, 4));
    // 3 is offline: no delivery, no state.
    let (counts, got) = publish(&mut r, 1, now);
    assert_eq!(
        counts,
        PublishCounts {
            connections: 3,
            users: 2
        }
    );
    assert_eq!(got, vec![(conn(0, 1), 1), (conn(0, 2), 1), (conn(1, 2), 1)]);
    let (counts, got) = publish(&mut r, 1, now);
    assert_eq!(counts.connections, 3);
    assert!(got.iter().all(|&(_, seq)| seq == 2));
    let (counts, got) = publish(&mut r, 4, now);
    assert_eq!(
        (counts, got),
        (
            PublishCounts {
                connections: 1,
                users: 1
            },
            vec![(conn(1, 4), 1)]
        )
    );
    assert_eq!(r.last_seq(3), 0);
    let s = r.stats();
    assert_eq!(
        (
            s.users_online,
            s.connections,
            s.subscriptions,
            s.messages_in,
            s.deliveries
        ),
        (3, 4, 3, 3, 7)
    );
    assert_eq!(s.users_with_history, 3);
}

#[test]
fn live_subscriptions_change_the_fanout() {
    let now = Instant::now();
    let mut r = Router::new(RouterConfig::default(), SubscriptionIndex::new());
    r.handle_login(7, conn(0, 7));
    assert_eq!(publish(&mut r, 9, now).0.connections, 0);
    assert!(r.subscribe(7, 9));
    assert!(!r.subscribe(7, 9));
    assert_eq!(r.subscribers(9), vec![7]);
    assert_eq!(
        publish(&mut r, 9, now).0,
        PublishCounts {
            connections: 1,
            users: 1
        }
    );
    assert!(r.unsubscribe(7, 9));
    assert!(!r.unsubscribe(7, 9));
    assert_eq!(publish(&mut r, 9, now).0.connections, 0);
}

#[test]
fn history_survives_reconnect_within_ttl_and_reports_gaps() {
    let t0 = Instant::now();
    let cfg = RouterConfig {
        history: 3,
        history_ttl: Duration::from_secs(60),
        ..RouterConfig::default()
    };
    let mut r = Router::new(cfg, SubscriptionIndex::new());
    r.handle_login(5, conn(0, 1));
    publish(&mut r, 5, t0);
    r.handle_logout(5, conn(0, 1), t0);
    assert_eq!(r.stats().users_online, 0);
    // Offline with live history: messages still get sequence numbers.
    for _ in 0..4 {
        assert_eq!(
            publish(&mut r, 5, t0 + Duration::from_secs(1))
                .0
                .connections,
            0
        );
    }
    let h = r.history_since(5, 1);
    assert_eq!(h.last, 5);
    assert!(h.gap, "seq 2 was dropped from a ring of 3");
    assert_eq!(
        h.messages.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        vec![3, 4, 5]
    );
    let h = r.history_since(5, 3);
    assert!(!h.gap);
    assert_eq!(h.messages.len(), 2);
    r.handle_tick(t0 + Duration::from_secs(30));
    r.handle_login(5, conn(0, 2));
    assert_eq!(
        publish(&mut r, 5, t0 + Duration::from_secs(31)).1,
        vec![(conn(0, 2), 6)]
    );
    // Back online: the old expiry entry must not drop them.
    r.handle_tick(t0 + Duration::from_secs(120));
    assert_eq!(r.last_seq(5), 6);
}

#[test]
fn history_is_dropped_after_ttl_offline() {
    let t0 = Instant::now();
    let cfg = RouterConfig {
        history: 8,
        history_ttl: Duration::from_secs(10),
        ..RouterConfig::default()
    };
    let mut r = Router::new(cfg, SubscriptionIndex::new());
    r.handle_login(1, conn(0, 1));
    r.handle_login(2, conn(0, 2));
    publish(&mut r, 1, t0);
    publish(&mut r, 2, t0);
    r.handle_logout(1, conn(0, 1), t0);
    r.handle_logout(2, conn(0, 2), t0 + Duration::from_secs(5));
    r.handle_tick(t0 + Duration::from_secs(9));
    assert_eq!(r.stats().users_with_history, 2);
    r.handle_tick(t0 + Duration::from_secs(10));
    assert_eq!(r.last_seq(1), 0);
    assert_eq!(r.last_seq(2), 1);
    assert_eq!(r.stats().users_with_history, 1);
    let h = r.history_since(1, 1);
    assert!(
        h.gap && h.last == 0,
        "state forgotten: the client's seq 1 is ahead of ours"
    );
    // A publish after the ttl but before a tick does not revive the history.
    publish(&mut r, 2, t0 + Duration::from_secs(16));
    assert_eq!(r.last_seq(2), 0);
    assert_eq!(r.stats().users_with_history, 0);
}

#[test]
fn offline_users_without_history_leave_no_state() {
    let mut r = Router::new(RouterConfig::default(), SubscriptionIndex::new());
    for u in 0..1000u64 {
        r.handle_login(u, conn(0, u as u32));
    }
    let cap = r.users.capacity();
    for u in 0..1000u64 {
        r.handle_logout(u, conn(0, u as u32), Instant::now());
    }
    r.handle_logout(1, conn(0, 1), Instant::now()); // unknown: ignored
    assert_eq!(r.users.len(), 0);
    assert_eq!(r.stats().connections, 0);
    r.compact();
    assert!(r.users.capacity() < cap);
}

#[test]
fn duplicate_login_and_unknown_logout_keep_counters_exact() {
    let now = Instant::now();
    let mut r = Router::new(RouterConfig::default(), SubscriptionIndex::new());
    r.handle_login(1, conn(0, 1));
    r.handle_login(1, conn(0, 1));
    r.handle_logout(1, conn(0, 9), now);
    assert_eq!((r.stats().connections, r.stats().users_online), (1, 1));
    assert_eq!(r.connections_of(1), vec![conn(0, 1)]);
    r.handle_logout(1, conn(0, 1), now);
    assert_eq!((r.stats().connections, r.stats().users_online), (0, 0));
}

#[test]
fn users_of_a_dead_gateway_keep_an_empty_history_to_resume_from() {
    let now = Instant::now();
    let mut r = Router::new(RouterConfig::default(), SubscriptionIndex::new());
    r.handle_login(1, conn(3, 1));
    r.handle_login(2, conn(4, 2));
    // Gateway loop 3 died: user 1 had no message yet, and keeps a history anyway.
    assert_eq!(r.logout_where(|c| c.loop_id == 3, now), 1);
    let counts = r.handle_publish(&msg(1, "while away"), &Reach::Followers, now, &mut |_| {});
    assert_eq!((counts.connections, counts.users), (0, 0), "nobody online");
    // Back through another gateway from 0: the message is there.
    r.handle_login(1, conn(4, 9));
    let read = r.history_read(1, None, 0);
    assert_eq!(read.messages.len(), 1);
    assert!(!read.gap);
    // An ordinary logout still leaves no state behind.
    r.handle_logout(2, conn(4, 2), now);
    assert_eq!(r.last_seq(2), 0);
    assert!(r.connections_of(2).is_empty());
}
