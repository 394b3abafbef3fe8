//! Client publish over HTTP (issue 46): `POST /pub/<subject>`, `/pub/<channel>` and
//! the `POST /pub` batch carrying a client's own JWT — in `Authorization: Bearer`,
//! or in `?token=` for a page that cannot set headers (`navigator.sendBeacon`, a
//! form, the query a subscription's `EventSource` already uses) — publish where the
//! token's `pub` claim allows, with the rate and the refusals of a WebSocket client
//! publish (`client_publish`, `publish_rate`). SSE, long-poll and chunked-stream
//! clients send this way.
//!
//! The credential presented decides whose rights a publish gets, never both: an
//! API key (or, without `--api-key`, a loopback peer presenting no credential) is
//! the back-end, unchanged (`access::check_api`); a JWT is a client, limited to its
//! claim and rate, even from a loopback peer. A bearer is taken for a JWT when a
//! JWT key is configured, it is no configured API key and it has a JWT's three
//! parts; `?token=` is always a JWT. Without a JWT key no client may publish
//! (as over WebSocket): `?token=` is refused 403.
//!
//! The rate is [`BURST`](crate::publish_rate::BURST) then
//! [`RATE_PER_SECOND`](crate::publish_rate::RATE_PER_SECOND) per user and process
//! (`PublishRates` in the shared `Access`): an HTTP client may open a new
//! connection, or a new HTTP/2 stream, for every publish, landing on any loop, so a
//! bucket per connection would bound nothing; a batch's lines count one each, all
//! or none.

use super::access::{self, Refusal};
use super::{client_publish, Connection, Cx, KEEP_ALIVE};
use auth::{bearer_token, ChannelGrant, PublishGrant};
use bus::Request;
use std::hash::{Hash, Hasher};
use wire::RequestHead;

/// What a client publish may do: its token's `pub` claim, and whose bucket it
/// takes from.
pub(super) struct ClientGrant {
    /// The token's `sub`, or a hash of the token for one without (`rate_key`).
    rate_key: u64,
    subjects: PublishGrant,
    channels: ChannelGrant,
}

/// A publish's credential: `Ok(None)` the back-end's (the API's check passed),
/// `Ok(Some)` a client's token, valid and with a `pub` claim.
pub(super) fn check(
    conn: &Connection,
    cx: &Cx,
    head: &RequestHead,
    query_token: Option<&str>,
) -> Result<Option<Box<ClientGrant>>, Refusal> {
    let access = &cx.config.access;
    let bearer = head.authorization.as_deref().and_then(bearer_token);
    let token = match (query_token, bearer) {
        (Some(token), _) => token,
        (None, Some(b)) if access.jwt.is_some() && is_jwt_shaped(b) => {
            if access.api_keys.check_key(b.as_bytes()).is_ok() {
                return access::check_api(conn, cx, head).map(|()| None);
            }
            b
        }
        _ => return access::check_api(conn, cx, head).map(|()| None),
    };
    // A page publishing is a page: its origin is checked as its subscription's.
    access::check_origin(cx, head)?;
    let Some(verifier) = &access.jwt else {
        return Err(Refusal::Publish(format!(
            "{} (this server has no JWT key)",
            client_publish::NO_PUB_CLAIM
        )));
    };
    let grant = verifier
        .authorize_channels(Some(token), cx.unix_now())
        .map_err(Refusal::Auth)?;
    if grant.publish == PublishGrant::Nothing && grant.publish_channels == ChannelGrant::Nothing {
        return Err(Refusal::Publish(client_publish::NO_PUB_CLAIM.into()));
    }
    Ok(Some(Box::new(ClientGrant {
        rate_key: rate_key(grant.user, token),
        subjects: grant.publish,
        channels: grant.publish_channels,
    })))
}

/// `header.payload.signature`: what a JWT looks like (an API key may be anything,
/// so one that is configured wins first).
fn is_jwt_shaped(token: &str) -> bool {
    token.bytes().filter(|&b| b == b'.').count() == 2
}

/// The user a token is for; a token without `sub` (channels only) is its own
/// "user", keyed by a hash of its signature (the high bit set, so it never meets a
/// user id below 2^63).
fn rate_key(user: u64, token: &str) -> u64 {
    if user != 0 {
        return user;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    token.rsplit('.').next().unwrap_or(token).hash(&mut h);
    h.finish() | (1 << 63)
}

/// A client publish whose body is read: the claim must name every subject or
/// channel of `request`, and the user's bucket must hold one publish per item.
/// True: send it to the bus; false: answered here (keep-alive goes on: the body
/// was read whole).
pub(super) fn admit(
    conn: &mut Connection,
    cx: &mut Cx,
    grant: &ClientGrant,
    request: &Request,
) -> bool {
    let refused =
        |name: &dyn std::fmt::Display| (403, client_publish::not_allowed_text(&name.to_string()));
    let check = || -> Result<u32, (u16, String)> {
        Ok(match request {
            Request::Publish { subject, .. } if grant.subjects.allows(*subject) => 1,
            Request::Publish { subject, .. } => return Err(refused(subject)),
            Request::PublishChannel { channel, .. } if grant.channels.allows(channel) => 1,
            Request::PublishChannel { channel, .. } => return Err(refused(channel)),
            Request::PublishBatch { items, .. } => {
                if let Some((s, _)) = items.iter().find(|(s, _)| !grant.subjects.allows(*s)) {
                    return Err(refused(s));
                }
                items.len().try_into().unwrap_or(u32::MAX)
            }
            Request::PublishChannels { items } => {
                if let Some((c, _)) = items.iter().find(|(c, _)| !grant.channels.allows(c)) {
                    return Err(refused(c));
                }
                items.len().try_into().unwrap_or(u32::MAX)
            }
            // `bus::http::publish_request` makes only the four above.
            _ => return Err((500, "internal error: not a publish".into())),
        })
    };
    let answer = check().and_then(|n| {
        let now = cx.now;
        // A panic elsewhere while holding it left only counts: go on with them.
        let mut rates = (cx.config.access.publish_rates.lock()).unwrap_or_else(|e| e.into_inner());
        match rates.take(grant.rate_key, now, n) {
            true => Ok(()),
            false => Err((429, client_publish::rate_limit_text())),
        }
    });
    let Err((status, why)) = answer else {
        return true;
    };
    let keep = conn.has(KEEP_ALIVE);
    let retry: &[(&str, &str)] = match status {
        429 => &[("Retry-After", "1")],
        _ => &[],
    };
    conn.respond(cx, keep, |out| {
        wire::write_error_response(out, status, &why, keep, retry)
    });
    false
}
