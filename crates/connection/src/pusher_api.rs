//! Pusher's HTTP API for publishing (`POST /apps/<id>/events` and `batch_events`,
//! docs/protocol.md "Pusher clients"): the request's signature checked with its
//! body (`auth::PusherApp::check_api_request`), then one channel publish per
//! channel, each payload the envelope a Pusher client reads as the event
//! (`wire::pusher::Published`), naming the `socket_id` to leave out. Answered by
//! the publish reply like `POST /pub`.

use super::Cx;
use bus::Request;
use bytes::Bytes;
use serde::Deserialize;
use wire::pusher::Published;

/// Most channels one event names (Pusher's limit).
pub const MAX_CHANNELS_PER_EVENT: usize = 100;
/// Most events in one batch (Pusher's limit).
pub const MAX_BATCH: usize = 10;

#[derive(Deserialize)]
struct Event {
    name: String,
    data: String,
    #[serde(default)]
    channels: Option<Vec<String>>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    socket_id: Option<String>,
}

#[derive(Deserialize)]
struct Batch {
    batch: Vec<Event>,
}

/// The publish a signed API request asks for, or the status and text to refuse it.
pub(super) fn request(
    cx: &Cx,
    (app, batch): (&str, bool),
    (path, query): (&str, &str),
    body: &[u8],
) -> Result<Request, (u16, String)> {
    let Some(the_app) = cx.config.access.pusher.by_id(app) else {
        return Err((400, format!("unknown app {app}")));
    };
    the_app
        .check_api_request("POST", path, query, body, cx.unix_now())
        .map_err(|e| (401, e.to_string()))?;
    let events = match batch {
        false => vec![serde_json::from_slice::<Event>(body).map_err(bad)?],
        true => serde_json::from_slice::<Batch>(body).map_err(bad)?.batch,
    };
    if events.len() > MAX_BATCH {
        return Err((413, format!("more than {MAX_BATCH} events in a batch")));
    }
    let mut items = Vec::new();
    for e in events {
        if e.name.len() > wire::pusher::MAX_EVENT_NAME {
            return Err((400, "event name longer than 200 bytes".into()));
        }
        if e.data.len() > cx.config.max_message {
            let max = cx.config.max_message;
            return Err((413, format!("data larger than {max} bytes (--max-message)")));
        }
        let channels = match (e.channels, e.channel) {
            (Some(c), None) => c,
            (None, Some(c)) => vec![c],
            _ => return Err((400, "name channels or channel, not both".into())),
        };
        if channels.is_empty() || channels.len() > MAX_CHANNELS_PER_EVENT {
            let why = format!("an event names 1 to {MAX_CHANNELS_PER_EVENT} channels");
            return Err((400, why));
        }
        let payload = Bytes::from(Published::envelope(
            &e.name,
            &e.data,
            e.socket_id.as_deref(),
        ));
        for c in channels {
            wire::channel::check_name(&c).map_err(|why| (400, format!("{c}: {why}")))?;
            items.push((c, payload.clone()));
        }
    }
    Ok(Request::PublishChannels { items })
}

fn bad(e: serde_json::Error) -> (u16, String) {
    (400, format!("bad event body: {e}"))
}
