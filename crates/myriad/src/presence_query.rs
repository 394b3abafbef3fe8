//! `GET /presence/…` on the admin listener (`--admin`): answered on the admin
//! thread straight from the hub of this process, not by an event loop. Under a
//! connect storm a loop runs hundreds of ms behind (its tick lag), and a request on
//! the API port waits that long before it is read; this thread sleeps until asked
//! and holds the router only to copy the members (`Hub::presence`).
//!
//! The same paths, validation and JSON as the API port (`wire::route`,
//! `connection::write_presence`), and the API's credentials: an API key
//! (`Authorization: Bearer`), or, with no `--api-key`, a loopback peer. Page
//! tokens are the API port's alone.

use auth::ApiKeys;
use hub::Hub;
use observe::{Query, QueryAnswer, QueryFn};
use std::sync::Arc;

/// The admin listener's presence hook over `hub`, checking `keys`.
pub fn hook(hub: Arc<Hub>, keys: ApiKeys) -> QueryFn {
    Arc::new(move |q: &Query<'_>| Some(answer(&hub, &keys, q)))
}

fn text(status: u16, body: &str) -> QueryAnswer {
    QueryAnswer {
        status,
        json: false,
        body: format!("{body}\n").into_bytes(),
    }
}

fn answer(hub: &Hub, keys: &ApiKeys, q: &Query<'_>) -> QueryAnswer {
    let allowed = match keys.is_empty() {
        true => q.loopback,
        false => keys.check(q.authorization).is_ok(),
    };
    if !allowed {
        return match keys.is_empty() {
            true => text(
                403,
                "forbidden: presence is answered to loopback peers only",
            ),
            false => text(
                401,
                "unauthorized: an API key is needed (Authorization: Bearer)",
            ),
        };
    }
    // The API port's own parsing: the same names are valid, the same refused.
    let request = format!("GET {} HTTP/1.1\r\n\r\n", q.path);
    let head = match wire::parse_head(request.as_bytes(), &wire::Limits::default()) {
        Ok(Some((head, _))) => head,
        _ => return text(400, "bad request: not a request path"),
    };
    let (of, stats) = match wire::route(&head) {
        Ok(wire::Route::Presence { of, stats }) => (of, stats),
        Ok(_) => return text(404, "not found"),
        Err(e) => return text(e.status(), &e.to_string()),
    };
    let of = match of {
        wire::Present::Channel(name) => bus::PresenceOf::Channel(name),
        wire::Present::Subject(id) => bus::PresenceOf::Subject(id),
    };
    let presence = hub.presence(&of, !stats);
    let mut body = Vec::with_capacity(64);
    connection::write_presence(&mut body, !stats, &of, &presence);
    body.push(b'\n');
    QueryAnswer {
        status: 200,
        json: true,
        body,
    }
}
