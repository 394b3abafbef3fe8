//! `--router-shards K` on the gateway side: which router shard a call goes to, and
//! one reply made of the K replies of a call sent to every shard.
//!
//! User `u`'s presence, sequence numbers and history live on shard `u % K`, so
//! logins, logouts and history reads go to their user's shard. A publish goes to
//! every shard: each keeps the whole follower index and reaches the recipients it
//! owns (the others have no state there), and the gateway sums the counts — exact,
//! since each user is counted by one shard only. Subscription changes go to every
//! shard too (each updates its index; shard 0 writes the store and counts); reads
//! of the store or index go to shard 0.

use crate::codec::{WireAnswer, WireRequest};
use crate::Shards;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Where a call goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Dest {
    One(u16),
    All,
}

pub fn dest(request: &WireRequest, shards: Shards) -> Dest {
    match request {
        WireRequest::Login { user, .. }
        | WireRequest::Logout { user }
        | WireRequest::ReadHistory { user, .. } => Dest::One(shards.owner(*user)),
        WireRequest::Publish { .. }
        | WireRequest::PublishBatch { .. }
        | WireRequest::ChangeSubscriptions { .. } => Dest::All,
        WireRequest::Subscribers { .. }
        | WireRequest::Subscriptions { .. }
        | WireRequest::Stats => Dest::One(0),
    }
}

/// Calls sent to every shard, by connection `(loop, token)`: replies still awaited
/// and what came so far. Shared by the sender (which registers) and the receiver.
pub type Gathers = Arc<Mutex<HashMap<(u16, u32), (u16, Option<WireAnswer>)>>>;

/// What the receiver does with one reply.
#[derive(Debug, PartialEq)]
pub enum Gathered {
    /// Not a call sent to every shard: hand it over as it is.
    Alone(WireAnswer),
    /// More shards to hear from.
    Waiting,
    /// The last shard answered: the sum.
    Done(WireAnswer),
}

pub fn gather(gathers: &Gathers, key: (u16, u32), answer: WireAnswer) -> Gathered {
    let mut map = gathers.lock();
    let Some((remaining, sum)) = map.get_mut(&key) else {
        return Gathered::Alone(answer);
    };
    *sum = Some(match sum.take() {
        None => answer,
        Some(before) => combine(before, answer),
    });
    *remaining -= 1;
    if *remaining > 0 {
        return Gathered::Waiting;
    }
    let (_, sum) = map.remove(&key).expect("present above");
    Gathered::Done(sum.expect("set above"))
}

/// Two shards' replies to one call as one: counts add up, an error wins.
fn combine(a: WireAnswer, b: WireAnswer) -> WireAnswer {
    match (a, b) {
        (
            WireAnswer::Published {
                messages: m1,
                connections: c1,
                users: u1,
            },
            WireAnswer::Published {
                messages: m2,
                connections: c2,
                users: u2,
            },
        ) => WireAnswer::Published {
            messages: m1 + m2,
            connections: c1 + c2,
            users: u1 + u2,
        },
        (
            WireAnswer::Changed {
                edges: e1,
                changed: c1,
            },
            WireAnswer::Changed {
                edges: e2,
                changed: c2,
            },
        ) => WireAnswer::Changed {
            edges: e1 + e2,
            changed: c1 + c2,
        },
        (e @ WireAnswer::Unavailable(_), _) | (_, e @ WireAnswer::Unavailable(_)) => e,
        (a, _) => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_go_to_their_users_shard_or_to_all_and_replies_add_up() {
        let shards = Shards { index: 0, count: 3 };
        let login = WireRequest::Login {
            user: 7,
            since: None,
            epoch: None,
        };
        assert_eq!(dest(&login, shards), Dest::One(1));
        let publish = WireRequest::Publish {
            subject: 7,
            payload: bytes::Bytes::new(),
        };
        assert_eq!(dest(&publish, shards), Dest::All);
        let gathers = Gathers::default();
        let published = |messages, connections| WireAnswer::Published {
            messages,
            connections,
            users: connections,
        };
        assert_eq!(
            gather(&gathers, (0, 1), published(1, 2)),
            Gathered::Alone(published(1, 2))
        );
        gathers.lock().insert((0, 1), (3, None));
        assert_eq!(gather(&gathers, (0, 1), published(1, 2)), Gathered::Waiting);
        assert_eq!(gather(&gathers, (0, 1), published(0, 0)), Gathered::Waiting);
        assert_eq!(
            gather(&gathers, (0, 1), published(0, 5)),
            Gathered::Done(published(1, 7))
        );
        assert!(gathers.lock().is_empty());
    }
}
