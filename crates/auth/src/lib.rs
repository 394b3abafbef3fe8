//! `auth`: who may subscribe, publish and call the API (SPEC C5, C7).
//!
//! Pure checks: the only IO is reading key files when a [`JwtVerifier`] is built;
//! time is a parameter (`now`, Unix seconds), never a clock call, so every check is
//! testable at any instant.
//!
//! Not here: where the token comes from (the `Authorization` header or `?token=`,
//! parsed by `wire`), what an answer looks like on the wire (the gateway), and
//! rate limits.
//!
//! # Layout
//!
//! | module | concept |
//! |---|---|
//! | `keys` | [`JwtKeys`]: the configured key (HS256 secret, RS256/ES256 PEM, JWKS) fixing the algorithm |
//! | `jwt` | [`JwtVerifier`]: signature, algorithm, `kid`, `exp`/`nbf` against `now`, `iss`/`aud`, then [`Grant`] |
//! | `claims` | the claims myriad reads (`sub`, `exp`, `nbf`, `iss`, `aud`, `pub`) and [`PublishGrant`] |
//! | `api_key` | [`ApiKeys`]: `--api-key`, compared in constant time |
//! | `bearer` | [`bearer_token`]: `Authorization: Bearer <token>` |
//! | `pusher` | [`PusherApps`]: `--pusher-app`, Pusher channel signatures (HMAC-SHA256, constant time) |
//!
//! # Tokens (C5)
//!
//! A subscription to `/<transport>/<id>` carries a JWT whose `sub` is the user id
//! (a decimal string or a JSON number). The algorithm is fixed by the configured key,
//! never chosen by the token: `--jwt-secret` → HS256; `--jwt-key FILE` with a PEM
//! public key → RS256 (RSA) or ES256 (P-256); `--jwt-key FILE` with a JWKS (`{"keys":
//! [...]}`) → each key's `alg` (or RS256/ES256 from its `kty`), chosen by the token's
//! `kid` (a token without `kid` is accepted only when the set holds one key).
//! `alg: none`, a header algorithm other than the key's, and an HS256 token against an
//! RSA/EC key (the "public key as HMAC secret" confusion) are refused before any
//! signature check. `exp` and `nbf` are optional; when present they are checked
//! against `now` with [`DEFAULT_LEEWAY`] seconds of leeway for clock skew.
//!
//! `iss` and `aud` are checked when the server names what it accepts
//! ([`JwtVerifier::with_issuers`], [`JwtVerifier::with_audiences`]: `--jwt-issuer`,
//! `--jwt-audience`): `iss` must be one of the issuers, `aud` (a string or an array)
//! must name one of the audiences, and a token without the claim is refused. So a
//! token the same key signed for another service is not let in. Unset, the claims
//! are not read.
//!
//! # Token lifetime
//!
//! A token is checked when a connection presents it, and [`Grant::valid_until`] says
//! when it stops being valid (`exp` + leeway): the gateway ends the connection then
//! (each transport in its own words, see the gateway's `core`), and a WebSocket
//! client may present a new token for the same user before that (a refresh, checked
//! by [`JwtVerifier::authorize_subscribe`] like the first).
//!
//! # Client publish (C7): the `pub` claim
//!
//! `"pub"` lists the subjects a WebSocket client may publish to: an array whose items
//! are an id (`7` or `"7"`), an inclusive range `"1000-1999"`, or `"*"` (any
//! subject). Absent or empty: the client may not publish. At most
//! [`MAX_PUB_ENTRIES`] items. Example: `{"sub":"42","pub":[42,"5000-5999"]}` lets
//! user 42 publish to their own subject and to rooms 5000–5999.
//!
//! # Client-visible failures
//!
//! | error | status | meaning |
//! |---|---|---|
//! | [`AuthError::Missing`] | 401 | no token / no API key |
//! | [`AuthError::Malformed`] | 401 | not three base64url parts, bad JSON, bad claim type |
//! | [`AuthError::Algorithm`] | 401 | header `alg` is not the configured key's (includes `none`) |
//! | [`AuthError::UnknownKey`] | 401 | `kid` not in the JWKS |
//! | [`AuthError::Signature`] | 401 | signature does not verify |
//! | [`AuthError::Expired`], [`AuthError::NotYetValid`] | 401 | `exp` passed / `nbf` in the future |
//! | [`AuthError::Issuer`] | 401 | `iss` missing or not one of `--jwt-issuer` |
//! | [`AuthError::Audience`] | 401 | `aud` missing or naming none of `--jwt-audience` |
//! | [`AuthError::NoSubject`] | 401 | no usable `sub` |
//! | [`AuthError::BadApiKey`] | 401 | API key not configured |
//! | [`AuthError::WrongUser`] | 403 | `sub` is another user than the path's id |
//! | [`AuthError::PublishDenied`] | 403 | the token's `pub` claim does not cover the subject |
//! | [`AuthError::InfoTooLarge`] | 400 | the `info` claim is longer than `--max-presence-info` |
//!
//! A 401 should carry `WWW-Authenticate` ([`AuthError::challenge`]).

mod api_key;
mod bearer;
mod claims;
mod jwt;
mod keys;
mod pusher;

pub use api_key::ApiKeys;
pub use bearer::bearer_token;
pub use claims::{parse_claims, ChannelGrant, Claims, PublishGrant, MAX_PUB_ENTRIES};
pub use jwt::{
    inspect_unverified, Grant, JwtVerifier, DEFAULT_LEEWAY, DEFAULT_MAX_INFO, MAX_TOKEN_BYTES,
};
pub use keys::{JwtKeys, KeyError, MIN_SECRET_BYTES};
pub use pusher::{user_key as pusher_user_key, PusherApp, PusherApps, PusherAuthError};

/// Why a request was not let in. `Display` is short and safe to show the client
/// (it never echoes the token).
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    #[error("missing credentials")]
    Missing,
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    #[error("token algorithm not accepted")]
    Algorithm,
    #[error("token key id unknown")]
    UnknownKey,
    #[error("token signature invalid")]
    Signature,
    #[error("token expired")]
    Expired,
    #[error("token not yet valid")]
    NotYetValid,
    #[error("token issuer (iss) missing or not accepted here")]
    Issuer,
    #[error("token audience (aud) missing or not this server")]
    Audience,
    #[error("token has no valid sub (want a u64 user id)")]
    NoSubject,
    #[error("invalid API key")]
    BadApiKey,
    #[error("token is for user {token}, not {path}")]
    WrongUser { token: u64, path: u64 },
    #[error("token does not allow publishing to {0}")]
    PublishDenied(u64),
    /// A valid token the back-end made too large: no retry with it helps.
    #[error("token info claim is longer than {0} bytes (--max-presence-info)")]
    InfoTooLarge(usize),
}

impl AuthError {
    /// 401 when the credentials are missing or invalid, 403 when they are valid but
    /// do not cover what was asked.
    pub fn status(&self) -> u16 {
        match self {
            AuthError::WrongUser { .. } | AuthError::PublishDenied(_) => 403,
            AuthError::InfoTooLarge(_) => 400,
            _ => 401,
        }
    }

    /// The `WWW-Authenticate` value for a 401 (RFC 6750 3), `None` for a 403.
    pub fn challenge(&self) -> Option<&'static str> {
        match self.status() {
            401 if *self == AuthError::Missing => Some("Bearer"),
            401 => Some("Bearer error=\"invalid_token\""),
            _ => None,
        }
    }
}
