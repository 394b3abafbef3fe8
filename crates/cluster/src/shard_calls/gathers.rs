//! A gateway's calls divided among router shards (`--router-shards`), waiting for
//! their parts' replies: the replies summed into one answer (counts add, an error
//! wins, subscription lists joined) — or, when a shard does not answer within
//! [`GATHER_TIMEOUT`] (dead, or cut off), an error that names it and says what the
//! other shards did. Late replies are dropped: each part is numbered on the wire
//! ([`crate::codec::WireCall::part`]), so a reply to a call already answered is
//! told apart from one to the connection's next call. Pending state only, with the
//! time a parameter: the sender registers, the receiver gathers and, from a
//! timer, expires.

use crate::codec::{part_of, CallRequest};
use crate::timing::{FORWARD_TIMEOUT, TICK};
use bus::{Reply, Request};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a gateway waits for every part of a call divided among shards before
/// answering it with an error. A live shard whose part waits for a dead shard's
/// counts (or, in an ordered batch, its part) answers within the router's
/// [`FORWARD_TIMEOUT`] and its next [`TICK`], saying what it delivered; the gateway
/// waits that long so that this answer, the more precise one, comes first.
pub const GATHER_TIMEOUT: Duration = FORWARD_TIMEOUT.saturating_add(TICK);

/// How often the gateway's receiver answers calls past [`GATHER_TIMEOUT`]: their
/// error comes at most this much later.
pub const GATHER_TICK: Duration = Duration::from_millis(250);

/// Calls divided among shards still waiting for some parts' replies, by gather
/// number. Numbers are taken under one lock by the sender, with the time it read
/// just before: they grow with the deadlines to within those microseconds, and
/// every call gets the same [`GATHER_TIMEOUT`], so the first entries are the first
/// to expire: expiring looks at those only, never at every call.
/// Shared by the sender (which registers calls in [`super::route`]) and the
/// receiver (which gathers replies and expires calls).
#[derive(Default)]
pub struct Gathers {
    next: u64,
    calls: BTreeMap<u64, Gather>,
}

/// One call divided among shards.
struct Gather {
    /// The connection `(loop, token)` the answer goes to.
    to: (u16, u32),
    deadline: Instant,
    what: What,
    /// Shard → the size of its part (messages, edges) while it has not answered.
    owed: BTreeMap<u16, u64>,
    /// The sizes of all parts together.
    total: u64,
    /// The answered shards' replies, in arrival order.
    answered: Vec<(u16, Reply)>,
}

/// What kind of call is gathered, for the error when a shard does not answer.
#[derive(Clone, Copy)]
enum What {
    Publish,
    Change {
        add: bool,
    },
    Subscriptions,
    /// Channel joins and leaves: each shard subscribes its own channels.
    Channels,
}

/// What the receiver does with one part's reply.
#[derive(Debug, PartialEq)]
pub enum Gathered {
    /// More parts to hear from.
    Waiting,
    /// The last part answered: the connection `(loop, token)` and the sum.
    Done((u16, u32), Reply),
    /// Its call was answered without it (past [`GATHER_TIMEOUT`]): dropped.
    Late,
}

impl Gathers {
    /// Registers a call of connection `to` divided into `parts` (shard, request),
    /// sent now; returns its gather number.
    pub(super) fn start(
        &mut self,
        to: (u16, u32),
        request: &CallRequest,
        parts: &[(u16, CallRequest)],
        now: Instant,
    ) -> u64 {
        let what = match request {
            CallRequest::Bus(Request::ChangeSubscriptions { add, .. }) => {
                What::Change { add: *add }
            }
            CallRequest::Bus(
                Request::Subscriptions { .. } | Request::Online { .. } | Request::Occupied { .. },
            ) => What::Subscriptions,
            CallRequest::Bus(Request::Join { .. } | Request::Leave { .. }) => What::Channels,
            _ => What::Publish,
        };
        let owed: BTreeMap<u16, u64> = parts.iter().map(|(s, r)| (*s, size(r))).collect();
        let gather = Gather {
            to,
            deadline: now + GATHER_TIMEOUT,
            what,
            total: owed.values().sum(),
            owed,
            answered: Vec::with_capacity(parts.len()),
        };
        self.next += 1;
        self.calls.insert(self.next, gather);
        self.next
    }

    /// One part's reply (`part`: its [`crate::codec::WireCall::part`]).
    pub fn gather(&mut self, part: u64, answer: Reply) -> Gathered {
        let (number, shard) = part_of(part);
        let Some(call) = self.calls.get_mut(&number) else {
            return Gathered::Late;
        };
        if call.owed.remove(&shard).is_none() {
            // A second reply from one shard: not a reply this call waits for.
            return Gathered::Late;
        }
        call.answered.push((shard, answer));
        if !call.owed.is_empty() {
            return Gathered::Waiting;
        }
        let call = self.calls.remove(&number).expect("present above");
        let sum = call
            .answered
            .into_iter()
            .map(|(_, answer)| answer)
            .reduce(combine)
            .expect("one answer at least: pushed above");
        Gathered::Done(call.to, sum)
    }

    /// Calls whose deadline is `now` or earlier, removed and answered with an error
    /// naming the shards that did not answer and saying what the others did.
    pub fn expire(&mut self, now: Instant) -> Vec<((u16, u32), Reply)> {
        let mut expired = Vec::new();
        while let Some(first) = self.calls.first_entry() {
            if first.get().deadline > now {
                break;
            }
            let call = first.remove();
            expired.push((call.to, call.error()));
        }
        expired
    }

    /// Calls waiting for some part.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }
}

/// A part's size in messages or edges, for the error that says what is unknown.
fn size(request: &CallRequest) -> u64 {
    match request {
        CallRequest::Bus(Request::PublishBatch { items, .. }) => items.len() as u64,
        CallRequest::Bus(Request::PublishChannels { items }) => items.len() as u64,
        CallRequest::PublishInOrder { items, .. } => items.len() as u64,
        CallRequest::Bus(Request::ChangeSubscriptions { edges, .. }) => edges.len() as u64,
        _ => 0,
    }
}

impl Gather {
    /// The answer of a call some shards did not answer in time: an error that says
    /// what is known (504 at the gateway for a publish or change, 503 for a list). A publish batch partly published must
    /// not look like nothing happened, nor like a success: the error says which
    /// shards published what, and that the silent shards' parts may or may not
    /// have been published (a slow shard may still do it).
    fn error(self) -> Reply {
        let missing: Vec<String> = self.owed.keys().map(u16::to_string).collect();
        let plural = if missing.len() > 1 { "s" } else { "" };
        let owed: u64 = self.owed.values().sum();
        let secs = GATHER_TIMEOUT.as_secs();
        let mut why = format!(
            "router shard{plural} {} did not answer within {secs} s",
            missing.join(", ")
        );
        let whose = if missing.len() > 1 { "their" } else { "its" };
        match self.what {
            What::Publish => why.push_str(&format!(
                ": {whose} part of the batch ({owed} of {} messages) may or may not have \
                 been published",
                self.total
            )),
            What::Change { .. } => why.push_str(&format!(
                ": {whose} part of the change ({owed} of {} edges) may or may not have been \
                 made",
                self.total
            )),
            What::Subscriptions => why.push_str(": the list would be incomplete"),
            What::Channels => why.push_str(": its channels may or may not be joined"),
        }
        if self.answered.is_empty() {
            why.push_str("; no shard answered");
        }
        let mut published = false;
        for (shard, answer) in &self.answered {
            let said = match (answer, self.what) {
                (Reply::Ids(_) | Reply::Online { .. } | Reply::Occupied(_), _) => continue,
                (
                    Reply::Published {
                        messages,
                        connections,
                        users,
                    },
                    _,
                ) => {
                    published |= *messages > 0;
                    format!("published {messages} messages to {connections} connections of {users} users")
                }
                (
                    Reply::NotStored {
                        messages,
                        connections,
                        users,
                        error,
                    },
                    _,
                ) => {
                    published |= *messages > 0;
                    format!(
                        "published {messages} messages to {connections} connections of \
                         {users} users but did not store their history: {error}"
                    )
                }
                (Reply::Changed { edges, changed }, What::Change { add }) => {
                    let done = if add { "added" } else { "removed" };
                    format!("{done} {changed} of {edges} edges")
                }
                (Reply::Unavailable(e) | Reply::TimedOut(e), _) => {
                    format!("answered: {e}")
                }
                _ => "answered".to_string(),
            };
            why.push_str(&format!("; shard {shard} {said}"));
        }
        if published {
            why.push_str(" (a retry of the whole batch publishes those again)");
        }
        match self.what {
            // Nothing was done: asking again is safe (503 with Retry-After).
            // Joining again is harmless (a leave too): the client reconnects.
            What::Subscriptions | What::Channels => Reply::Unavailable(why),
            // Some of it may have been done: a 504 the client should not repeat blindly.
            What::Publish | What::Change { .. } => Reply::TimedOut(why),
        }
    }
}

/// A publish's answer as counts and, when a shard's durable write failed, why.
fn publish_part(answer: &Reply) -> Option<(u64, u64, u64, Option<&str>)> {
    match answer {
        Reply::Published {
            messages,
            connections,
            users,
        } => Some((*messages, *connections, *users, None)),
        Reply::NotStored {
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
fn combine(a: Reply, b: Reply) -> Reply {
    if let (Some((m1, c1, u1, e1)), Some((m2, c2, u2, e2))) = (publish_part(&a), publish_part(&b)) {
        let error = e1.or(e2).map(str::to_string);
        return Reply::of_publish(m1 + m2, c1 + c2, u1 + u2, error);
    }
    match (a, b) {
        (
            Reply::Changed {
                edges: e1,
                changed: c1,
            },
            Reply::Changed {
                edges: e2,
                changed: c2,
            },
        ) => Reply::Changed {
            edges: e1 + e2,
            changed: c1 + c2,
        },
        // What a user follows: each shard knows the edges of its own subjects.
        (Reply::Ids(mut a), Reply::Ids(b)) => {
            a.extend(b);
            a.sort_unstable();
            a.dedup();
            Reply::Ids(a)
        }
        // Friends online: each shard's followed subjects that are online.
        (
            Reply::Online {
                user,
                online: mut a,
            },
            Reply::Online { online: b, .. },
        ) => {
            a.extend(b);
            a.sort_unstable();
            Reply::Online { user, online: a }
        }
        // Occupied channels: each shard's own, by name.
        (Reply::Occupied(mut a), Reply::Occupied(b)) => {
            a.extend(b);
            a.sort_unstable_by(|x, y| x.name.cmp(&y.name));
            Reply::Occupied(a)
        }
        (e @ (Reply::Unavailable(_) | Reply::TimedOut(_)), _)
        | (_, e @ (Reply::Unavailable(_) | Reply::TimedOut(_))) => e,
        // Channel joins: the login's read from the user's shard, every shard's
        // channels and refusals.
        (
            Reply::Joined {
                login: l1,
                channels: mut c1,
                refused: mut r1,
            },
            Reply::Joined {
                login: l2,
                channels: c2,
                refused: r2,
            },
        ) => {
            c1.extend(c2);
            r1.extend(r2);
            Reply::Joined {
                login: l1.or(l2),
                channels: c1,
                refused: r1,
            }
        }
        (a, _) => a,
    }
}

#[cfg(test)]
mod tests;
