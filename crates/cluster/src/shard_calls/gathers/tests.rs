//! `Gathers` with injected times: sums, deadlines, late replies and the errors
//! that say what the other shards did.

use super::*;
use crate::shard_calls::route;
use crate::shard_calls::tests::{batch, call, parts};
use crate::shards::Shards;
use parking_lot::Mutex;

/// `count` router shards seen from shard 0, no call waiting, and now.
fn shards_of(count: u16) -> (Shards, Mutex<Gathers>, Instant) {
    let shards = Shards { index: 0, count };
    (shards, Mutex::new(Gathers::default()), Instant::now())
}

fn change(edges: &[(u64, u64)], add: bool) -> Request {
    Request::ChangeSubscriptions {
        edges: edges.to_vec(),
        add,
    }
}

fn published(messages: u64, connections: u64, users: u64) -> Reply {
    Reply::Published {
        messages,
        connections,
        users,
    }
}

fn in_order(items: &[(u32, u64)]) -> CallRequest {
    CallRequest::PublishInOrder {
        items: items
            .iter()
            .map(|&(at, s)| (at, s, bytes::Bytes::from(format!("m{s}"))))
            .collect(),
        senders: vec![0, 1, 2],
    }
}

/// A batch over three shards goes to every shard at once, each its items with
/// their places; the parts' replies are summed in any order.
#[test]
fn a_batch_over_shards_goes_to_every_shard_at_once_and_is_answered_with_the_sum() {
    let (shards, gathers, t) = shards_of(3);
    // Subjects 1 and 4 on shard 1, 2 on shard 2, 3 and 6 on shard 0.
    let routed = route(vec![call(9, batch(&[1, 4, 2, 3, 6]))], shards, &gathers, t);
    let sent: Vec<&CallRequest> = routed.iter().flatten().map(|c| &c.request).collect();
    assert_eq!(
        sent,
        [
            &in_order(&[(3, 3), (4, 6)]),
            &in_order(&[(0, 1), (1, 4)]),
            &in_order(&[(2, 2)])
        ]
    );
    let p = parts(&routed, 9);
    let mut g = gathers.lock();
    assert_eq!(g.gather(p[2], published(1, 0, 0)), Gathered::Waiting);
    assert_eq!(g.gather(p[0], published(2, 2, 2)), Gathered::Waiting);
    // A second reply from one shard is not one this call waits for.
    assert_eq!(g.gather(p[0], published(2, 2, 2)), Gathered::Late);
    assert_eq!(
        g.gather(p[1], published(2, 5, 5)),
        Gathered::Done((1, 9), published(5, 7, 7))
    );
    assert!(g.is_empty());
}

/// The parts of a change are summed in any order; one shard's failed durable
/// write makes a batch's sum NotStored with everyone's counts.
#[test]
fn parts_are_summed_in_any_order_and_not_stored_wins() {
    let (shards, gathers, t) = shards_of(3);
    let routed = route(
        vec![call(9, change(&[(4, 1), (4, 2), (4, 3)], true))],
        shards,
        &gathers,
        t,
    );
    assert!(routed.iter().all(|calls| calls.len() == 1));
    let p = parts(&routed, 9);
    let changed = |changed| Reply::Changed { edges: 1, changed };
    let mut g = gathers.lock();
    assert_eq!(g.gather(p[2], changed(1)), Gathered::Waiting);
    assert_eq!(g.gather(p[0], changed(0)), Gathered::Waiting);
    assert_eq!(
        g.gather(p[1], changed(1)),
        Gathered::Done(
            (1, 9),
            Reply::Changed {
                edges: 3,
                changed: 2
            }
        )
    );
    drop(g);
    let routed = route(vec![call(10, batch(&[1, 2]))], shards, &gathers, t);
    let p = parts(&routed, 10);
    let not_stored = Reply::NotStored {
        messages: 1,
        connections: 3,
        users: 3,
        error: "disk full".into(),
    };
    let mut g = gathers.lock();
    assert_eq!(g.gather(p[1], not_stored), Gathered::Waiting);
    assert_eq!(g.gather(p[0], published(0, 0, 0)), Gathered::Waiting);
    assert_eq!(
        g.gather(p[2], published(1, 2, 2)),
        Gathered::Done(
            (1, 10),
            Reply::NotStored {
                messages: 2,
                connections: 5,
                users: 5,
                error: "disk full".into(),
            }
        )
    );
}

/// A dead shard: the call is answered at its deadline with an error saying what
/// the other shard published, removed, and the dead shard's late reply is
/// dropped — also while the same connection waits for its next call.
#[test]
fn a_shard_that_does_not_answer_makes_the_call_an_error_at_its_deadline() {
    let (shards, gathers, t) = shards_of(2);
    // Subjects 2, 4 and 6 on shard 0, 1 on shard 1.
    let routed = route(vec![call(9, batch(&[2, 4, 1, 6]))], shards, &gathers, t);
    let p = parts(&routed, 9);
    let mut g = gathers.lock();
    assert_eq!(g.gather(p[0], published(3, 3, 2)), Gathered::Waiting);
    assert!(g
        .expire(t + GATHER_TIMEOUT - Duration::from_millis(1))
        .is_empty());
    let expired = g.expire(t + GATHER_TIMEOUT);
    assert!(g.is_empty());
    drop(g);
    let [((1, 9), Reply::TimedOut(why))] = &expired[..] else {
        panic!("{expired:?}");
    };
    assert_eq!(
        why,
        "router shard 1 did not answer within 3 s: its part of the batch (1 of 4 \
         messages) may or may not have been published; shard 0 published 3 messages \
         to 3 connections of 2 users (a retry of the whole batch publishes those again)"
    );
    // The connection's next call, to both shards again.
    let later = t + GATHER_TIMEOUT;
    let routed = route(vec![call(9, batch(&[1, 2]))], shards, &gathers, later);
    let next = parts(&routed, 9);
    let mut g = gathers.lock();
    // Shard 1's reply to the first call, late: dropped, not counted in the next.
    assert_eq!(g.gather(p[1], published(1, 1, 1)), Gathered::Late);
    assert_eq!(g.gather(next[0], published(1, 1, 1)), Gathered::Waiting);
    assert_eq!(
        g.gather(next[1], published(1, 4, 4)),
        Gathered::Done((1, 9), published(2, 5, 5))
    );
}

#[test]
fn a_change_some_shards_did_not_answer_says_what_the_others_changed() {
    let (shards, gathers, t) = shards_of(3);
    let routed = route(
        vec![call(9, change(&[(4, 3), (5, 3), (4, 1), (4, 2)], false))],
        shards,
        &gathers,
        t,
    );
    let p = parts(&routed, 9);
    let mut g = gathers.lock();
    let changed = Reply::Changed {
        edges: 2,
        changed: 1,
    };
    assert_eq!(g.gather(p[0], changed), Gathered::Waiting);
    let expired = g.expire(t + GATHER_TIMEOUT);
    assert_eq!(
        expired,
        [(
            (1, 9),
            Reply::TimedOut(
                "router shards 1, 2 did not answer within 3 s: their part of the change \
                 (2 of 4 edges) may or may not have been made; shard 0 removed 1 of 2 edges"
                    .into()
            )
        )]
    );
}

/// A join divided among shards is answered with every shard's channels and every
/// shard's refusals (each shard counts its own channels against the user's limit).
#[test]
fn a_joins_parts_keep_each_shards_channels_and_refusals() {
    let read = bus::HistoryRead::default();
    let part = |joined: &str, refused: &str| Reply::Joined {
        login: None,
        channels: vec![(joined.to_string(), read.clone())],
        refused: vec![(refused.to_string(), router::Refusal::UserLimit)],
    };
    let Reply::Joined {
        channels, refused, ..
    } = combine(part("a", "b"), part("c", "d"))
    else {
        panic!("not a join's answer")
    };
    let names = |l: Vec<String>| l.join(",");
    assert_eq!(names(channels.into_iter().map(|c| c.0).collect()), "a,c");
    assert_eq!(names(refused.into_iter().map(|c| c.0).collect()), "b,d");
}
