//! Between the bus seam's types ([`bus::Request`], [`bus::Reply`]) and their wire
//! forms in [`crate::codec`].

use crate::codec::{WireAnswer, WireHistory, WireRequest};
use bus::{HistoryRead, Message, Reply, Request};
use std::sync::Arc;

pub fn request_to_wire(request: Request) -> WireRequest {
    match request {
        Request::Login { user, since, epoch } => WireRequest::Login { user, since, epoch },
        Request::Logout { user } => WireRequest::Logout { user },
        Request::Publish { subject, payload } => WireRequest::Publish { subject, payload },
        Request::PublishBatch { items, parallel } => WireRequest::PublishBatch { items, parallel },
        Request::ChangeSubscriptions { edges, add } => {
            WireRequest::ChangeSubscriptions { edges, add }
        }
        Request::ReadHistory { user, since } => WireRequest::ReadHistory { user, since },
        Request::Subscribers { subject } => WireRequest::Subscribers { subject },
        Request::Subscriptions { subscriber } => WireRequest::Subscriptions { subscriber },
        Request::Stats => WireRequest::Stats,
    }
}

pub fn request_from_wire(request: WireRequest) -> Request {
    match request {
        WireRequest::Login { user, since, epoch } => Request::Login { user, since, epoch },
        WireRequest::Logout { user } => Request::Logout { user },
        WireRequest::Publish { subject, payload } => Request::Publish { subject, payload },
        WireRequest::PublishBatch { items, parallel } => Request::PublishBatch { items, parallel },
        // Only sent with several shards; one router takes it as the batch it is.
        WireRequest::PublishInOrder { mut items, .. } => {
            items.sort_by_key(|(at, ..)| *at);
            let items = items.into_iter().map(|(_, s, p)| (s, p)).collect();
            Request::PublishBatch {
                items,
                parallel: false,
            }
        }
        WireRequest::ChangeSubscriptions { edges, add } => {
            Request::ChangeSubscriptions { edges, add }
        }
        WireRequest::ReadHistory { user, since } => Request::ReadHistory { user, since },
        WireRequest::Subscribers { subject } => Request::Subscribers { subject },
        WireRequest::Subscriptions { subscriber } => Request::Subscriptions { subscriber },
        WireRequest::Stats => Request::Stats,
    }
}

pub fn reply_to_wire(reply: Reply) -> WireAnswer {
    match reply {
        Reply::History(h) => WireAnswer::History(WireHistory {
            messages: h
                .messages
                .into_iter()
                .map(|(seq, m)| (seq, m.subject, m.payload.clone()))
                .collect(),
            last: h.last,
            gap: h.gap,
            epoch: h.epoch,
        }),
        Reply::Done => WireAnswer::Done,
        Reply::Published {
            messages,
            connections,
            users,
        } => WireAnswer::Published {
            messages,
            connections,
            users,
        },
        Reply::Changed { edges, changed } => WireAnswer::Changed { edges, changed },
        Reply::Ids(ids) => WireAnswer::Ids(ids),
        Reply::Stats(doc) => WireAnswer::Stats(doc.to_string()),
        Reply::Unavailable(why) => WireAnswer::Unavailable(why),
        Reply::TimedOut(why) => WireAnswer::TimedOut(why),
        Reply::NotStored {
            messages,
            connections,
            users,
            error,
        } => WireAnswer::NotStored {
            messages,
            connections,
            users,
            error,
        },
    }
}

pub fn reply_from_wire(reply: WireAnswer) -> Reply {
    match reply {
        WireAnswer::History(h) => Reply::History(HistoryRead {
            messages: h
                .messages
                .into_iter()
                .map(|(seq, subject, payload)| (seq, Arc::new(Message { subject, payload })))
                .collect(),
            last: h.last,
            gap: h.gap,
            epoch: h.epoch,
        }),
        WireAnswer::Done => Reply::Done,
        WireAnswer::Published {
            messages,
            connections,
            users,
        } => Reply::Published {
            messages,
            connections,
            users,
        },
        WireAnswer::Changed { edges, changed } => Reply::Changed { edges, changed },
        WireAnswer::Ids(ids) => Reply::Ids(ids),
        WireAnswer::Stats(text) => {
            Reply::Stats(serde_json::from_str(&text).unwrap_or(serde_json::Value::Null))
        }
        WireAnswer::Unavailable(why) => Reply::Unavailable(why),
        WireAnswer::TimedOut(why) => Reply::TimedOut(why),
        WireAnswer::NotStored {
            messages,
            connections,
            users,
            error,
        } => Reply::NotStored {
            messages,
            connections,
            users,
            error,
        },
    }
}
