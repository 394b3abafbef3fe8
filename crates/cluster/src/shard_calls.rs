//! `--router-shards K` on the gateway side: which router shard a call goes to, and
//! one reply made of the replies of a call divided among shards.
//!
//! User `u`'s presence, sequence numbers and history live on shard `u % K`, so
//! logins, logouts and history reads go to their user's shard. Subject `s`'s
//! follower list lives on shard `s % K`, so a publish to `s`, the subscriber list
//! of `s` and a change of an edge `(follower, s)` go to that shard only: it reaches
//! the followers other shards own through them and answers with every shard's
//! counts. A batch of publishes or of edges is divided by subject, each shard
//! getting its part, and the parts' replies are summed (counts add, an error
//! wins). What a user follows is read from every shard (each knows the edges of
//! its own subjects) and the lists are joined. Stats go to shard 0.

use crate::codec::{WireAnswer, WireCall, WireRequest};
use crate::Shards;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Where a call goes.
#[derive(Debug, PartialEq)]
pub enum Dest {
    One(u16),
    All,
    /// A batch divided by subject: each shard's part (in the batch's order).
    Split(Vec<(u16, WireRequest)>),
}

pub fn dest(request: &WireRequest, shards: Shards) -> Dest {
    match request {
        WireRequest::Login { user, .. }
        | WireRequest::Logout { user }
        | WireRequest::ReadHistory { user, .. } => Dest::One(shards.owner(*user)),
        WireRequest::Publish { subject, .. } | WireRequest::Subscribers { subject } => {
            Dest::One(shards.owner(*subject))
        }
        WireRequest::PublishBatch { items } => {
            let parts = divide(items, |(subject, _)| shards.owner(*subject), shards.count);
            one_or_split(parts, |items| WireRequest::PublishBatch { items })
        }
        WireRequest::ChangeSubscriptions { edges, add } => {
            let parts = divide(edges, |(_, subject)| shards.owner(*subject), shards.count);
            let add = *add;
            one_or_split(parts, |edges| WireRequest::ChangeSubscriptions {
                edges,
                add,
            })
        }
        WireRequest::Subscriptions { .. } => Dest::All,
        WireRequest::Stats => Dest::One(0),
    }
}

/// `items` by the shard `owner` names, in their order; shards with none left out.
fn divide<T: Clone>(items: &[T], owner: impl Fn(&T) -> u16, count: u16) -> Vec<(u16, Vec<T>)> {
    let mut parts: Vec<Vec<T>> = vec![Vec::new(); usize::from(count.max(1))];
    for item in items {
        parts[usize::from(owner(item))].push(item.clone());
    }
    parts
        .into_iter()
        .enumerate()
        .filter(|(_, p)| !p.is_empty())
        .map(|(s, p)| (s as u16, p))
        .collect()
}

/// Each shard's part as its own request (an empty batch goes to shard 0).
fn one_or_split<T>(parts: Vec<(u16, Vec<T>)>, request: impl Fn(Vec<T>) -> WireRequest) -> Dest {
    if parts.is_empty() {
        return Dest::Split(vec![(0, request(Vec::new()))]);
    }
    Dest::Split(
        parts
            .into_iter()
            .map(|(shard, part)| (shard, request(part)))
            .collect(),
    )
}

/// A gateway's calls of one wake-up as one list per shard, each in the calls'
/// order; calls answered by several shards are registered in `gathers`.
pub fn route(calls: Vec<WireCall>, shards: Shards, gathers: &Gathers) -> Vec<Vec<WireCall>> {
    let mut per_shard: Vec<Vec<WireCall>> = vec![Vec::new(); usize::from(shards.count)];
    for call in calls {
        let key = (call.loop_id, call.token);
        match dest(&call.request, shards) {
            Dest::One(s) => per_shard[usize::from(s)].push(call),
            Dest::All => {
                gathers.lock().insert(key, (shards.count, None));
                for list in per_shard.iter_mut() {
                    list.push(call.clone());
                }
            }
            Dest::Split(parts) => {
                if parts.len() > 1 {
                    gathers.lock().insert(key, (parts.len() as u16, None));
                }
                for (s, request) in parts {
                    per_shard[usize::from(s)].push(WireCall {
                        loop_id: call.loop_id,
                        token: call.token,
                        request,
                    });
                }
            }
        }
    }
    per_shard
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
        // What a user follows: each shard knows the edges of its own subjects.
        (WireAnswer::Ids(mut a), WireAnswer::Ids(b)) => {
            a.extend(b);
            a.sort_unstable();
            a.dedup();
            WireAnswer::Ids(a)
        }
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
            subject: 8,
            payload: bytes::Bytes::new(),
        };
        assert_eq!(dest(&publish, shards), Dest::One(2));
        let subscriptions = WireRequest::Subscriptions { subscriber: 8 };
        assert_eq!(dest(&subscriptions, shards), Dest::All);
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

    #[test]
    fn batches_are_divided_by_subject_and_subscription_lists_joined() {
        let shards = Shards { index: 0, count: 2 };
        let p = |s: u64| (s, bytes::Bytes::from(format!("m{s}")));
        let batch = WireRequest::PublishBatch {
            items: vec![p(1), p(2), p(3)],
        };
        assert_eq!(
            dest(&batch, shards),
            Dest::Split(vec![
                (0, WireRequest::PublishBatch { items: vec![p(2)] }),
                (
                    1,
                    WireRequest::PublishBatch {
                        items: vec![p(1), p(3)]
                    }
                ),
            ])
        );
        // Edges go to their subject's shard; one shard's edges need no gathering.
        let change = WireRequest::ChangeSubscriptions {
            edges: vec![(4, 3), (6, 5)],
            add: true,
        };
        let call = WireCall {
            loop_id: 1,
            token: 9,
            request: change,
        };
        let gathers = Gathers::default();
        let routed = route(vec![call.clone()], shards, &gathers);
        assert!(routed[0].is_empty());
        assert_eq!(routed[1], vec![call]);
        assert!(gathers.lock().is_empty());
        let subs = WireCall {
            loop_id: 1,
            token: 9,
            request: WireRequest::Subscriptions { subscriber: 4 },
        };
        let routed = route(vec![subs], shards, &gathers);
        assert!(routed.iter().all(|calls| calls.len() == 1));
        assert_eq!(
            gather(&gathers, (1, 9), WireAnswer::Ids(vec![3, 7])),
            Gathered::Waiting
        );
        assert_eq!(
            gather(&gathers, (1, 9), WireAnswer::Ids(vec![2, 3])),
            Gathered::Done(WireAnswer::Ids(vec![2, 3, 7]))
        );
    }
}
