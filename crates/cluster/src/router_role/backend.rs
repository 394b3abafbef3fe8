//! The answer to a back-end's publish request (`myriad.pub.<subject>`) when the
//! router is sharded (`--router-shards K`): every shard delivers to the users it
//! owns, so the request's counts are the sum over shards. Shards other than 0 send
//! their part to shard 0 on [`crate::subjects::BACKEND_PARTS`]; shard 0 answers
//! once all K parts are in, or after [`PARTS_TIMEOUT`] with an error saying how
//! many shards answered (the publisher then counts the publish as failed; the
//! shards that answered did deliver). One router answers by itself.

use super::{RouterRole, BACKEND};
use crate::subjects;
use bus::{Reply, Request};
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long shard 0 waits for the other shards' parts of one request.
pub const PARTS_TIMEOUT: Duration = Duration::from_secs(2);

/// One shard's outcome of a publish: (connections, users) or why not.
pub type Counts = Result<(u64, u64), String>;

/// A shard's part of a back-end request's answer, sent to shard 0.
#[derive(Debug, Serialize, Deserialize)]
pub struct Part {
    /// The request's reply subject (the back-end's inbox).
    pub reply: String,
    pub connections: u64,
    pub users: u64,
    pub error: Option<String>,
}

impl Part {
    pub fn new(reply: String, counts: Counts) -> Part {
        let ((connections, users), error) = match counts {
            Ok(c) => (c, None),
            Err(e) => ((0, 0), Some(e)),
        };
        Part {
            reply,
            connections,
            users,
            error,
        }
    }

    fn counts(&self) -> Counts {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok((self.connections, self.users)),
        }
    }
}

/// The JSON a back-end gets: `{"connections":n,"users":u}` or `{"error":…}`.
pub fn answer(counts: &Counts) -> String {
    match counts {
        Ok((connections, users)) => {
            serde_json::json!({"connections": connections, "users": users}).to_string()
        }
        Err(e) => serde_json::json!({ "error": e }).to_string(),
    }
}

impl RouterRole {
    /// A back-end's publish to `myriad.pub.<subject>` (payload = the message, as
    /// the body of `POST /pub/<subject>`): this shard's counts.
    pub(super) fn backend_publish(&mut self, subject: &str, payload: Bytes) -> Counts {
        let id = subject
            .strip_prefix(subjects::PUBLISH_PREFIX)
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| format!("bad subject {subject}: want myriad.pub.<u64>"))?;
        match self.call_shard(
            BACKEND,
            Request::Publish {
                subject: id,
                payload,
            },
        ) {
            Reply::Published {
                connections, users, ..
            } => Ok((connections, users)),
            Reply::Unavailable(why) => Err(why),
            Reply::NotStored {
                connections,
                users,
                error,
                ..
            } => Err(format!(
                "history not stored: {error}; delivered to {connections} connections of {users} users"
            )),
            other => Err(format!("{other:?}")),
        }
    }

    /// Answers a back-end's request (the same JSON as `POST /pub`): at once with one
    /// router; with several, shard 0 answers the sum once every shard's part is in.
    pub(super) fn backend_answer(&mut self, reply: String, counts: Counts) {
        if self.shards.count <= 1 {
            self.out.push((reply, Bytes::from(answer(&counts))));
        } else if self.shards.index == 0 {
            if let Some((reply, answer)) = self.parts.own(reply, counts, Instant::now()) {
                self.out.push((reply, Bytes::from(answer)));
            }
        } else {
            let part = serde_json::to_vec(&Part::new(reply, counts)).expect("a part serializes");
            self.out
                .push((subjects::BACKEND_PARTS.to_string(), Bytes::from(part)));
        }
    }
}

/// The next message of an optional subscription; never, without one.
pub(super) async fn next_or_never(
    sub: &mut Option<async_nats::Subscriber>,
) -> Option<async_nats::Message> {
    match sub {
        Some(sub) => sub.next().await,
        None => std::future::pending().await,
    }
}

/// Shard 0's requests waiting for parts.
pub struct Pending {
    shards: u16,
    waiting: HashMap<String, Entry>,
}

struct Entry {
    since: Instant,
    /// Shard 0's own part, once it handled the publish.
    own: Option<Counts>,
    others: Vec<Counts>,
}

impl Pending {
    pub fn new(shards: u16) -> Pending {
        Pending {
            shards: shards.max(1),
            waiting: HashMap::new(),
        }
    }

    /// Shard 0's own part; the answer when it completes the request.
    pub fn own(&mut self, reply: String, counts: Counts, now: Instant) -> Option<(String, String)> {
        self.entry(&reply, now).own = Some(counts);
        self.complete(reply)
    }

    /// Another shard's part (it may arrive before shard 0 handled the publish).
    pub fn other(&mut self, part: Part, now: Instant) -> Option<(String, String)> {
        let counts = part.counts();
        self.entry(&part.reply, now).others.push(counts);
        self.complete(part.reply)
    }

    /// Requests waiting longer than [`PARTS_TIMEOUT`], answered with an error.
    pub fn expire(&mut self, now: Instant) -> Vec<(String, String)> {
        let late: Vec<String> = self
            .waiting
            .iter()
            .filter(|(_, e)| now.saturating_duration_since(e.since) >= PARTS_TIMEOUT)
            .map(|(r, _)| r.clone())
            .collect();
        late.into_iter()
            .filter_map(|reply| {
                let e = self.waiting.remove(&reply)?;
                let answered = e.others.len() + usize::from(e.own.is_some());
                let (c, u) = e
                    .own
                    .iter()
                    .chain(&e.others)
                    .filter_map(|c| c.as_ref().ok())
                    .fold((0, 0), |(c, u), (dc, du)| (c + dc, u + du));
                let why = format!(
                    "{answered} of {} router shards answered within {} s \
                     (those delivered to {c} connections of {u} users)",
                    self.shards,
                    PARTS_TIMEOUT.as_secs()
                );
                Some((reply, answer(&Err(why))))
            })
            .collect()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.waiting.len()
    }

    fn entry(&mut self, reply: &str, now: Instant) -> &mut Entry {
        self.waiting.entry(reply.to_string()).or_insert(Entry {
            since: now,
            own: None,
            others: Vec::new(),
        })
    }

    fn complete(&mut self, reply: String) -> Option<(String, String)> {
        let e = self.waiting.get(&reply)?;
        if e.own.is_none() || e.others.len() + 1 < usize::from(self.shards) {
            return None;
        }
        let e = self.waiting.remove(&reply)?;
        let sum = e
            .own
            .into_iter()
            .chain(e.others)
            .try_fold((0, 0), |(c, u), part| part.map(|(dc, du)| (c + dc, u + du)));
        Some((reply, answer(&sum)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_summed_whichever_arrives_first() {
        let t = Instant::now();
        let mut p = Pending::new(3);
        assert_eq!(p.other(Part::new("a".into(), Ok((2, 1))), t), None);
        assert_eq!(p.own("a".into(), Ok((3, 2)), t), None);
        let (reply, json) = p.other(Part::new("a".into(), Ok((5, 4))), t).unwrap();
        assert_eq!(reply, "a");
        assert_eq!(json, r#"{"connections":10,"users":7}"#);
        assert_eq!(p.len(), 0);
    }

    #[test]
    fn one_shard_answers_at_once_and_an_error_wins() {
        let t = Instant::now();
        assert_eq!(
            Pending::new(1).own("r".into(), Ok((1, 1)), t).unwrap().1,
            r#"{"connections":1,"users":1}"#
        );
        let mut p = Pending::new(2);
        assert_eq!(p.own("r".into(), Ok((1, 1)), t), None);
        let (_, json) = p
            .other(Part::new("r".into(), Err("full".into())), t)
            .unwrap();
        assert_eq!(json, r#"{"error":"full"}"#);
    }

    #[test]
    fn a_missing_shard_is_reported_after_the_timeout_not_before() {
        let t = Instant::now();
        let mut p = Pending::new(3);
        assert_eq!(p.own("r".into(), Ok((4, 2)), t), None);
        assert_eq!(p.other(Part::new("r".into(), Ok((1, 1))), t), None);
        assert!(p.expire(t + PARTS_TIMEOUT / 2).is_empty());
        let late = p.expire(t + PARTS_TIMEOUT);
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].0, "r");
        assert!(
            late[0].1.contains("2 of 3 router shards answered")
                && late[0].1.contains("5 connections of 3 users"),
            "{}",
            late[0].1
        );
        assert_eq!(p.len(), 0);
    }

    #[test]
    fn a_part_crosses_as_json() {
        let part = Part::new("_INBOX.x.y".into(), Ok((7, 3)));
        let back: Part = serde_json::from_slice(&serde_json::to_vec(&part).unwrap()).unwrap();
        assert_eq!(back.counts(), Ok((7, 3)));
        assert_eq!(back.reply, "_INBOX.x.y");
    }
}
