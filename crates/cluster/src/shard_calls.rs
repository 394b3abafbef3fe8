//! `--router-shards K` on the gateway side: which router shard a call goes to, and
//! one reply made of the replies of a call divided among shards ([`gathers`]).
//!
//! User `u`'s presence, sequence numbers and history live on shard `u % K`, so
//! logins, logouts and history reads go to their user's shard. Subject `s`'s
//! follower list lives on shard `s % K`, so a publish to `s`, the subscriber list
//! of `s` and a change of an edge `(follower, s)` go to that shard only: it reaches
//! the followers other shards own through them and answers with every shard's
//! counts. A batch of publishes or of edges is divided by subject, each shard
//! getting its part, and the parts' replies are summed (counts add, an error
//! wins). What a user follows is read from every shard (each knows the edges of
//! its own subjects) and the lists are joined, as are the followed subjects
//! online (each shard knows its own users). A channel's presence comes from the
//! channel's shard, a user's from theirs. Stats go to shard 0. A call divided
//! among shards is answered within [`GATHER_TIMEOUT`] even when a shard is dead:
//! with an error naming it and saying what the others did.
//!
//! A publish batch over several shards keeps its order as one process does: a
//! user following subjects of two shards gets the batch's items in the batch's
//! order. Every shard gets its part at once, each item with its place in the
//! batch and the list of shards with items, and shards without items an empty
//! part; the shards with items hand every other their followers and each shard
//! delivers the whole batch to its own users in order once it heard them all
//! (`crate::router_role::in_order`). A batch whose
//! items are independent (`POST /pub?parallel=1`) skips that wait: only the shards
//! with items get their part, and each delivers at once, as do the edges of a
//! change and the parts of a list, which need no order.

mod gathers;

use crate::codec::{part_id, CallRequest, WireCall};
use crate::shards::Shards;
use bus::Request;
pub use gathers::{Gathered, Gathers, GATHER_TICK, GATHER_TIMEOUT};
use parking_lot::Mutex;
use std::time::Instant;

/// Where a call goes.
#[derive(Debug, PartialEq)]
pub enum Dest {
    One(u16),
    All,
    /// A change, a batch (of independent items, or over several shards in order,
    /// [`CallRequest::PublishInOrder`]) divided by subject: each shard's part (in
    /// the call's order), all sent at once.
    Split(Vec<(u16, CallRequest)>),
}

pub fn dest(request: &CallRequest, shards: Shards) -> Dest {
    let request = match request {
        CallRequest::Bus(request) => request,
        // Made by this function, never routed again: already every shard's part.
        CallRequest::PublishInOrder { .. } => return Dest::All,
    };
    let whole = |request| CallRequest::Bus(request);
    match request {
        Request::Login { user, .. }
        | Request::Logout { user }
        | Request::ReadHistory { user, .. } => Dest::One(shards.owner(*user)),
        Request::Publish { subject, .. } | Request::Subscribers { subject } => {
            Dest::One(shards.owner(*subject))
        }
        Request::PublishBatch { items, parallel } => {
            let owner = |(subject, _): &(u64, bytes::Bytes)| shards.owner(*subject);
            let parallel = *parallel;
            let batch = |items| whole(Request::PublishBatch { items, parallel });
            if parallel {
                return one_or_split(divide(items, owner, shards.count), batch);
            }
            let parts = divide(items, owner, shards.count);
            if parts.len() < 2 {
                return one_or_split(parts, batch);
            }
            // Over several shards in order: every shard takes part.
            let mut parts: Vec<Vec<(u32, u64, bytes::Bytes)>> =
                vec![Vec::new(); usize::from(shards.count)];
            for (at, (subject, payload)) in items.iter().enumerate() {
                let part = &mut parts[usize::from(shards.owner(*subject))];
                part.push((at as u32, *subject, payload.clone()));
            }
            let senders: Vec<u16> = (0..shards.count)
                .filter(|s| !parts[usize::from(*s)].is_empty())
                .collect();
            let part = |items| CallRequest::PublishInOrder {
                items,
                senders: senders.clone(),
            };
            Dest::Split(
                parts
                    .into_iter()
                    .enumerate()
                    .map(|(s, items)| (s as u16, part(items)))
                    .collect(),
            )
        }
        Request::ChangeSubscriptions { edges, add } => {
            let parts = divide(edges, |(_, subject)| shards.owner(*subject), shards.count);
            let add = *add;
            one_or_split(parts, |edges| {
                whole(Request::ChangeSubscriptions { edges, add })
            })
        }
        Request::Subscriptions { .. } => Dest::All,
        // Each shard owns the edges of its subjects and the presence of its users
        // (the same ids): each answers which of its subjects the user follows are
        // online, and the lists are joined.
        Request::Online { .. } => Dest::All,
        // Each shard lists the channels it owns; the lists are joined.
        Request::Occupied { .. } => Dest::All,
        Request::Presence { of, .. } => match of {
            bus::PresenceOf::Channel(name) => Dest::One(shards.owner_of_channel(name)),
            bus::PresenceOf::Subject(user) => Dest::One(shards.owner(*user)),
        },
        Request::Stats => Dest::One(0),
        Request::PublishChannel { channel, .. } | Request::ChannelHistory { channel, .. } => {
            Dest::One(shards.owner_of_channel(channel))
        }
        // Each shard its channels; the login (with the channels it owns) to the
        // user's shard.
        Request::Join {
            user,
            login,
            since,
            epoch,
            channels,
            info,
        } => {
            let mut parts = divide(channels, |c| shards.owner_of_channel(&c.name), shards.count);
            let login_shard = user.filter(|_| *login).map(|u| shards.owner(u));
            if let Some(s) = login_shard {
                if !parts.iter().any(|(p, _)| *p == s) {
                    parts.push((s, Vec::new()));
                }
            }
            let parts: Vec<(u16, CallRequest)> = parts
                .into_iter()
                .map(|(s, channels)| {
                    let request = Request::Join {
                        user: *user,
                        login: login_shard == Some(s),
                        since: *since,
                        epoch: *epoch,
                        channels,
                        info: info.clone(),
                    };
                    (s, whole(request))
                })
                .collect();
            if parts.is_empty() {
                return Dest::One(0);
            }
            Dest::Split(parts)
        }
        // Each channel's items in their order on its shard; channels apart need none.
        Request::PublishChannels { items } => {
            let parts = divide(items, |(c, _)| shards.owner_of_channel(c), shards.count);
            one_or_split(parts, |items| whole(Request::PublishChannels { items }))
        }
        Request::Leave { channels } => {
            let parts = divide(channels, |c| shards.owner_of_channel(c), shards.count);
            one_or_split(parts, |channels| whole(Request::Leave { channels }))
        }
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
fn one_or_split<T>(parts: Vec<(u16, Vec<T>)>, request: impl Fn(Vec<T>) -> CallRequest) -> Dest {
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
/// order; calls answered by several shards are registered in `gathers` (at `now`)
/// and each of their parts numbered ([`WireCall::part`]).
pub fn route(
    calls: Vec<WireCall>,
    shards: Shards,
    gathers: &Mutex<Gathers>,
    now: Instant,
) -> Vec<Vec<WireCall>> {
    let mut per_shard: Vec<Vec<WireCall>> = vec![Vec::new(); usize::from(shards.count)];
    for call in calls {
        let to = (call.loop_id, call.token);
        let parts = match dest(&call.request, shards) {
            Dest::One(s) => {
                per_shard[usize::from(s)].push(call);
                continue;
            }
            Dest::All => (0..shards.count)
                .map(|s| (s, call.request.clone()))
                .collect(),
            Dest::Split(parts) => parts,
        };
        if parts.len() == 1 {
            // All of the batch on one shard: answered by it alone.
            let (s, request) = parts.into_iter().next().expect("one part");
            per_shard[usize::from(s)].push(WireCall { request, ..call });
            continue;
        }
        let number = gathers.lock().start(to, &call.request, &parts, now);
        for (s, request) in parts {
            per_shard[usize::from(s)].push(WireCall {
                loop_id: call.loop_id,
                token: call.token,
                part: Some(part_id(number, s)),
                request,
            });
        }
    }
    per_shard
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus::Reply;

    pub(super) fn call(token: u32, request: Request) -> WireCall {
        WireCall {
            loop_id: 1,
            token,
            part: None,
            request: CallRequest::Bus(request),
        }
    }

    fn whole(request: Request) -> CallRequest {
        CallRequest::Bus(request)
    }

    pub(super) fn batch(subjects: &[u64]) -> Request {
        batch_of(subjects, false)
    }

    fn batch_of(subjects: &[u64], parallel: bool) -> Request {
        let items = subjects
            .iter()
            .map(|&s| (s, bytes::Bytes::from(format!("m{s}"))))
            .collect();
        Request::PublishBatch { items, parallel }
    }

    /// The part numbers `route` gave the calls of `token`, by shard.
    pub(super) fn parts(routed: &[Vec<WireCall>], token: u32) -> Vec<u64> {
        routed
            .iter()
            .flatten()
            .filter(|c| c.token == token)
            .map(|c| c.part.expect("a gathered call's parts are numbered"))
            .collect()
    }

    #[test]
    fn calls_go_to_their_users_or_subjects_shard_or_to_all() {
        let shards = Shards { index: 0, count: 3 };
        let login = Request::Login {
            user: 7,
            since: None,
            epoch: None,
        };
        assert_eq!(dest(&whole(login), shards), Dest::One(1));
        let publish = Request::Publish {
            subject: 8,
            payload: bytes::Bytes::new(),
        };
        assert_eq!(dest(&whole(publish.clone()), shards), Dest::One(2));
        let subscriptions = Request::Subscriptions { subscriber: 8 };
        assert_eq!(dest(&whole(subscriptions), shards), Dest::All);
        // Sent whole, answered alone: not numbered, nothing to gather.
        let gathers = Mutex::new(Gathers::default());
        let routed = route(vec![call(5, publish)], shards, &gathers, Instant::now());
        assert_eq!(routed[2][0].part, None);
        assert!(gathers.lock().is_empty());
    }

    #[test]
    fn batches_are_divided_by_subject_and_subscription_lists_joined() {
        let shards = Shards { index: 0, count: 2 };
        // A batch over several shards goes to every shard at once, each item with
        // its place in the batch, naming the shards with items; a shard without
        // items gets an empty part.
        let in_order = |items: &[(u32, u64)]| CallRequest::PublishInOrder {
            items: items
                .iter()
                .map(|&(at, s)| (at, s, bytes::Bytes::from(format!("m{s}"))))
                .collect(),
            senders: vec![1, 2],
        };
        assert_eq!(
            dest(&whole(batch(&[1, 4, 2, 7])), Shards { index: 0, count: 3 }),
            Dest::Split(vec![
                (0, in_order(&[])),
                (1, in_order(&[(0, 1), (1, 4), (3, 7)])),
                (2, in_order(&[(2, 2)]))
            ])
        );
        // On one shard: that shard's alone, sent whole.
        assert_eq!(
            dest(&whole(batch(&[1, 3])), shards),
            Dest::Split(vec![(1, whole(batch(&[1, 3])))])
        );
        // Independent items (`?parallel=1`): each shard's part, all at once.
        let parallel = |subjects: &[u64]| whole(batch_of(subjects, true));
        assert_eq!(
            dest(&parallel(&[1, 3, 2, 5]), shards),
            Dest::Split(vec![(0, parallel(&[2])), (1, parallel(&[1, 3, 5]))])
        );
        // Edges go to their subject's shard; one shard's edges need no gathering.
        let change = call(
            9,
            Request::ChangeSubscriptions {
                edges: vec![(4, 3), (6, 5)],
                add: true,
            },
        );
        let gathers = Mutex::new(Gathers::default());
        let routed = route(vec![change.clone()], shards, &gathers, Instant::now());
        assert!(routed[0].is_empty());
        assert_eq!(routed[1], vec![change]);
        assert!(gathers.lock().is_empty());
        let subs = call(9, Request::Subscriptions { subscriber: 4 });
        let routed = route(vec![subs], shards, &gathers, Instant::now());
        assert!(routed.iter().all(|calls| calls.len() == 1));
        let p = parts(&routed, 9);
        let mut g = gathers.lock();
        assert_eq!(g.gather(p[0], Reply::Ids(vec![3, 7])), Gathered::Waiting);
        assert_eq!(
            g.gather(p[1], Reply::Ids(vec![2, 3])),
            Gathered::Done((1, 9), Reply::Ids(vec![2, 3, 7]))
        );
    }
}
