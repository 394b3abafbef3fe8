//! The claims myriad reads from a token's payload, parsed into a typed struct (no
//! `serde_json::Value`): `sub` (the user id), `exp`, `nbf`, `iss`, `aud` (a string or
//! an array of strings, RFC 7519 4.1.3), `pub` (the subjects a client may publish
//! to, SPEC C7), `chan`, `info` (a JSON object shown beside the user in presence
//! lists, kept as its compact text) and `nopresence` (channels where the client
//! gets no join/leave pushes). Unknown claims are ignored; a claim that is
//! present twice, or present with the wrong type, refuses the token.
//!
//! Not here: signatures and time checks (`jwt`).

use serde::Deserialize;

use crate::AuthError;

/// Most items a `pub` claim may list (a token rides in a request head of at most a
/// few KiB; this bounds the grant kept per connection).
pub const MAX_PUB_ENTRIES: usize = 64;

/// What a verified (or, for [`parse_claims`], not yet verified) payload says.
#[derive(Clone, Debug, PartialEq)]
pub struct Claims {
    /// `sub` as a user id; `None` when absent or not a canonical u64.
    pub sub: Option<u64>,
    /// `exp` in Unix seconds (RFC 7519 NumericDate: may be fractional).
    pub exp: Option<f64>,
    /// `nbf` in Unix seconds.
    pub nbf: Option<f64>,
    /// `iss`: who issued the token.
    pub iss: Option<String>,
    /// `aud`: whom the token is for; a single string is a list of one, absent is empty.
    pub aud: Vec<String>,
    /// Parsed `pub` claim: its subject ids and ranges.
    pub publish: PublishGrant,
    /// The channels the `pub` claim names (names and `prefix*` patterns).
    pub publish_channels: ChannelGrant,
    /// Parsed `chan` claim: the channels the client may subscribe to.
    pub channels: ChannelGrant,
    /// The `info` claim (a JSON object) as compact JSON text; its size is the
    /// gateway's to bound (`--max-presence-info`).
    pub info: Option<Box<str>>,
    /// Parsed `nopresence` claim: channels on which the client's `presence=1` is
    /// not honoured (no join/leave pushes for it there); absent, none.
    pub no_presence: ChannelGrant,
}

/// Channels a token allows (the `chan` claim, and the channel items of `pub`):
/// exact names and prefix patterns ending in `*` (`"room:*"`); `"*"` is every
/// channel. No claim allows none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ChannelGrant {
    #[default]
    Nothing,
    Any,
    /// Exact names, and prefixes (stored without their `*`).
    Some {
        names: Box<[Box<str>]>,
        prefixes: Box<[Box<str>]>,
    },
}

impl ChannelGrant {
    /// Whether channel `name` is allowed. O(entries) (at most [`MAX_PUB_ENTRIES`]).
    pub fn allows(&self, name: &str) -> bool {
        match self {
            ChannelGrant::Nothing => false,
            ChannelGrant::Any => true,
            ChannelGrant::Some { names, prefixes } => {
                names.iter().any(|n| &**n == name)
                    || prefixes.iter().any(|p| name.starts_with(&**p))
            }
        }
    }

    fn from_patterns(patterns: Vec<String>) -> Result<ChannelGrant, AuthError> {
        if patterns.len() > MAX_PUB_ENTRIES {
            return Err(AuthError::Malformed(
                "a channel claim lists too many channels",
            ));
        }
        let (mut names, mut prefixes) = (Vec::new(), Vec::new());
        for p in patterns {
            if p == "*" {
                return Ok(ChannelGrant::Any);
            }
            match p.strip_suffix('*') {
                Some(prefix) => prefixes.push(prefix.into()),
                None => names.push(p.into_boxed_str()),
            }
        }
        if names.is_empty() && prefixes.is_empty() {
            return Ok(ChannelGrant::Nothing);
        }
        Ok(ChannelGrant::Some {
            names: names.into(),
            prefixes: prefixes.into(),
        })
    }
}

/// The subjects a client may publish to over WebSocket (the `pub` claim).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PublishGrant {
    /// No `pub` claim, or an empty one.
    #[default]
    Nothing,
    /// `"*"`: any subject.
    Any,
    /// Sorted, disjoint, non-adjacent inclusive ranges (a single id is `(id, id)`).
    Ranges(Box<[(u64, u64)]>),
}

impl PublishGrant {
    /// Whether publishing to `subject` is allowed. O(log entries).
    pub fn allows(&self, subject: u64) -> bool {
        match self {
            PublishGrant::Nothing => false,
            PublishGrant::Any => true,
            PublishGrant::Ranges(r) => {
                // The last range starting at or before `subject` is the only candidate.
                let i = r.partition_point(|&(lo, _)| lo <= subject);
                i > 0 && subject <= r[i - 1].1
            }
        }
    }

    /// The `pub` claim's items: ids and `"A-B"` ranges of subjects, `"*"` (every
    /// subject and channel), and anything else a channel name or `prefix*`.
    fn from_entries(entries: Vec<IdOrText>) -> Result<(PublishGrant, ChannelGrant), AuthError> {
        if entries.len() > MAX_PUB_ENTRIES {
            return Err(AuthError::Malformed("pub claim lists too many subjects"));
        }
        let mut ranges = Vec::with_capacity(entries.len());
        let mut channels = Vec::new();
        for e in entries {
            match e {
                IdOrText::Id(id) => ranges.push((id, id)),
                IdOrText::Text(t) if t == "*" => {
                    return Ok((PublishGrant::Any, ChannelGrant::Any));
                }
                IdOrText::Text(t) if t.starts_with(|c: char| c.is_ascii_digit()) => {
                    ranges.push(parse_range(&t).ok_or(AuthError::Malformed(
                        "pub claim item must be an id, \"A-B\", a channel or \"*\"",
                    ))?)
                }
                IdOrText::Text(t) => channels.push(t),
            }
        }
        let channels = ChannelGrant::from_patterns(channels)?;
        if ranges.is_empty() {
            return Ok((PublishGrant::Nothing, channels));
        }
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        Ok((PublishGrant::Ranges(merged.into_boxed_slice()), channels))
    }
}

/// `"7"` or `"10-20"` (inclusive, lo ≤ hi), canonical decimals.
fn parse_range(t: &str) -> Option<(u64, u64)> {
    match t.split_once('-') {
        None => canonical_u64(t).map(|id| (id, id)),
        Some((a, b)) => {
            let (lo, hi) = (canonical_u64(a)?, canonical_u64(b)?);
            (lo <= hi).then_some((lo, hi))
        }
    }
}

/// Digits only, no sign, no leading zero unless `0`, fits u64 (the same rule as ids
/// in paths, so `"007"` cannot name user 7 in one place and be refused in another).
fn canonical_u64(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || (b.len() > 1 && b[0] == b'0') || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.parse().ok()
}

/// A JSON value that is an unsigned integer or a string.
#[derive(Deserialize)]
#[serde(untagged)]
enum IdOrText {
    Id(u64),
    Text(String),
}

/// RFC 7519 4.1.3: `aud` is one string or an array of them.
#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

/// RFC 7519 NumericDate: any JSON number.
#[derive(Deserialize)]
#[serde(untagged)]
enum NumericDate {
    Int(u64),
    Float(f64),
}

impl NumericDate {
    fn seconds(self) -> f64 {
        match self {
            NumericDate::Int(n) => n as f64,
            NumericDate::Float(f) => f,
        }
    }
}

#[derive(Deserialize)]
struct RawClaims {
    sub: Option<IdOrText>,
    exp: Option<NumericDate>,
    nbf: Option<NumericDate>,
    iss: Option<String>,
    aud: Option<Audience>,
    #[serde(rename = "pub")]
    publish: Option<Vec<IdOrText>>,
    chan: Option<Vec<String>>,
    info: Option<serde_json::Map<String, serde_json::Value>>,
    nopresence: Option<Vec<String>>,
}

/// Parses a decoded payload (JSON bytes). Used by the verifier after the signature
/// check, and directly by the fuzz targets: it never panics on any input.
pub fn parse_claims(json: &[u8]) -> Result<Claims, AuthError> {
    let raw: RawClaims =
        serde_json::from_slice(json).map_err(|_| AuthError::Malformed("claims are not valid"))?;
    let publish = match raw.publish {
        None => (PublishGrant::Nothing, ChannelGrant::Nothing),
        Some(entries) => PublishGrant::from_entries(entries)?,
    };
    let sub = match raw.sub {
        None => None,
        Some(IdOrText::Id(id)) => Some(id),
        Some(IdOrText::Text(t)) => canonical_u64(&t),
    };
    Ok(Claims {
        sub,
        exp: raw.exp.map(NumericDate::seconds),
        nbf: raw.nbf.map(NumericDate::seconds),
        iss: raw.iss,
        aud: match raw.aud {
            None => Vec::new(),
            Some(Audience::One(a)) => vec![a],
            Some(Audience::Many(list)) => list,
        },
        publish: publish.0,
        publish_channels: publish.1,
        channels: match raw.chan {
            None => ChannelGrant::Nothing,
            Some(list) => ChannelGrant::from_patterns(list)?,
        },
        info: raw
            .info
            .map(|info| serde_json::Value::Object(info).to_string().into_boxed_str()),
        no_presence: match raw.nopresence {
            None => ChannelGrant::Nothing,
            Some(list) => ChannelGrant::from_patterns(list)?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_claims_name_channels_and_prefixes() {
        let c = parse_claims(br#"{"chan":["news","room:*"],"pub":[7,"room:1","chat:*"]}"#).unwrap();
        assert!(c.channels.allows("news") && c.channels.allows("room:42"));
        assert!(!c.channels.allows("newsx") && !c.channels.allows("roo"));
        assert!(c.publish.allows(7) && !c.publish.allows(8));
        assert!(c.publish_channels.allows("room:1") && c.publish_channels.allows("chat:x"));
        assert!(!c.publish_channels.allows("room:2"));
        let all = parse_claims(br#"{"pub":["*"],"chan":["*"]}"#).unwrap();
        assert!(all.publish_channels.allows("x") && all.channels.allows("y"));
        let none = parse_claims(br#"{"sub":1}"#).unwrap();
        assert_eq!(none.info, None);
        assert_eq!(none.no_presence, ChannelGrant::Nothing);
        let quiet = parse_claims(br#"{"nopresence":["big:*","hall"]}"#).unwrap();
        assert!(quiet.no_presence.allows("big:1") && quiet.no_presence.allows("hall"));
        assert!(!quiet.no_presence.allows("room:1"));
        assert!(parse_claims(br#"{"nopresence":"big:*"}"#).is_err());
        let info = parse_claims(br#"{"info": {"name": "Ada", "n": [1, 2]}}"#).unwrap();
        assert_eq!(info.info.as_deref(), Some(r#"{"n":[1,2],"name":"Ada"}"#));
        assert!(parse_claims(br#"{"info":"Ada"}"#).is_err());
        // A long decimal reads as its nearest double, so the kept text reads back
        // as itself (serde_json's `float_roundtrip`; found by the jwt fuzz target).
        for fives in 100..130 {
            let long = format!(r#"{{"info":{{"na":1{}.5e3}}}}"#, "5".repeat(fives));
            let kept = parse_claims(long.as_bytes()).unwrap().info.unwrap();
            let again = format!(r#"{{"info":{kept}}}"#);
            assert_eq!(parse_claims(again.as_bytes()).unwrap().info.unwrap(), kept);
        }
        assert!(!none.channels.allows("x") && !none.publish_channels.allows("x"));
        assert!(parse_claims(br#"{"pub":["1-x"]}"#).is_err());
    }

    #[test]
    fn sub_as_number_or_string() {
        assert_eq!(parse_claims(br#"{"sub":42}"#).unwrap().sub, Some(42));
        assert_eq!(parse_claims(br#"{"sub":"42"}"#).unwrap().sub, Some(42));
        let max = format!(r#"{{"sub":"{}"}}"#, u64::MAX);
        assert_eq!(parse_claims(max.as_bytes()).unwrap().sub, Some(u64::MAX));
        for bad in [
            r#"{"sub":"042"}"#,
            r#"{"sub":"-1"}"#,
            r#"{"sub":"x"}"#,
            r#"{"sub":""}"#,
            r#"{"sub":"18446744073709551616"}"#,
        ] {
            assert_eq!(parse_claims(bad.as_bytes()).unwrap().sub, None, "{bad}");
        }
        assert_eq!(parse_claims(b"{}").unwrap().sub, None);
        // Wrong JSON types refuse the whole payload.
        for bad in [r#"{"sub":-1}"#, r#"{"sub":1.5}"#, r#"{"sub":[1]}"#] {
            assert!(parse_claims(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn dates() {
        let c = parse_claims(br#"{"exp":1700000000,"nbf":1.5e9}"#).unwrap();
        assert_eq!((c.exp, c.nbf), (Some(1.7e9), Some(1.5e9)));
        assert!(parse_claims(br#"{"exp":"1700000000"}"#).is_err());
        assert_eq!(parse_claims(br#"{"exp":-5}"#).unwrap().exp, Some(-5.0));
    }

    #[test]
    fn issuer_and_audience_as_string_or_array() {
        let c = parse_claims(br#"{"iss":"https://id.example","aud":"push"}"#).unwrap();
        assert_eq!(
            (c.iss.as_deref(), c.aud),
            (Some("https://id.example"), vec!["push".into()])
        );
        let c = parse_claims(br#"{"aud":["a","push"]}"#).unwrap();
        assert_eq!((c.iss, c.aud), (None, vec!["a".to_string(), "push".into()]));
        assert!(parse_claims(b"{}").unwrap().aud.is_empty());
        assert!(parse_claims(br#"{"aud":[]}"#).unwrap().aud.is_empty());
        // Wrong types refuse the token rather than read as "no audience".
        for bad in [
            r#"{"aud":7}"#,
            r#"{"aud":["a",7]}"#,
            r#"{"iss":["a"]}"#,
            r#"{"iss":1}"#,
        ] {
            assert!(parse_claims(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn malformed_payloads() {
        for bad in [
            &b""[..],
            b"null",
            b"[]",
            b"{",
            br#"{"sub":1,"sub":2}"#,
            b"\xff",
        ] {
            assert!(
                matches!(parse_claims(bad), Err(AuthError::Malformed(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn publish_grants() {
        let g = |s: &str| parse_claims(s.as_bytes()).map(|c| c.publish);
        assert_eq!(g("{}").unwrap(), PublishGrant::Nothing);
        assert_eq!(g(r#"{"pub":[]}"#).unwrap(), PublishGrant::Nothing);
        assert_eq!(g(r#"{"pub":[1,"*"]}"#).unwrap(), PublishGrant::Any);
        let r = g(r#"{"pub":[42,"7","100-199","200-300","5-6","0"]}"#).unwrap();
        assert_eq!(
            r,
            PublishGrant::Ranges(vec![(0, 0), (5, 7), (42, 42), (100, 300)].into())
        );
        for (s, want) in [
            (0, true),
            (1, false),
            (4, false),
            (5, true),
            (7, true),
            (8, false),
            (42, true),
            (99, false),
            (100, true),
            (250, true),
            (300, true),
            (301, false),
            (u64::MAX, false),
        ] {
            assert_eq!(r.allows(s), want, "{s}");
        }
        assert!(PublishGrant::Any.allows(u64::MAX));
        assert!(!PublishGrant::Nothing.allows(0));
        let top = g(&format!(r#"{{"pub":["{}-{}"]}}"#, u64::MAX - 1, u64::MAX)).unwrap();
        assert!(top.allows(u64::MAX) && !top.allows(u64::MAX - 2));
        for bad in [
            r#"{"pub":["9-3"]}"#,
            r#"{"pub":["1-"]}"#,
            r#"{"pub":["01"]}"#,
            r#"{"pub":[-1]}"#,
            r#"{"pub":"*"}"#,
            r#"{"pub":[[1]]}"#,
        ] {
            assert!(g(bad).is_err(), "{bad}");
        }
        let many: Vec<String> = (0..=MAX_PUB_ENTRIES).map(|i| i.to_string()).collect();
        let too_many = format!(r#"{{"pub":[{}]}}"#, many.join(","));
        assert!(g(&too_many).is_err());
    }
}
