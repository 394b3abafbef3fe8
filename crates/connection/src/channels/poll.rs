//! A long-poll that names channels: answered by its join when a stream has news
//! or a gap, else by the next delivery or its timeout, with a composite `since`.

use super::Since;
use crate::delivery::{Frames, Outcome};
use crate::{Connection, Cx, State, KEEP_ALIVE};
use bus::{HistoryRead, Refusal};

/// A waiting long-poll with channels gets its answer from one delivery.
pub(super) fn poll_delivery(
    conn: &mut Connection,
    cx: &mut Cx,
    epoch: u32,
    seq: u64,
    frames: &mut Frames,
) -> Outcome {
    let channel = frames.channel().map(str::to_string);
    let id = frames.channel_id();
    let Some(chans) = conn.chans.as_mut() else {
        return Outcome::Skipped;
    };
    let at = Some(Since {
        epoch: Some(epoch),
        seq,
    });
    // The stream's place moves to this message (the answer's composite says so).
    let before = match id {
        Some(id) => match id.and_then(|id| chans.find_id(id)) {
            Some(i) => {
                let before = chans.at(i);
                chans.set_at(i, at);
                before
            }
            None => return Outcome::Skipped,
        },
        None => {
            let before = chans.user_at();
            chans.set_user_at(at);
            before
        }
    };
    // Anything between the poll's position and this one is lost, and so is
    // everything when the stream started a new epoch meanwhile.
    let gap = before.is_some_and(|b| seq > b.seq + 1 || b.epoch.is_some_and(|e| e != epoch));
    let stream = Stream {
        channel,
        epoch: Some(epoch),
        messages: vec![(seq, frames.subject(), frames.payload().to_vec())],
        last: seq,
        gap,
    };
    answer_poll(conn, cx, vec![stream]);
    Outcome::Sent
}

/// One stream's part of a long-poll answer.
pub(crate) struct Stream {
    /// `None`: the user's.
    channel: Option<String>,
    epoch: Option<u32>,
    /// `(seq, subject, payload)`.
    messages: Vec<(u64, u64, Vec<u8>)>,
    last: u64,
    gap: bool,
}

/// A poll that names channels is answered by its join: at once when a stream has
/// news or a gap or a channel was refused (by the token, or by the router:
/// `refused`), else it waits for the next delivery or its timeout.
pub(crate) fn poll_joined(
    conn: &mut Connection,
    cx: &mut Cx,
    login: Option<HistoryRead>,
    reads: Vec<(String, HistoryRead)>,
    refused: Vec<(String, Refusal)>,
) {
    if let Some(chans) = conn.chans.as_mut() {
        for (name, why) in refused {
            chans.refuse(&name, why);
        }
    }
    let mut streams = Vec::new();
    let mut news = false;
    let all = login
        .map(|h| (None, h))
        .into_iter()
        .chain(reads.into_iter().map(|(n, h)| (Some(n), h)));
    let mut budget = cx.config.max_queued;
    for (channel, history) in all {
        // A client without a position starts from now: nothing to replay.
        let had = match &channel {
            Some(name) => conn
                .chans
                .as_ref()
                .and_then(|c| c.find(name).and_then(|i| c.at(i))),
            None => conn.chans.as_ref().and_then(|c| c.user_at()),
        };
        let messages: Vec<(u64, u64, Vec<u8>)> = if had.is_some() {
            crate::reply::poll_share(&history.messages, &mut budget)
                .iter()
                .map(|(s, m)| (*s, m.subject, m.payload.to_vec()))
                .collect()
        } else {
            Vec::new()
        };
        let cut = messages.len() < history.messages.len() && had.is_some();
        let last = match messages.last() {
            Some(&(s, _, _)) if cut => s,
            _ => history.last,
        };
        let gap = had.is_some() && history.gap;
        news |= !messages.is_empty() || gap;
        // Where the stream now stands (the next poll's position if nothing comes).
        let at = Some(Since {
            epoch: history.epoch,
            seq: last,
        });
        match &channel {
            Some(name) => {
                if let Some(c) = conn.chans.as_mut() {
                    c.set_named_at(name, at);
                }
            }
            None => {
                if let Some(c) = conn.chans.as_mut() {
                    c.set_user_at(at);
                }
            }
        }
        streams.push(Stream {
            channel,
            epoch: history.epoch,
            messages,
            last,
            gap,
        });
    }
    let refused = conn.chans.as_ref().is_some_and(|c| c.any_refused());
    if news || refused {
        answer_poll(conn, cx, streams);
    } else {
        conn.state = State::PollWaiting;
        conn.arm(cx, cx.config.poll_timeout);
    }
}

/// Answers a long-poll with channels: `{"messages":[…],"since":"<composite>",
/// "gaps":[…],"refused":[…]}` (docs/protocol.md "Channels").
pub(crate) fn answer_poll(conn: &mut Connection, cx: &mut Cx, streams: Vec<Stream>) {
    let mut body = Vec::with_capacity(128);
    body.extend_from_slice(b"{\"messages\":[");
    let mut first = true;
    // A channel's gap by its name, the user's stream's by its id (a number).
    let mut gaps: Vec<serde_json::Value> = Vec::new();
    for stream in &streams {
        if stream.gap {
            gaps.push(match &stream.channel {
                Some(c) => c.as_str().into(),
                None => conn.user.into(),
            });
        }
        for (seq, subject, payload) in &stream.messages {
            if !first {
                body.push(b',');
            }
            first = false;
            let data = String::from_utf8_lossy(payload);
            let item = match &stream.channel {
                Some(c) => serde_json::json!({"channel": c, "seq": seq, "data": data}),
                None => serde_json::json!({"subject": subject, "seq": seq, "data": data}),
            };
            serde_json::to_writer(&mut body, &item).expect("Vec write");
        }
        let _ = (stream.epoch, stream.last);
    }
    body.extend_from_slice(b"],\"since\":\"");
    if let Some(c) = conn.chans.as_ref() {
        c.write_composite(&mut body);
    }
    body.extend_from_slice(b"\",\"gaps\":");
    serde_json::to_writer(&mut body, &gaps).expect("Vec write");
    let refused: Vec<serde_json::Value> = conn
        .chans
        .as_ref()
        .map(|c| c.refused())
        .unwrap_or_default()
        .into_iter()
        .map(|(name, why)| serde_json::json!({"channel": name, "error": why}))
        .collect();
    body.extend_from_slice(b",\"refused\":");
    serde_json::to_writer(&mut body, &refused).expect("Vec write");
    body.extend_from_slice(b"}");
    cx.credentials.set_expiry(cx.key, None);
    let keep = conn.has(KEEP_ALIVE);
    crate::reply::send_poll_body(conn, cx, keep, &body);
}

/// A waiting long-poll with channels timed out: an empty answer with its place.
pub(crate) fn answer_poll_timeout(conn: &mut Connection, cx: &mut Cx) {
    answer_poll(conn, cx, Vec::new());
}
