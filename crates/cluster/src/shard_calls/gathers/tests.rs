//! `Gathers` with injected times: sums, runs in turn, deadlines, late replies and
//! the errors that say what the other shards did.

use super::*;
use crate::shard_calls::route;
use crate::shard_calls::tests::{batch, call, parts};
use crate::Shards;
use parking_lot::Mutex;

/// `count` router shards seen from shard 0, no call waiting, and now.
fn shards_of(count: u16) -> (Shards, Mutex<Gathers>, Instant) {
    let shards = Shards { index: 0, count };
    (shards, Mutex::new(Gathers::default()), Instant::now())
}

fn change(edges: &[(u64, u64)], add: bool) -> WireRequest {
    WireRequest::ChangeSubscriptions {
        edges: edges.to_vec(),
        add,
    }
}

fn published(messages: u64, connections: u64, users: u64) -> WireAnswer {
    WireAnswer::Published {
        messages,
        connections,
        users,
    }
}

/// A batch over three shards, in runs of one shard each: each run is handed out
/// when the one before answered, under a new number; the sum answers the call.
#[test]
fn a_batch_over_shards_is_sent_run_by_run_and_answered_with_the_sum() {
    let (shards, gathers, t) = shards_of(3);
    // Subjects 1 and 4 on shard 1, 2 on shard 2, 3 and 6 on shard 0.
    let routed = route(vec![call(9, batch(&[1, 4, 2, 3, 6]))], shards, &gathers, t);
    let sent: Vec<usize> = routed.iter().map(Vec::len).collect();
    assert_eq!(sent, [0, 1, 0], "only the first run goes now");
    assert_eq!(routed[1][0].request, batch(&[1, 4]));
    let first = parts(&routed, 9)[0];
    let mut g = gathers.lock();
    let Gathered::Next(2, second) = g.gather(first, published(2, 5, 5), t) else {
        panic!("the second run, to shard 2");
    };
    assert_eq!((second.loop_id, second.token), (1, 9));
    assert_eq!(second.request, batch(&[2]));
    // The run before's reply again is late, not this run's.
    assert_eq!(g.gather(first, published(2, 5, 5), t), Gathered::Late);
    let part = second.part.expect("numbered");
    let Gathered::Next(0, third) = g.gather(part, published(1, 0, 0), t) else {
        panic!("the third run, to shard 0");
    };
    assert_eq!(third.request, batch(&[3, 6]));
    assert_eq!(
        g.gather(third.part.expect("numbered"), published(2, 2, 2), t),
        Gathered::Done((1, 9), published(5, 7, 7))
    );
    assert!(g.is_empty());
}

/// The parts sent at once (a change) are summed in any order; one shard's
/// failed durable write makes a batch's sum NotStored with everyone's counts.
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
    let changed = |changed| WireAnswer::Changed { edges: 1, changed };
    let mut g = gathers.lock();
    assert_eq!(g.gather(p[2], changed(1), t), Gathered::Waiting);
    assert_eq!(g.gather(p[0], changed(0), t), Gathered::Waiting);
    // A second reply from one shard is not one this call waits for.
    assert_eq!(g.gather(p[0], changed(0), t), Gathered::Late);
    assert_eq!(
        g.gather(p[1], changed(1), t),
        Gathered::Done(
            (1, 9),
            WireAnswer::Changed {
                edges: 3,
                changed: 2
            }
        )
    );
    drop(g);
    let routed = route(vec![call(10, batch(&[1, 2]))], shards, &gathers, t);
    let first = parts(&routed, 10)[0];
    let not_stored = WireAnswer::NotStored {
        messages: 1,
        connections: 3,
        users: 3,
        error: "disk full".into(),
    };
    let mut g = gathers.lock();
    let Gathered::Next(2, second) = g.gather(first, not_stored, t) else {
        panic!("the second run");
    };
    assert_eq!(
        g.gather(second.part.expect("numbered"), published(1, 2, 2), t),
        Gathered::Done(
            (1, 10),
            WireAnswer::NotStored {
                messages: 2,
                connections: 5,
                users: 5,
                error: "disk full".into(),
            }
        )
    );
}

/// Shards that answer, but so slowly that a batch's next run would start more
/// than [`GATHER_TIMEOUT`] after its first: answered at once with what was
/// published and what was not sent.
#[test]
fn a_batch_whose_runs_answer_too_slowly_is_answered_before_its_last_runs() {
    let (shards, gathers, t) = shards_of(2);
    let routed = route(vec![call(9, batch(&[2, 1, 4, 3]))], shards, &gathers, t);
    let first = parts(&routed, 9)[0];
    let mut g = gathers.lock();
    let second = Duration::from_secs(2);
    let Gathered::Next(1, run) = g.gather(first, published(1, 1, 1), t + second) else {
        panic!("the second run starts 2 s after the first");
    };
    let part = run.part.expect("numbered");
    let answered = g.gather(part, published(1, 2, 2), t + GATHER_TIMEOUT);
    assert!(g.is_empty());
    assert_eq!(
        answered,
        Gathered::Done(
            (1, 9),
            WireAnswer::TimedOut(
                "router shards answered too slowly: a batch over several shards is \
                 sent in turn, and no part starts more than 3 s after the first; shard \
                 0 published 1 messages to 1 connections of 1 users; shard 1 published \
                 1 messages to 2 connections of 2 users; the batch's last 2 of 4 \
                 messages were not published (a retry of the whole batch publishes \
                 those again)"
                    .into()
            )
        )
    );
}

/// A dead shard: the call is answered at its run's deadline with an error
/// saying what the other shard published and what was never sent, removed, and
/// the dead shard's late reply is dropped — also while the same connection
/// waits for its next call.
#[test]
fn a_shard_that_does_not_answer_makes_the_call_an_error_at_its_deadline() {
    let (shards, gathers, t) = shards_of(2);
    let second = Duration::from_secs(1);
    // Subjects 2, 4 and 6 on shard 0, 1 on shard 1.
    let routed = route(vec![call(9, batch(&[2, 4, 1, 6]))], shards, &gathers, t);
    let first = parts(&routed, 9)[0];
    let mut g = gathers.lock();
    // The second run's deadline counts from when the first answered.
    let Gathered::Next(1, to_dead) = g.gather(first, published(2, 3, 2), t + second) else {
        panic!("the second run, to shard 1");
    };
    assert!(g.expire(t + GATHER_TIMEOUT).is_empty());
    assert!(g
        .expire(t + second + GATHER_TIMEOUT - Duration::from_millis(1))
        .is_empty());
    let expired = g.expire(t + second + GATHER_TIMEOUT);
    assert!(g.is_empty());
    drop(g);
    let [((1, 9), WireAnswer::TimedOut(why))] = &expired[..] else {
        panic!("{expired:?}");
    };
    assert_eq!(
        why,
        "router shard 1 did not answer within 3 s: its part of the batch (1 of 4 \
         messages) may or may not have been published; shard 0 published 2 messages \
         to 3 connections of 2 users; the batch's last 1 of 4 messages were not \
         published (its parts over several shards are sent in turn, each after the one \
         before it answered) (a retry of the whole batch publishes those again)"
    );
    // The connection's next call, to both shards again.
    let later = t + second + GATHER_TIMEOUT;
    let routed = route(vec![call(9, batch(&[1, 2]))], shards, &gathers, later);
    let next = parts(&routed, 9)[0];
    let mut g = gathers.lock();
    // Shard 1's reply to the first call, late: dropped, not counted in the next.
    let late = to_dead.part.expect("numbered");
    assert_eq!(g.gather(late, published(1, 1, 1), later), Gathered::Late);
    let Gathered::Next(0, run) = g.gather(next, published(1, 1, 1), later) else {
        panic!("the next call's second run");
    };
    assert_eq!(
        g.gather(run.part.expect("numbered"), published(1, 4, 4), later),
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
    let changed = WireAnswer::Changed {
        edges: 2,
        changed: 1,
    };
    assert_eq!(g.gather(p[0], changed, t), Gathered::Waiting);
    let expired = g.expire(t + GATHER_TIMEOUT);
    assert_eq!(
        expired,
        [(
            (1, 9),
            WireAnswer::TimedOut(
                "router shards 1, 2 did not answer within 3 s: their part of the change \
                 (2 of 4 edges) may or may not have been made; shard 0 removed 1 of 2 edges"
                    .into()
            )
        )]
    );
}
