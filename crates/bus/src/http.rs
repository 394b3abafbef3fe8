//! A publish over HTTP (`POST /pub/<subject>`, `POST /pub`; docs/protocol.md's endpoint and
//! error tables), the same whether a gateway's API or the router's publish port
//! takes it: the [`Request`] its route and body make, and what its [`Reply`] is
//! answered with.

use crate::{Reply, Request};
use bytes::Bytes;
use wire::Route;

/// The request a publish route's complete body makes: `None` for a route that is
/// not a publish, an error for a batch body that does not parse (its status says
/// 400 or 413).
pub fn publish_request(route: Route, body: Vec<u8>) -> Option<Result<Request, wire::BatchError>> {
    Some(match route {
        Route::Publish { subject, .. } => Ok(Request::Publish {
            subject,
            payload: Bytes::from(body),
        }),
        Route::PublishChannel { channel, .. } => Ok(Request::PublishChannel {
            channel,
            payload: Bytes::from(body),
        }),
        Route::PublishBatch { parallel, .. } => wire::parse_batch(&body).map(|items| {
            // The parser keeps a batch to one kind of line.
            if items.first().is_some_and(|i| i.channel.is_some()) {
                let items = items
                    .into_iter()
                    .map(|i| (i.channel.unwrap_or_default(), Bytes::from(i.data)))
                    .collect();
                return Request::PublishChannels { items };
            }
            Request::PublishBatch {
                items: items
                    .into_iter()
                    .map(|item| (item.subject, Bytes::from(item.data)))
                    .collect(),
                parallel,
            }
        }),
        _ => return None,
    })
}

/// A publish's HTTP answer: a status and its body (JSON on success, a line of text
/// on failure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishAnswer {
    pub status: u16,
    /// `application/json` when true, else `text/plain`.
    pub json: bool,
    /// Without the final newline (the writer adds it).
    pub body: String,
    /// 503 "unavailable": the client may retry after a second (`Retry-After: 1`).
    pub retry_after: bool,
}

impl PublishAnswer {
    /// The answer to a publish (`batch`: `POST /pub`, whose success also says how
    /// many messages); `None` for a reply no publish gets (a bug on the other side).
    pub fn of(batch: bool, reply: Reply) -> Option<PublishAnswer> {
        let text = |status, body, retry_after| PublishAnswer {
            status,
            json: false,
            body,
            retry_after,
        };
        Some(match reply {
            Reply::Published {
                messages,
                connections,
                users,
            } => PublishAnswer {
                status: 200,
                json: true,
                body: if batch {
                    format!(
                        r#"{{"messages":{messages},"connections":{connections},"users":{users}}}"#
                    )
                } else {
                    format!(r#"{{"connections":{connections},"users":{users}}}"#)
                },
                retry_after: false,
            },
            // Retrying delivers the messages again, so no Retry-After.
            Reply::NotStored {
                connections,
                users,
                error,
                ..
            } => text(503, not_stored_text(connections, users, &error), false),
            Reply::Unavailable(why) => text(503, format!("unavailable: {why}"), true),
            Reply::TimedOut(why) => text(504, format!("timed out: {why}"), false),
            _ => return None,
        })
    }
}

/// What a publisher is told when its message went out but its durable history write
/// failed: retrying delivers it again.
pub fn not_stored_text(connections: u64, users: u64, error: &str) -> String {
    format!(
        "history not stored: {error}; delivered to {connections} connections of {users} users, \
         which a restart will not replay"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_publish_is_answered_with_its_reach_or_why_not() {
        let published = || Reply::Published {
            messages: 2,
            connections: 5,
            users: 3,
        };
        let one = PublishAnswer::of(false, published()).unwrap();
        assert_eq!((one.status, one.json), (200, true));
        assert_eq!(one.body, r#"{"connections":5,"users":3}"#);
        let batch = PublishAnswer::of(true, published()).unwrap();
        assert_eq!(batch.body, r#"{"messages":2,"connections":5,"users":3}"#);

        let gone = PublishAnswer::of(false, Reply::Unavailable("no router".into())).unwrap();
        assert_eq!((gone.status, gone.retry_after), (503, true));
        assert_eq!(gone.body, "unavailable: no router");
        let late = PublishAnswer::of(true, Reply::TimedOut("shard 1".into())).unwrap();
        assert_eq!((late.status, late.retry_after), (504, false));
        let lost = Reply::NotStored {
            messages: 1,
            connections: 4,
            users: 2,
            error: "disk full".into(),
        };
        let lost = PublishAnswer::of(false, lost).unwrap();
        assert_eq!((lost.status, lost.retry_after), (503, false));
        assert!(lost
            .body
            .starts_with("history not stored: disk full; delivered to 4"));
        assert_eq!(PublishAnswer::of(false, Reply::Done), None);
    }
}
