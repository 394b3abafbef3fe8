//! [`JwtVerifier`]: checks a compact JWS token (RFC 7515/7519) in a fixed order —
//! shape, header, algorithm and key, signature, then claims and time — so a token is
//! never believed before its signature is checked, and the check that failed is
//! the one reported.
//!
//! The header and payload are parsed here into typed structs (the signature math is
//! `jsonwebtoken::crypto::verify`); `jsonwebtoken`'s own `decode` is not used
//! because it reads the system clock, and time here is a parameter.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::Deserialize;

use crate::claims::{parse_claims, ChannelGrant, Claims, PublishGrant};
use crate::keys::{alg_name, JwtKeys};
use crate::AuthError;

/// Seconds of clock skew tolerated on `exp` and `nbf`.
pub const DEFAULT_LEEWAY: u64 = 30;

/// Default bound on a token's `info` claim, compact JSON bytes (`--max-presence-info`).
pub const DEFAULT_MAX_INFO: usize = 256;

/// Longest token considered (a token arrives in a request head of at most 8 KiB).
pub const MAX_TOKEN_BYTES: usize = 8192;

/// What a verified subscription token grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The user the connection is logged in as (the token's `sub`, equal to the path's id).
    pub user: u64,
    /// Subjects the connection may publish to over WebSocket (C7).
    pub publish: PublishGrant,
    /// Channels the connection may publish to (the `pub` claim's channel items).
    pub publish_channels: ChannelGrant,
    /// Channels the connection may subscribe to (the `chan` claim).
    pub channels: ChannelGrant,
    /// The first whole Unix second at which the token is no longer accepted (`exp`
    /// plus the leeway, rounded up), if it has an `exp`: the gateway ends the
    /// connection then, unless the client refreshed its token in place.
    pub valid_until: Option<u64>,
    /// The `info` claim as compact JSON text: the user's presence info.
    pub info: Option<Box<str>>,
    /// The `nopresence` claim: channels where `presence=1` gets no pushes.
    pub no_presence: ChannelGrant,
}

/// Verifies subscription tokens against the configured keys.
#[derive(Debug)]
pub struct JwtVerifier {
    keys: JwtKeys,
    leeway: u64,
    /// `--jwt-audience`: when not empty, a token's `aud` must name one of these.
    audiences: Vec<String>,
    /// `--jwt-issuer`: when not empty, a token's `iss` must be one of these.
    issuers: Vec<String>,
    /// `--max-presence-info`: the longest `info` claim (compact JSON bytes).
    max_info: usize,
}

/// The JOSE header fields myriad reads.
#[derive(Deserialize)]
struct Header {
    alg: String,
    kid: Option<String>,
    /// RFC 7515 4.1.11: extensions the recipient must understand. myriad understands
    /// none, so any `crit` refuses the token.
    crit: Option<serde::de::IgnoredAny>,
}

impl JwtVerifier {
    pub fn new(keys: JwtKeys) -> JwtVerifier {
        JwtVerifier {
            keys,
            leeway: DEFAULT_LEEWAY,
            audiences: Vec::new(),
            issuers: Vec::new(),
            max_info: DEFAULT_MAX_INFO,
        }
    }

    /// Accepts only tokens whose `aud` names one of `audiences` (none: `aud` is
    /// not checked). RFC 7519 4.1.3: the token is for whoever it names.
    pub fn with_audiences(mut self, audiences: Vec<String>) -> JwtVerifier {
        self.audiences = audiences;
        self
    }

    /// Accepts only tokens whose `iss` is one of `issuers` (none: `iss` is not
    /// checked).
    pub fn with_issuers(mut self, issuers: Vec<String>) -> JwtVerifier {
        self.issuers = issuers;
        self
    }

    /// The audiences and issuers a token must match, for the start line; `None`
    /// when neither is checked.
    pub fn describe_claims(&self) -> Option<String> {
        if self.audiences.is_empty() && self.issuers.is_empty() {
            return None;
        }
        let list = |v: &[String]| match v {
            [] => "any".to_string(),
            v => v.join(","),
        };
        Some(format!(
            "aud={} iss={}",
            list(&self.audiences),
            list(&self.issuers)
        ))
    }

    /// Refuses tokens whose `info` claim is longer than `bytes` as compact JSON:
    /// the router keeps it for every user present, so its size is bounded here.
    pub fn with_max_info(mut self, bytes: usize) -> JwtVerifier {
        self.max_info = bytes;
        self
    }

    /// Replaces the clock-skew leeway (seconds) applied to `exp` and `nbf`.
    pub fn with_leeway(mut self, seconds: u64) -> JwtVerifier {
        self.leeway = seconds;
        self
    }

    pub fn keys(&self) -> &JwtKeys {
        &self.keys
    }

    /// Checks a token completely at Unix time `now` (seconds) and returns its claims.
    pub fn verify(&self, token: &str, now: u64) -> Result<Claims, AuthError> {
        if token.is_empty() {
            return Err(AuthError::Missing);
        }
        if token.len() > MAX_TOKEN_BYTES {
            return Err(AuthError::Malformed("token too long"));
        }
        let mut parts = token.split('.');
        let (Some(h64), Some(p64), Some(s64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(AuthError::Malformed("want header.payload.signature"));
        };
        let header = parse_header(h64)?;
        let entry = self
            .keys
            .select(header.kid.as_deref())
            .ok_or(AuthError::UnknownKey)?;
        // The key decides the algorithm; the header may only agree with it. This is
        // what refuses `none` and an HS256 token aimed at an RSA/EC public key.
        if header.alg != alg_name(entry.alg) {
            return Err(AuthError::Algorithm);
        }
        let message = &token.as_bytes()[..h64.len() + 1 + p64.len()];
        match jsonwebtoken::crypto::verify(s64, message, &entry.key, entry.alg) {
            Ok(true) => {}
            Ok(false) | Err(_) => return Err(AuthError::Signature),
        }
        let payload = URL_SAFE_NO_PAD
            .decode(p64)
            .map_err(|_| AuthError::Malformed("payload is not base64url"))?;
        let claims = parse_claims(&payload)?;
        let now = now as f64;
        let leeway = self.leeway as f64;
        // RFC 7519 4.1.4: valid only before `exp`.
        if claims.exp.is_some_and(|exp| now >= exp + leeway) {
            return Err(AuthError::Expired);
        }
        if claims.nbf.is_some_and(|nbf| now + leeway < nbf) {
            return Err(AuthError::NotYetValid);
        }
        // A token the same key signed for another service or by another issuer is
        // not ours: with the flags set, a missing claim is refused like a wrong one.
        if !self.issuers.is_empty()
            && !claims
                .iss
                .as_ref()
                .is_some_and(|i| self.issuers.contains(i))
        {
            return Err(AuthError::Issuer);
        }
        if !self.audiences.is_empty() && !claims.aud.iter().any(|a| self.audiences.contains(a)) {
            return Err(AuthError::Audience);
        }
        if claims
            .info
            .as_ref()
            .is_some_and(|i| i.len() > self.max_info)
        {
            return Err(AuthError::InfoTooLarge(self.max_info));
        }
        Ok(claims)
    }

    /// A subscription to `user`'s stream: the token must be present, valid at `now`,
    /// and name `user` as its `sub` (else 403).
    pub fn authorize_subscribe(
        &self,
        token: Option<&str>,
        user: u64,
        now: u64,
    ) -> Result<Grant, AuthError> {
        let claims = self.verify(token.ok_or(AuthError::Missing)?, now)?;
        let sub = claims.sub.ok_or(AuthError::NoSubject)?;
        if sub != user {
            return Err(AuthError::WrongUser {
                token: sub,
                path: user,
            });
        }
        Ok(self.grant(claims))
    }

    /// A connection to channels only (no id in its path): the token must be
    /// present and valid at `now`; its `sub`, if any, is not checked against a path.
    pub fn authorize_channels(&self, token: Option<&str>, now: u64) -> Result<Grant, AuthError> {
        let claims = self.verify(token.ok_or(AuthError::Missing)?, now)?;
        Ok(self.grant(claims))
    }

    fn grant(&self, claims: Claims) -> Grant {
        Grant {
            user: claims.sub.unwrap_or(0),
            publish: claims.publish,
            publish_channels: claims.publish_channels,
            channels: claims.channels,
            // `verify` refuses at `now >= exp + leeway`; for whole seconds that is
            // `now >= ceil(exp + leeway)`. Saturating float → int: a negative or huge
            // exp stays ordered.
            valid_until: claims
                .exp
                .map(|e| (e + self.leeway as f64).ceil().max(0.0) as u64),
            info: claims.info,
            no_presence: claims.no_presence,
        }
    }
}

impl Grant {
    /// A client publish over WebSocket to `subject` (C7).
    pub fn authorize_publish(&self, subject: u64) -> Result<(), AuthError> {
        if self.publish.allows(subject) {
            Ok(())
        } else {
            Err(AuthError::PublishDenied(subject))
        }
    }
}

/// Decodes and parses a JOSE header (base64url of a JSON object); never panics.
fn parse_header(h64: &str) -> Result<Header, AuthError> {
    let json = URL_SAFE_NO_PAD
        .decode(h64)
        .map_err(|_| AuthError::Malformed("header is not base64url"))?;
    let header: Header =
        serde_json::from_slice(&json).map_err(|_| AuthError::Malformed("header is not valid"))?;
    if header.crit.is_some() {
        return Err(AuthError::Malformed("unsupported crit header"));
    }
    Ok(header)
}

/// Parses a token's header and payload without checking anything cryptographic:
/// `(alg, kid, claims)`. For the fuzz targets and diagnostics only — never to
/// decide access.
pub fn inspect_unverified(token: &str) -> Result<(String, Option<String>, Claims), AuthError> {
    let mut parts = token.split('.');
    let (Some(h64), Some(p64)) = (parts.next(), parts.next()) else {
        return Err(AuthError::Malformed("want header.payload.signature"));
    };
    let header = parse_header(h64)?;
    let payload = URL_SAFE_NO_PAD
        .decode(p64)
        .map_err(|_| AuthError::Malformed("payload is not base64url"))?;
    Ok((header.alg, header.kid, parse_claims(&payload)?))
}
