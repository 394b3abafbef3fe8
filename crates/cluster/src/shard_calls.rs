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

/// A publish's answer as counts and, when a shard's durable write failed, why.
fn publish_part(answer: &WireAnswer) -> Option<(u64, u64, u64, Option<&str>)> {
    match answer {
        WireAnswer::Published {
            messages,
            connections,
            users,
        } => Some((*messages, *connections, *users, None)),
        WireAnswer::NotStored {
            messages,
            connections,
            users,
            error,
        } => Some((*messages, *connections, *users, Some(error))),
        _ => None,
    }
}

/// Two shards' replies to one call as one: counts add up, an error wins (a
/// publish one shard could not store is `NotStored` with everyone's counts).
fn combine(a: WireAnswer, b: WireAnswer) -> WireAnswer {
    if let (Some((m1, c1, u1, e1)), Some((m2, c2, u2, e2))) = (publish_part(&a), publish_part(&b)) {
        let (messages, connections, users) = (m1 + m2, c1 + c2, u1 + u2);
        return match e1.or(e2) {
            None => WireAnswer::Published {
                messages,
                connections,
                users,
            },
            Some(error) => WireAnswer::NotStored {
                messages,
                connections,
                users,
                error: error.to_string(),
            },
        };
    }
    match (a, b) {
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
        // One shard's failed durable write makes the sum NotStored, counts kept.
        gathers.lock().insert((0, 2), (2, None));
        let not_stored = WireAnswer::NotStored {
            messages: 0,
            connections: 3,
            users: 3,
            error: "disk full".into(),
        };
        assert_eq!(gather(&gathers, (0, 2), not_stored), Gathered::Waiting);
        assert_eq!(
            gather(&gathers, (0, 2), published(1, 2)),
            Gathered::Done(WireAnswer::NotStored {
                messages: 1,
                connections: 5,
                users: 5,
                error: "disk full".into(),
            })
        );
    }
}
