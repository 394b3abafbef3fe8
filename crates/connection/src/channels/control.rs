//! A framed WebSocket's control frames: `{"subscribe":…}` and `{"unsubscribe":…}`,
//! each answered at once or by the join's reply.

use super::{replay_stream, subscribed, ws_text, Sub, REFUSED_WHY};
use crate::{Connection, Cx, FRAMED, LOGGED_IN};
use bus::{ChannelJoin, HistoryRead, Refusal, Request};
use serde::Deserialize;
use wire::{Since, Transport};

/// A control frame of a framed WebSocket (`{"subscribe":…}`,
/// `{"unsubscribe":…}`); true when the frame was one.
pub(crate) fn handle_control(conn: &mut Connection, cx: &mut Cx, text: &[u8]) -> bool {
    if !conn.has(FRAMED) {
        return false;
    }
    let is = |key: &[u8]| text.windows(key.len()).any(|w| w == key);
    if !is(b"\"subscribe\"") && !is(b"\"unsubscribe\"") {
        return false;
    }
    let frame: Control = match serde_json::from_slice(text) {
        Ok(f) => f,
        Err(_) => {
            error(cx, None, "bad control frame: want {\"subscribe\":\"<channel>\"[,\"since\":\"<epoch>-<seq>\"]} or {\"unsubscribe\":\"<channel>\"}");
            return true;
        }
    };
    match frame {
        Control::Subscribe { subscribe, since } => subscribe_later(conn, cx, subscribe, since),
        Control::Unsubscribe { unsubscribe } => unsubscribe_later(conn, cx, unsubscribe),
    }
    true
}

#[derive(Deserialize)]
#[serde(untagged, deny_unknown_fields)]
enum Control {
    Subscribe {
        subscribe: String,
        since: Option<String>,
    },
    Unsubscribe {
        unsubscribe: String,
    },
}

fn error(cx: &mut Cx, channel: Option<&str>, why: &str) {
    let text = match channel {
        Some(c) => serde_json::json!({ "error": why, "channel": c }),
        None => serde_json::json!({ "error": why }),
    };
    ws_text(cx, &text.to_string());
}

fn subscribe_later(conn: &mut Connection, cx: &mut Cx, name: String, since: Option<String>) {
    if let Err(why) = wire::channel::check_name(&name) {
        return error(cx, Some(&name), why);
    }
    let since = match since.as_deref().map(|s| Since::parse(s.as_bytes())) {
        None => None,
        Some(Some(s)) => Some(s),
        Some(None) => return error(cx, Some(&name), "since is not <epoch>-<seq>"),
    };
    let Some(chans) = conn.chans.as_mut() else {
        return error(cx, Some(&name), "not a framed connection");
    };
    if !chans.allow.as_ref().is_none_or(|g| g.allows(&name)) {
        return error(cx, Some(&name), REFUSED_WHY);
    }
    if chans.holds(&name) {
        return error(cx, Some(&name), "already subscribed");
    }
    if chans.len() >= cx.config.max_channels {
        return error(
            cx,
            Some(&name),
            "too many channels on this connection (--max-channels-per-connection)",
        );
    }
    chans.push(Sub::new(&name, since, false));
    cx.out.request(Request::Join {
        user: conn.has(LOGGED_IN).then_some(conn.user),
        login: false,
        since: None,
        epoch: None,
        channels: vec![ChannelJoin {
            name,
            since: since.map(|s| s.seq),
            epoch: since.and_then(|s| s.epoch),
        }],
    });
}

fn unsubscribe_later(conn: &mut Connection, cx: &mut Cx, name: String) {
    let held = conn.chans.as_mut().and_then(|c| c.remove(&name));
    if held.is_none() {
        return error(cx, Some(&name), "not subscribed");
    }
    cx.out.request(Request::Leave {
        user: conn.has(LOGGED_IN).then_some(conn.user),
        channels: vec![name.clone()],
    });
    ws_text(cx, &serde_json::json!({ "unsubscribed": name }).to_string());
}

/// A framed WebSocket's later join is answered: `subscribed`, then the replay; or
/// an error frame for a channel the router refused, which the connection then
/// does not hold (a later subscribe may try again).
pub(crate) fn joined_later(
    conn: &mut Connection,
    cx: &mut Cx,
    reads: Vec<(String, HistoryRead)>,
    refused: Vec<(String, Refusal)>,
) {
    for (name, why) in refused {
        let held = conn.chans.as_mut().and_then(|c| c.remove(&name));
        if held.is_some() {
            error(cx, Some(&name), why.text());
        }
    }
    for (name, history) in reads {
        let wanted = conn
            .chans
            .as_mut()
            .and_then(|c| c.find(&name))
            .map(|s| s.at().is_some());
        let Some(resume) = wanted else {
            continue; // left again before the answer
        };
        subscribed(cx, &name, &history, resume);
        if resume {
            replay_stream(conn, cx, Transport::WebSocket, Some(&name), &history);
        }
        if let Some(sub) = conn.chans.as_mut().and_then(|c| c.find(&name)) {
            sub.set_at(Some(Since {
                epoch: history.epoch,
                seq: history.last,
            }));
        }
    }
}
