//! Client publish over WebSocket (SPEC C7): a text frame
//! `{"publish":<subject>,"data":"<text>"}` publishes `data` to `subject` when the
//! connection's token allows it (the `pub` claim, see the `auth` crate), at most
//! [`RATE_PER_SECOND`] per second per connection (a bucket of [`BURST`](crate::publish_rate::BURST),
//! `publish_rate`). The same publish over HTTP is `http_publish`.
//!
//! Answers are text frames: `{"published":{"connections":n,"users":u}}`, or
//! `{"error":"<why>"}` — never a silent drop. Text frames that are not a publish
//! request (no `"publish"` key) are ignored as before.
//!
//! The token's lifetime bounds the grant: once it has expired nothing is published
//! (`websocket` checks before this module is asked), and a refreshed token's `pub`
//! claim replaces it (`refresh`).
//!
//! Budget: only a connection whose token has a non-empty `pub` claim keeps state (a
//! boxed [`Publisher`] in its pending box); every other connection stays 32 bytes
//! with no box.

use super::{Connection, Cx, Tick};
use crate::publish_rate::Bucket;
use crate::publish_rate::RATE_PER_SECOND;
use auth::{ChannelGrant, PublishGrant};
use bus::Request;
use bytes::Bytes;
use serde::Deserialize;

/// What a publishing WebSocket connection keeps.
pub(super) struct Publisher {
    grant: PublishGrant,
    /// The channels the `pub` claim names.
    channels: ChannelGrant,
    /// How many more it may publish now.
    bucket: Bucket,
}

impl Publisher {
    pub(super) fn new(
        (grant, channels): (PublishGrant, ChannelGrant),
        now: Tick,
    ) -> Option<Box<Publisher>> {
        (grant != PublishGrant::Nothing || channels != ChannelGrant::Nothing).then(|| {
            Box::new(Publisher {
                grant,
                channels,
                bucket: Bucket::full(now),
            })
        })
    }

    /// A refreshed token's grant (`refresh`): it replaces `old`'s, whose rate bucket
    /// is kept (a refresh does not refill it); an empty grant drops the publisher.
    pub(super) fn regrant(
        old: Option<Box<Publisher>>,
        (grant, channels): (PublishGrant, ChannelGrant),
        now: Tick,
    ) -> Option<Box<Publisher>> {
        if grant == PublishGrant::Nothing && channels == ChannelGrant::Nothing {
            return None;
        }
        match old {
            Some(mut old) => {
                old.grant = grant;
                old.channels = channels;
                Some(old)
            }
            None => Publisher::new((grant, channels), now),
        }
    }

    fn take_token(&mut self, now: Tick) -> bool {
        self.bucket.take(now, 1)
    }
}

/// A publish request frame, typed (unknown keys refused).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishFrame {
    publish: Topic,
    data: String,
}

/// What a client publishes to: a subject id, or a channel by name.
#[derive(Deserialize)]
#[serde(untagged)]
enum Topic {
    Subject(u64),
    Channel(String),
}

/// A complete text message from the client. True when it was a publish request
/// (answered here or by the bus reply).
pub(super) fn handle_text(conn: &mut Connection, cx: &mut Cx, text: &[u8]) -> bool {
    // Cheap test first: most clients send no publishes at all.
    if !text.windows(9).any(|w| w == b"\"publish\"") {
        return false;
    }
    let frame: PublishFrame = match serde_json::from_slice(text) {
        Ok(f) => f,
        Err(_) => {
            error(
                cx,
                "bad publish frame: want {\"publish\":<subject>,\"data\":\"<text>\"}",
            );
            return true;
        }
    };
    let now = cx.now;
    let Some(publisher) = conn.pending.as_mut().and_then(|p| p.publisher.as_mut()) else {
        error(cx, NO_PUB_CLAIM);
        return true;
    };
    let allowed = match &frame.publish {
        Topic::Subject(s) => publisher.grant.allows(*s),
        Topic::Channel(c) => publisher.channels.allows(c),
    };
    if !allowed {
        let name = match &frame.publish {
            Topic::Subject(s) => s.to_string(),
            Topic::Channel(c) => c.clone(),
        };
        error(cx, &not_allowed_text(&name));
        return true;
    }
    if let Topic::Channel(c) = &frame.publish {
        if let Err(why) = wire::channel::check_name(c) {
            error(cx, why);
            return true;
        }
    }
    if !publisher.take_token(now) {
        error(cx, &rate_limit_text());
        return true;
    }
    let payload = Bytes::from(frame.data.into_bytes());
    cx.out.request(match frame.publish {
        Topic::Subject(subject) => Request::Publish { subject, payload },
        Topic::Channel(channel) => Request::PublishChannel { channel, payload },
    });
    true
}

/// What a client whose token has no `pub` claim is told, on every transport.
pub(super) const NO_PUB_CLAIM: &str = "publishing needs a token whose pub claim lists the subject";

/// What a client is told when its claim does not name `name`, on every transport.
pub(super) fn not_allowed_text(name: &str) -> String {
    format!("token does not allow publishing to {name}")
}

/// What a client over the rate is told, on every transport.
pub(super) fn rate_limit_text() -> String {
    format!("rate limit: at most {RATE_PER_SECOND} publishes per second")
}

/// The bus answered a client publish.
pub(super) fn answer(cx: &mut Cx, connections: u64, users: u64) {
    let text = format!(r#"{{"published":{{"connections":{connections},"users":{users}}}}}"#);
    cx.out
        .write(|out| wire::write_ws_frame(out, wire::Opcode::Text, text.as_bytes()));
}

/// An error frame: `{"error":"…"}`.
pub(super) fn error(cx: &mut Cx, why: &str) {
    let text = serde_json::json!({ "error": why }).to_string();
    cx.out
        .write(|out| wire::write_ws_frame(out, wire::Opcode::Text, text.as_bytes()));
}
