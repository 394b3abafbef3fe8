//! `GET /presence/…` on the admin listener (`--admin`): answered on the admin
//! thread straight from the hub of this process, not by an event loop. Under a
//! connect storm a loop runs hundreds of ms behind (its tick lag), and a request on
//! the API port waits that long before it is read; this thread sleeps until asked
//! and holds the router only to copy the members (`Hub::presence`).
//!
//! An answer read from a channel's mirror is kept with the mirror's version
//! ([`Answers`]) and given again while the version has not moved: a big channel
//! that does not change is answered without copying, sorting or writing its list
//! again. Exact: any join or leave moves the version first.
//!
//! The same paths, validation and JSON as the API port (`wire::route`,
//! `connection::write_presence`), and the API's credentials: an API key
//! (`Authorization: Bearer`), or, with no `--api-key`, a loopback peer. Page
//! tokens are the API port's alone.

use auth::ApiKeys;
use hub::Hub;
use observe::{Query, QueryAnswer, QueryFn};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Channels whose answer is kept at most (past it, the kept ones are dropped).
const KEPT: usize = 256;

/// Answers by (channel, list or counts): the mirror version each is of, and its
/// body.
type Answers = Mutex<HashMap<(String, bool), (u64, Arc<Vec<u8>>)>>;

/// The admin listener's presence hook over `hub`, checking `keys`.
pub fn hook(hub: Arc<Hub>, keys: ApiKeys) -> QueryFn {
    let kept: Answers = Mutex::new(HashMap::new());
    Arc::new(move |q: &Query<'_>| Some(answer(&hub, &keys, &kept, q)))
}

fn text(status: u16, body: &str) -> QueryAnswer {
    QueryAnswer {
        status,
        json: false,
        body: format!("{body}\n").into_bytes(),
    }
}

/// Why `q` is refused, or `None` when its credentials are the API's: an API key
/// (`Authorization: Bearer`), or, with no `--api-key`, a loopback peer.
pub fn refusal(keys: &ApiKeys, q: &Query<'_>) -> Option<QueryAnswer> {
    let allowed = match keys.is_empty() {
        true => q.loopback,
        false => keys.check(q.authorization).is_ok(),
    };
    match (allowed, keys.is_empty()) {
        (true, _) => None,
        (false, true) => Some(text(
            403,
            "forbidden: presence is answered to loopback peers only",
        )),
        (false, false) => Some(text(
            401,
            "unauthorized: an API key is needed (Authorization: Bearer)",
        )),
    }
}

/// What `path` asks (`GET /presence/…` as the API port routes it), or the answer
/// refusing it.
pub fn parse(path: &str) -> Result<(bus::PresenceOf, bool), QueryAnswer> {
    let request = format!("GET {path} HTTP/1.1\r\n\r\n");
    let head = match wire::parse_head(request.as_bytes(), &wire::Limits::default()) {
        Ok(Some((head, _))) => head,
        _ => return Err(text(400, "bad request: not a request path")),
    };
    let (of, stats) = match wire::route(&head) {
        Ok(wire::Route::Presence { of, stats }) => (of, stats),
        Ok(_) => return Err(text(404, "not found")),
        Err(e) => return Err(text(e.status(), &e.to_string())),
    };
    let of = match of {
        wire::Present::Channel(name) => bus::PresenceOf::Channel(name),
        wire::Present::Subject(id) => bus::PresenceOf::Subject(id),
    };
    Ok((of, stats))
}

fn answer(hub: &Hub, keys: &ApiKeys, kept: &Answers, q: &Query<'_>) -> QueryAnswer {
    if let Some(refused) = refusal(keys, q) {
        return refused;
    }
    // The API port's own parsing: the same names are valid, the same refused.
    let (of, stats) = match parse(q.path) {
        Ok(asked) => asked,
        Err(refused) => return refused,
    };
    let key = match &of {
        bus::PresenceOf::Channel(name) => Some((name.clone(), !stats)),
        bus::PresenceOf::Subject(_) => None,
    };
    let kept_body = |key: &(String, bool)| {
        let version = hub.mirror_version(&key.0)?;
        let kept = kept.lock().unwrap_or_else(|p| p.into_inner());
        let (v, body) = kept.get(key)?;
        (*v == version).then(|| body.clone())
    };
    if let Some(body) = key.as_ref().and_then(kept_body) {
        return QueryAnswer {
            status: 200,
            json: true,
            body: body.to_vec(),
        };
    }
    let (presence, version) = hub.presence_versioned(&of, !stats);
    let mut body = Vec::with_capacity(64);
    connection::write_presence(&mut body, !stats, &of, &presence);
    body.push(b'\n');
    if let (Some(key), Some(version)) = (key, version) {
        let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() >= KEPT {
            kept.clear();
        }
        kept.insert(key, (version, Arc::new(body.clone())));
    }
    QueryAnswer {
        status: 200,
        json: true,
        body,
    }
}
