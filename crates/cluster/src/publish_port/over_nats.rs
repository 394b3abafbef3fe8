//! Several router shards: the port's publishes go as the back-ends' NATS requests to
//! `myriad.pub.<subject>` (SPEC C4), which the subject's shard answers with the
//! counts summed over every shard. A batch's items go one after the other, each
//! answered before the next leaves, so their order holds across shards; with
//! `?parallel=1` all at once.

use crate::subjects;
use crate::timing::FORWARD_TIMEOUT;
use async_nats::Client;
use bus::{Reply, Request};
use bytes::Bytes;
use std::time::Duration;

/// How long one request may take: the subject's shard waits [`FORWARD_TIMEOUT`]
/// for the others before it answers, and the request crosses NATS twice.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(FORWARD_TIMEOUT.as_secs() + 1);

/// One item's outcome.
enum Outcome {
    Published {
        connections: u64,
        users: u64,
    },
    NotStored {
        connections: u64,
        users: u64,
        error: String,
    },
    Failed {
        why: String,
        timed_out: bool,
    },
}

/// Publishes `request` (a `Publish` or `PublishBatch`) and sums the answers.
pub(super) async fn publish(client: &Client, request: Request) -> Reply {
    let items = match request {
        Request::Publish { subject, payload } => {
            return reply_of(1, vec![one(client, subject, payload).await]);
        }
        Request::PublishChannel { channel, payload } => {
            let subject = format!("{}{channel}", subjects::PUBLISH_PREFIX);
            return reply_of(1, vec![one_to(client, subject, payload).await]);
        }
        Request::PublishChannels { items } => {
            // Each channel's shard answers its own; all at once (no order across
            // channels to keep).
            let sends = items
                .into_iter()
                .map(|(c, p)| one_to(client, format!("{}{c}", subjects::PUBLISH_PREFIX), p));
            let outcomes = futures_util::future::join_all(sends).await;
            return reply_of(outcomes.len() as u64, outcomes);
        }
        Request::PublishBatch {
            items,
            parallel: true,
        } => {
            let sends = items.into_iter().map(|(s, p)| one(client, s, p));
            let outcomes = futures_util::future::join_all(sends).await;
            return reply_of(outcomes.len() as u64, outcomes);
        }
        Request::PublishBatch { items, .. } => items,
        other => {
            let why = format!("the publish port does not take {:?}", other.call());
            return Reply::Unavailable(why);
        }
    };
    let total = items.len() as u64;
    let mut outcomes = Vec::with_capacity(items.len());
    for (subject, payload) in items {
        let outcome = one(client, subject, payload).await;
        let failed = matches!(outcome, Outcome::Failed { .. });
        outcomes.push(outcome);
        if failed {
            // Later items would overtake the failed one: stop here.
            break;
        }
    }
    reply_of(total, outcomes)
}

/// One publish as a NATS request, and its answer.
async fn one(client: &Client, subject: u64, payload: Bytes) -> Outcome {
    one_to(client, subjects::publish(subject), payload).await
}

/// One publish to NATS subject `subject` (a subject's or a channel's).
async fn one_to(client: &Client, subject: String, payload: Bytes) -> Outcome {
    let request = client.request(subject, payload);
    match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(Ok(message)) => outcome_of(&message.payload),
        Ok(Err(e)) => Outcome::Failed {
            why: format!("NATS: {e}"),
            timed_out: false,
        },
        Err(_) => Outcome::Failed {
            why: format!(
                "no answer from the router shards in {} s",
                REQUEST_TIMEOUT.as_secs()
            ),
            timed_out: true,
        },
    }
}

/// A router's answer to a back-end ([`crate::backend_answer`]).
fn outcome_of(json: &[u8]) -> Outcome {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(json) else {
        return Outcome::Failed {
            why: "the router's answer is not JSON".into(),
            timed_out: false,
        };
    };
    let count = |name: &str| doc.get(name).and_then(|v| v.as_u64());
    let (connections, users) = (count("connections"), count("users"));
    match (
        doc.get("error").and_then(|e| e.as_str()),
        connections,
        users,
    ) {
        (None, Some(connections), Some(users)) => Outcome::Published { connections, users },
        (Some(_), Some(connections), Some(users)) if doc.get("not_stored").is_some() => {
            Outcome::NotStored {
                connections,
                users,
                error: doc["not_stored"].as_str().unwrap_or_default().to_string(),
            }
        }
        (Some(why), ..) => Outcome::Failed {
            why: why.to_string(),
            timed_out: doc.get("timed_out").and_then(|t| t.as_bool()) == Some(true),
        },
        (None, ..) => Outcome::Failed {
            why: "the router's answer has no counts".into(),
            timed_out: false,
        },
    }
}

/// The reply to `total` items of which `outcomes` were sent (in order; fewer when
/// an ordered batch stopped at a failure).
fn reply_of(total: u64, outcomes: Vec<Outcome>) -> Reply {
    let (mut connections, mut users, mut done) = (0, 0, 0u64);
    let mut not_stored = None;
    let mut failures = Vec::new();
    let mut any_timed_out = false;
    for outcome in outcomes {
        match outcome {
            Outcome::Published {
                connections: c,
                users: u,
            } => (connections, users, done) = (connections + c, users + u, done + 1),
            Outcome::NotStored {
                connections: c,
                users: u,
                error,
            } => {
                (connections, users, done) = (connections + c, users + u, done + 1);
                not_stored.get_or_insert(error);
            }
            Outcome::Failed { why, timed_out } => {
                any_timed_out |= timed_out;
                failures.push(why);
            }
        }
    }
    if failures.is_empty() {
        let published = Reply::Published {
            messages: done,
            connections,
            users,
        };
        return match not_stored {
            Some(why) => published.not_stored(&why),
            None => published,
        };
    }
    let why = &failures[0];
    if done == 0 && !any_timed_out {
        // Nothing went out: safe to retry.
        return Reply::Unavailable(why.clone());
    }
    // Some went out (or may have): a retry would repeat them.
    Reply::TimedOut(format!(
        "{done} of {total} messages published (reaching {connections} connections of {users} \
         users), {} failed: {why}",
        failures.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_router_s_answers_become_the_gateways_replies() {
        let ok = outcome_of(br#"{"connections":7,"users":3}"#);
        let lost = outcome_of(
            br#"{"error":"history not stored: disk full; ...","not_stored":"disk full","connections":2,"users":1}"#,
        );
        let late = outcome_of(br#"{"error":"router shard 1 did not count","timed_out":true}"#);
        let gone = outcome_of(br#"{"error":"bad subject"}"#);
        assert!(matches!(
            ok,
            Outcome::Published {
                connections: 7,
                users: 3
            }
        ));
        assert!(matches!(&lost, Outcome::NotStored { error, .. } if error == "disk full"));
        assert!(matches!(
            late,
            Outcome::Failed {
                timed_out: true,
                ..
            }
        ));
        assert!(matches!(
            gone,
            Outcome::Failed {
                timed_out: false,
                ..
            }
        ));
        assert!(matches!(outcome_of(b"not json"), Outcome::Failed { .. }));
    }

    #[test]
    fn a_batch_sums_its_items_and_says_what_went_out_when_one_failed() {
        let published = |c, u| Outcome::Published {
            connections: c,
            users: u,
        };
        match reply_of(2, vec![published(3, 2), published(4, 1)]) {
            Reply::Published {
                messages: 2,
                connections: 7,
                users: 3,
            } => {}
            other => panic!("{other:?}"),
        }
        let failed = || Outcome::Failed {
            why: "NATS: disconnected".into(),
            timed_out: false,
        };
        assert!(matches!(reply_of(3, vec![failed()]), Reply::Unavailable(_)));
        match reply_of(3, vec![published(3, 2), failed()]) {
            Reply::TimedOut(why) => {
                assert!(why.starts_with("1 of 3 messages published"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        let lost = Outcome::NotStored {
            connections: 1,
            users: 1,
            error: "disk full".into(),
        };
        assert!(matches!(
            reply_of(2, vec![published(3, 2), lost]),
            Reply::NotStored {
                messages: 2,
                connections: 4,
                ..
            }
        ));
    }
}
