//! Who may do what (SPEC C5): subscriptions and long-polls need a JWT whose `sub` is
//! the path's user id, API calls need an API key. The checks are `auth`'s; this
//! module decides which check a route needs, where its credential comes from and
//! what the client is answered when it fails.
//!
//! Modes, chosen by `myriad serve`'s flags and announced on its start line:
//! - no `--jwt-secret` / `--jwt-key`: subscriptions are open (benchmarks, the demo);
//! - no `--api-key`: the API answers loopback peers only (403 to anyone else), so a
//!   server that forgot its keys is not an open relay;
//! - `/healthz` never needs a credential (load balancers probe it).
//!
//! A refused credential (token or API key) is a failed authentication, counted per
//! connection in the loop's `credentials` table: the answer to the
//! [`MAX_AUTH_FAILURES`]th closes the connection.

use super::{
    Connection, Cx, Hosts, Origins, PublishRates, KEEP_ALIVE, MAX_AUTH_FAILURES, PEER_LOOPBACK,
};
use auth::{bearer_token, ApiKeys, AuthError, Grant, JwtVerifier};
use wire::{BodyKind, RequestHead};

/// The credentials a server accepts; shared by every connection of every loop.
#[derive(Debug, Default)]
pub struct Access {
    /// `None`: subscriptions need no token.
    pub jwt: Option<JwtVerifier>,
    /// Empty: the API answers loopback peers only.
    pub api_keys: ApiKeys,
    /// Browser pages let in (`origin`).
    pub origins: Origins,
    /// Host names served (`hosts`).
    pub hosts: Hosts,
    /// Client publishes over HTTP: a rate bucket per user, shared by the process's
    /// loops (`http_publish`), so a client gets one rate whichever loop its
    /// connections land on. Locked once per client publish, never per delivery.
    pub publish_rates: std::sync::Mutex<PublishRates>,
    /// Pusher Channels apps (`--pusher-app`): `/app/<key>` answers their keys only.
    pub pusher: auth::PusherApps,
}

impl Access {
    /// How subscriptions are let in, for the start line.
    pub fn describe_subscriptions(&self) -> String {
        match &self.jwt {
            None => "open (no --jwt-secret / --jwt-key)".into(),
            Some(v) => {
                let algs: Vec<&str> = v.keys().describe().iter().map(|k| k.1).collect();
                match v.describe_claims() {
                    Some(claims) => format!("JWT {} {claims}", algs.join(",")),
                    None => format!("JWT {}", algs.join(",")),
                }
            }
        }
    }

    /// Which browser pages are let in, for the start line.
    pub fn describe_origins(&self) -> String {
        self.origins.describe()
    }

    /// Which `Host` names are served, for the start line.
    pub fn describe_hosts(&self) -> String {
        self.hosts.describe()
    }

    /// The start-up warning for a server without `--api-key` whose listener reaches
    /// beyond loopback (`None` when it does not): the loopback rule trusts the peer's
    /// address, and whatever relays from this host — a reverse proxy or a tunnel on
    /// the same machine — makes every remote client look like 127.0.0.1.
    pub fn open_api_warning(&self, listen: std::net::SocketAddr) -> Option<String> {
        open_api_warning(listen, !self.api_keys.is_empty(), "--listen")
    }

    /// How API calls are let in, for the start line.
    pub fn describe_api(&self) -> String {
        if self.api_keys.is_empty() {
            "loopback peers only (no --api-key)".into()
        } else {
            "API key".into()
        }
    }
}

/// [`Access::open_api_warning`] for any listener `flag` names (the router's publish
/// port too): `None` with a key, or when `listen` is a loopback address.
pub fn open_api_warning(listen: std::net::SocketAddr, has_key: bool, flag: &str) -> Option<String> {
    if has_key || listen.ip().to_canonical().is_loopback() {
        return None;
    }
    Some(format!(
        "no --api-key while {flag} {listen} reaches beyond loopback: the API (publish, \
         subscription changes, /stats) answers any peer that looks like loopback, so \
         anything relaying from this host (a reverse proxy on the same host, an SSH \
         tunnel) lets every client it relays publish and change subscriptions; set \
         --api-key (docs/operations.md, \"Running in production\")"
    ))
}

/// Why the API refused a peer without keys configured: 403, not 401, because no
/// credential would help.
pub const LOOPBACK_ONLY: &str = "the API answers loopback peers only (the server has no --api-key)";

/// A subscription or long-poll to `user` (or to channels only, `None`): the page's origin, then the token from `?token=` (EventSource
/// cannot set headers) or `Authorization: Bearer`. `Ok(None)` when no JWT is
/// configured.
pub(super) fn check_subscribe(
    cx: &Cx,
    user: Option<u64>,
    query_token: Option<&str>,
    head: &RequestHead,
) -> Result<Option<Grant>, Refusal> {
    check_origin(cx, head)?;
    let Some(verifier) = &cx.config.access.jwt else {
        return Ok(None);
    };
    let token = match query_token {
        Some(t) => Some(t),
        None => head.authorization.as_deref().and_then(bearer_token),
    };
    match user {
        Some(user) => verifier.authorize_subscribe(token, user, cx.unix_now()),
        // Channels only: any valid token, its `chan` claim deciding which.
        None => verifier.authorize_channels(token, cx.unix_now()),
    }
    .map(Some)
    .map_err(Refusal::Auth)
}

/// The page's origin, as a subscription's (`--allowed-origins`): a subscription, and
/// a `POST /subscribe` or `/unsubscribe` for one.
pub(super) fn check_origin(cx: &Cx, head: &RequestHead) -> Result<(), Refusal> {
    match &head.origin {
        Some(origin) if !cx.config.access.origins.allows_subscribe(origin) => Err(Refusal::Origin),
        _ => Ok(()),
    }
}

/// An API call (publish, subscriptions, subscribers, stats): the page's origin,
/// then the key (or the loopback rule).
pub(super) fn check_api(conn: &Connection, cx: &Cx, head: &RequestHead) -> Result<(), Refusal> {
    if let Some(origin) = &head.origin {
        if !cx.config.access.origins.allows_api(origin) {
            return Err(Refusal::Origin);
        }
    }
    let keys = &cx.config.access.api_keys;
    if keys.is_empty() {
        return if conn.has(PEER_LOOPBACK) {
            Ok(())
        } else {
            Err(Refusal::LoopbackOnly)
        };
    }
    keys.check(head.authorization.as_deref())
        .map_err(Refusal::Auth)
}

/// `GET /presence/<channel>` (and its `/stats`): an API call, or — with a JWT key
/// configured — a page's own token (`Authorization: Bearer`) whose `chan` claim
/// allows the channel: a page may see who is in a room it may read. A valid token
/// that does not allow the channel is answered 403; anything else that is no API
/// credential gets the API's refusal.
pub(super) fn check_presence(
    conn: &Connection,
    cx: &Cx,
    head: &RequestHead,
    channel: &str,
) -> Result<(), Refusal> {
    let api = check_api(conn, cx, head);
    let (Err(_), Some(verifier)) = (&api, &cx.config.access.jwt) else {
        return api;
    };
    let Some(token) = head.authorization.as_deref().and_then(bearer_token) else {
        return api;
    };
    // A wrong API key is no JWT either: the API's refusal stands.
    let Ok(grant) = verifier.authorize_channels(Some(token), cx.unix_now()) else {
        return api;
    };
    check_origin(cx, head)?;
    if grant.channels.allows(channel) {
        Ok(())
    } else {
        Err(Refusal::Channel)
    }
}

/// Any request but `/healthz`: its `Host` must be served (`--allowed-hosts`).
pub(super) fn check_host(cx: &Cx, head: &RequestHead) -> Result<(), Refusal> {
    match (
        cx.config.access.hosts.allows(head.host.as_deref()),
        &head.host,
    ) {
        (true, _) => Ok(()),
        (false, Some(_)) => Err(Refusal::Host),
        (false, None) => Err(Refusal::NoHost),
    }
}

/// Why an API call was refused.
pub(super) enum Refusal {
    Auth(AuthError),
    LoopbackOnly,
    /// The request's `Origin` is not let in (`origin`).
    Origin,
    /// The request's `Host` is not served (`hosts`): 421 Misdirected Request.
    Host,
    /// No `Host` while `--allowed-hosts` is set: 400.
    NoHost,
    /// A valid token whose `chan` claim does not allow the channel asked about: 403.
    Channel,
    /// A client publish over HTTP its token cannot make (`http_publish`): 403.
    Publish(String),
}

/// Answers a refused request: 401 with `WWW-Authenticate`, or 403. Keep-alive goes
/// on when the request had no body (the framing is intact); otherwise the
/// connection closes rather than reading a body nobody will use. A refused
/// credential is a failed authentication: the [`MAX_AUTH_FAILURES`]th on one
/// connection is answered with `Connection: close` and closes it, so a client
/// cannot try token after token (each a signature check) on one connection.
pub(super) fn refuse(conn: &mut Connection, cx: &mut Cx, head: &RequestHead, why: Refusal) {
    let (status, message, challenge) = match &why {
        Refusal::Auth(e) => (e.status(), e.to_string(), e.challenge()),
        Refusal::LoopbackOnly => (403, LOOPBACK_ONLY.to_string(), None),
        Refusal::Origin => (403, "origin not allowed".to_string(), None),
        Refusal::Host => (421, "host not served here".to_string(), None),
        Refusal::NoHost => (400, "a Host header is required".to_string(), None),
        Refusal::Channel => (403, super::channels::REFUSED_WHY.to_string(), None),
        Refusal::Publish(why) => (403, why.clone(), None),
    };
    let failures_left = match why {
        Refusal::Auth(_) => cx.credentials.fail(cx.key) < MAX_AUTH_FAILURES,
        _ => true,
    };
    let keep = conn.has(KEEP_ALIVE) && head.body == BodyKind::None && failures_left;
    conn.set(KEEP_ALIVE, keep);
    let headers: &[(&str, &str)] = match challenge {
        Some(c) => &[("WWW-Authenticate", c)],
        None => &[],
    };
    conn.respond(cx, keep, |out| {
        wire::write_error_response(out, status, &message, keep, headers)
    });
}
