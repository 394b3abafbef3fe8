//! A back-end's publish (`myriad.pub.<subject>`, payload = the message, as the body
//! of `POST /pub/<subject>`) and its answer: `{"connections":n,"users":u}` or
//! `{"error":…}` — with the counts and `"not_stored"` when the message went out but
//! its history write failed, `"timed_out":true` when some shard did not count in time.
//!
//! A subject that is not a number is a channel's name (`myriad.pub.room:1`,
//! `myriad.pub.news.eu`): the channel's shard publishes it.
//!
//! Every router subscribes to `myriad.pub.>`; with `--router-shards K` only the
//! subject's shard takes a publish (the others drop it unread): it reaches the
//! followers it owns and forwards the rest (`forward`), and answers once every
//! shard counted — the counts summed, or an error naming the shards that did not
//! answer in time. One router answers at once.

use super::forward::PublishCall;
use super::waiting::ReplyTo;
use super::RouterRole;
use crate::subjects;
use bus::Reply;
use bytes::Bytes;
use futures_util::StreamExt;

impl RouterRole {
    /// A message on `myriad.pub.<subject>`, with the request's reply subject if any.
    pub(super) fn backend_publish(&mut self, subject: &str, payload: Bytes, reply: Option<String>) {
        let rest = subject
            .strip_prefix(subjects::PUBLISH_PREFIX)
            .unwrap_or_default();
        let Some(id) = rest.parse::<u64>().ok() else {
            if wire::channel::check_name(rest).is_ok() {
                return self.backend_publish_channel(rest, payload, reply);
            }
            // Every shard sees it: the first answers.
            if self.shards.index == 0 {
                let why =
                    format!("bad subject {subject}: want myriad.pub.<u64> or myriad.pub.<channel>");
                self.answer(reply_to(reply), Reply::Unavailable(why));
            }
            return;
        };
        if self.is_draining() {
            return self.refuse_backend(id, reply_to(reply));
        }
        // Shards: the subject's shard takes it, the others drop it unread.
        if self.shards.count == 1 || self.shards.owns(id) {
            let call = PublishCall {
                to: reply_to(reply),
                items: vec![(id, payload)],
            };
            self.publish_calls(vec![call]);
        }
    }
}

impl RouterRole {
    /// A back-end's publish to channel `name`: the channel's shard publishes it
    /// (every subscriber of a channel is known to that one shard) and answers.
    fn backend_publish_channel(&mut self, name: &str, payload: Bytes, reply: Option<String>) {
        if self.shards.count > 1 && self.shards.owner_of_channel(name) != self.shards.index {
            return;
        }
        if self.is_draining() {
            let why = super::drain::DRAINING.to_string();
            return self.answer(reply_to(reply), Reply::Unavailable(why));
        }
        let request = bus::Request::PublishChannel {
            channel: name.to_string(),
            payload,
        };
        let answer = self.call(super::BACKEND, request);
        self.answer(reply_to(reply), answer);
    }
}

fn reply_to(reply: Option<String>) -> ReplyTo {
    reply.map_or(ReplyTo::Nobody, ReplyTo::Backend)
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
