//! A back-end's publish (`myriad.pub.<subject>`, payload = the message, as the body
//! of `POST /pub/<subject>`) and its answer: `{"connections":n,"users":u}` or
//! `{"error":…}` — with the counts and `"not_stored"` when the message went out but
//! its history write failed, `"timed_out":true` when some shard did not count in time.
//!
//! Every router subscribes to `myriad.pub.*`; with `--router-shards K` only the
//! subject's shard takes a publish (the others drop it unread): it reaches the
//! followers it owns and forwards the rest (`forward`), and answers once every
//! shard counted — the counts summed, or an error naming the shards that did not
//! answer in time. One router answers at once.

use super::forward::PublishCall;
use super::waiting::ReplyTo;
use super::{RouterRole, BACKEND};
use crate::codec::WireAnswer;
use crate::convert::reply_to_wire;
use crate::subjects;
use bus::Request;
use bytes::Bytes;
use futures_util::StreamExt;

impl RouterRole {
    /// A message on `myriad.pub.<subject>`, with the request's reply subject if any.
    pub(super) fn backend_publish(&mut self, subject: &str, payload: Bytes, reply: Option<String>) {
        let id = subject
            .strip_prefix(subjects::PUBLISH_PREFIX)
            .and_then(|s| s.parse::<u64>().ok());
        let Some(id) = id else {
            // Every shard sees it: the first answers.
            if self.shards.index == 0 {
                let why = format!("bad subject {subject}: want myriad.pub.<u64>");
                self.answer(reply_to(reply), WireAnswer::Unavailable(why));
            }
            return;
        };
        if self.is_draining() {
            return self.refuse_backend(id, reply_to(reply));
        }
        if self.shards.count > 1 {
            if self.shards.owns(id) {
                let call = PublishCall {
                    to: reply_to(reply),
                    items: vec![(id, payload)],
                };
                self.publish_sharded(vec![call]);
            }
            return;
        }
        let request = Request::Publish {
            subject: id,
            payload,
        };
        let answer = reply_to_wire(self.call(BACKEND, request));
        self.answer(reply_to(reply), answer);
    }
}

fn reply_to(reply: Option<String>) -> ReplyTo {
    reply.map_or(ReplyTo::Nobody, ReplyTo::Backend)
}

/// The JSON a back-end gets for a publish's answer.
pub fn answer_json(answer: &WireAnswer) -> String {
    match answer {
        WireAnswer::Published {
            connections, users, ..
        } => serde_json::json!({"connections": connections, "users": users}).to_string(),
        WireAnswer::NotStored {
            connections,
            users,
            error,
            ..
        } => serde_json::json!({
            "error": format!(
                "history not stored: {error}; delivered to {connections} connections of {users} users"
            ),
            "not_stored": error,
            "connections": connections,
            "users": users,
        })
        .to_string(),
        WireAnswer::Unavailable(why) => serde_json::json!({ "error": why }).to_string(),
        // Part may have gone out: retrying would repeat it.
        WireAnswer::TimedOut(why) => {
            serde_json::json!({ "error": why, "timed_out": true }).to_string()
        }
        other => serde_json::json!({ "error": format!("{other:?}") }).to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_back_end_gets_counts_or_the_error() {
        let published = WireAnswer::Published {
            messages: 1,
            connections: 7,
            users: 3,
        };
        assert_eq!(answer_json(&published), r#"{"connections":7,"users":3}"#);
        let late = WireAnswer::Unavailable("router shard 1 did not count".into());
        assert_eq!(
            answer_json(&late),
            r#"{"error":"router shard 1 did not count"}"#
        );
        let not_stored = WireAnswer::NotStored {
            messages: 1,
            connections: 2,
            users: 1,
            error: "disk full".into(),
        };
        assert!(answer_json(&not_stored).contains("history not stored: disk full"));
    }
}
