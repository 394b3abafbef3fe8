//! The query parameters of subscription paths: `since` (resume position, see
//! [`Since`]), `token` (a JWT for clients that cannot set headers, such as a
//! browser's `EventSource` and `WebSocket`), `channel`, `framed` and `session` (an
//! HTTP/2 stream's name, [`check_session`]); of a publish: `token` (a client's
//! own JWT), and of a batch `parallel`; of
//! `POST /subscribe` and `/unsubscribe`: [`parse_control_query`]. Other parameters
//! are ignored (cache busters); a repeated `since`, `token`, `session` or
//! `parallel` is refused, since two readers could disagree about which one counts.

use crate::channel;
use crate::since::{parse_positions, Since};

/// Why a query was refused; the route answers it as `QueryError::BadSince` or
/// `QueryError::Bad`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueryError {
    /// `since` is repeated or not a position.
    BadSince,
    /// Another parameter is malformed or repeated.
    Bad(&'static str),
}

/// `since`, `token`, `channel` and `framed` of a subscription path's query.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SubscriptionQuery {
    /// A composite position: one per stream (see [`parse_positions`]).
    pub since: Option<Vec<Option<Since>>>,
    pub token: Option<String>,
    /// `channel=` in the order given, percent-decoded, each a valid name, no
    /// name twice.
    pub channels: Vec<String>,
    /// `framed=1`: a WebSocket speaks the framed protocol (JSON envelopes and
    /// control frames) even without a `channel=`.
    pub framed: bool,
    /// `session=<name>`: the name `POST /subscribe` and `/unsubscribe` reach this
    /// stream by on its HTTP/2 connection.
    pub session: Option<String>,
    /// `presence=1`: join/leave pushes of every channel named (docs/protocol.md
    /// "Presence events").
    pub presence: bool,
    /// `friends=1`: `online`/`offline` pushes of the users the path's user
    /// follows (docs/protocol.md "Friends online").
    pub friends: bool,
}

/// Longest `session` name, in bytes.
pub const MAX_SESSION: usize = 64;

/// Why `name` is not a session name (1 to [`MAX_SESSION`] bytes of
/// `A-Z a-z 0-9 _ -`: nothing to escape in a URL); `Ok` when it is one.
pub fn check_session(name: &str) -> Result<(), &'static str> {
    let ok = (1..=MAX_SESSION).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match ok {
        true => Ok(()),
        false => Err("session is 1 to 64 bytes of A-Z a-z 0-9 _ -"),
    }
}

/// `POST /subscribe` and `/unsubscribe`'s query: which stream of the connection
/// (`session`), which channel, and for a subscribe where to resume. The channel is
/// only percent-decoded and `since` kept as sent: the stream checks both as a
/// framed WebSocket's control frame does, so the refusals are the same JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ControlQuery {
    pub session: String,
    pub channel: String,
    pub since: Option<String>,
    /// `presence=1` (a subscribe): also the channel's join/leave pushes.
    pub presence: bool,
}

pub(crate) fn parse_control_query(
    query: Option<&str>,
    subscribe: bool,
) -> Result<ControlQuery, QueryError> {
    let (mut session, mut channel, mut since, mut presence) = (None, None, None, None);
    for (k, v) in pairs(query) {
        match k {
            "session" => set_session(&mut session, v)?,
            "channel" if channel.is_some() => {
                return Err(QueryError::Bad("names one channel="));
            }
            "channel" => {
                channel = Some(percent_decode(v).ok_or(QueryError::Bad(
                    "channel is not valid percent-encoded UTF-8",
                ))?)
            }
            "since" if !subscribe => {
                return Err(QueryError::Bad("an unsubscribe takes no since"));
            }
            "since" if since.is_some() => return Err(QueryError::BadSince),
            "since" => since = Some(v.to_owned()),
            "presence" if !subscribe => {
                return Err(QueryError::Bad("an unsubscribe takes no presence"));
            }
            "presence" if presence.is_some() => {
                return Err(QueryError::Bad("presence given twice"));
            }
            "presence" => {
                presence = Some(match v {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    _ => return Err(QueryError::Bad("presence is 1, true, 0 or false")),
                })
            }
            _ => {}
        }
    }
    Ok(ControlQuery {
        presence: presence.unwrap_or(false),
        session: session.ok_or(QueryError::Bad("names the stream's session="))?,
        channel: channel.ok_or(QueryError::Bad("names one channel="))?,
        since,
    })
}

/// A `session=` value, once.
fn set_session(session: &mut Option<String>, v: &str) -> Result<(), QueryError> {
    if session.is_some() {
        return Err(QueryError::Bad("session given twice"));
    }
    check_session(v).map_err(QueryError::Bad)?;
    *session = Some(v.to_owned());
    Ok(())
}

pub(crate) fn parse_query(query: Option<&str>) -> Result<SubscriptionQuery, QueryError> {
    let mut q = SubscriptionQuery::default();
    for (k, v) in pairs(query) {
        match k {
            "since" => {
                if q.since.is_some() {
                    return Err(QueryError::BadSince);
                }
                if v.is_empty() {
                    return Err(QueryError::BadSince);
                }
                q.since = Some(parse_positions(v.as_bytes()).ok_or(QueryError::BadSince)?);
            }
            "token" => {
                if q.token.is_some() {
                    return Err(QueryError::Bad("token given twice"));
                }
                q.token = Some(
                    percent_decode(v)
                        .ok_or(QueryError::Bad("token is not valid percent-encoded UTF-8"))?,
                );
            }
            "channel" => {
                let name = percent_decode(v).ok_or(QueryError::Bad(
                    "channel is not valid percent-encoded UTF-8",
                ))?;
                channel::check_name(&name).map_err(QueryError::Bad)?;
                if q.channels.len() == channel::MAX_PER_REQUEST {
                    return Err(QueryError::Bad("more than 255 channels in one request"));
                }
                if q.channels.contains(&name) {
                    return Err(QueryError::Bad("a channel is named twice"));
                }
                q.channels.push(name);
            }
            "framed" => {
                q.framed = match v {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    _ => return Err(QueryError::Bad("framed is 1, true, 0 or false")),
                }
            }
            "session" => set_session(&mut q.session, v)?,
            "presence" => {
                q.presence = match v {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    _ => return Err(QueryError::Bad("presence is 1, true, 0 or false")),
                }
            }
            "friends" => {
                q.friends = match v {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    _ => return Err(QueryError::Bad("friends is 1, true, 0 or false")),
                }
            }
            _ => {}
        }
    }
    Ok(q)
}

/// `token` of a publish's query (`POST /pub/<id>`, `/pub/<channel>`, `/pub`): a
/// client's own JWT, for pages that cannot set `Authorization` (`sendBeacon`, a
/// form), read as a subscription's `token` is.
pub(crate) fn parse_publish_token(query: Option<&str>) -> Result<Option<String>, QueryError> {
    let mut token = None;
    for (_, v) in pairs(query).filter(|(k, _)| *k == "token") {
        if token.is_some() {
            return Err(QueryError::Bad("token given twice"));
        }
        token = Some(
            percent_decode(v).ok_or(QueryError::Bad("token is not valid percent-encoded UTF-8"))?,
        );
    }
    Ok(token)
}

/// `parallel` of `POST /pub`'s query: `1` or `true` (the batch's items are
/// independent), `0` or `false` or absent (keep their order).
pub(crate) fn parse_parallel(query: Option<&str>) -> Result<bool, QueryError> {
    let mut parallel = None;
    for (_, v) in pairs(query).filter(|(k, _)| *k == "parallel") {
        if parallel.is_some() {
            return Err(QueryError::Bad("parallel given twice"));
        }
        parallel = Some(match v {
            "1" | "true" => true,
            "0" | "false" => false,
            _ => return Err(QueryError::Bad("parallel is 1, true, 0 or false")),
        });
    }
    Ok(parallel.unwrap_or(false))
}

/// Most messages one history read answers.
pub const MAX_HISTORY_LIMIT: u32 = 1000;

/// `since` and `limit` of `GET /history/<channel>`: a plain position (none: the
/// newest), and at most [`MAX_HISTORY_LIMIT`] messages (the default is 100).
pub(crate) fn parse_history_query(query: Option<&str>) -> Result<(Option<Since>, u32), QueryError> {
    let (mut since, mut limit) = (None, None);
    for (k, v) in pairs(query) {
        match k {
            "since" if since.is_none() => {
                since = Some(Since::parse(v.as_bytes()).ok_or(QueryError::BadSince)?)
            }
            "limit" if limit.is_none() => {
                limit = Some(
                    v.parse::<u32>()
                        .ok()
                        .filter(|n| (1..=MAX_HISTORY_LIMIT).contains(n))
                        .ok_or(QueryError::Bad("limit is a number from 1 to 1000"))?,
                )
            }
            "since" | "limit" => return Err(QueryError::Bad("since or limit given twice")),
            _ => {}
        }
    }
    Ok((since, limit.unwrap_or(100)))
}

/// A query's `key=value` pairs (a bare `key` has the value "").
fn pairs(query: Option<&str>) -> impl Iterator<Item = (&str, &str)> {
    query
        .unwrap_or_default()
        .split('&')
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
}

/// RFC 3986 percent-decoding (`+` is kept: it is a base64 character, not a space).
pub(crate) fn percent_decode(v: &str) -> Option<String> {
    if !v.contains('%') {
        return Some(v.to_owned());
    }
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let hi = (hex[0] as char).to_digit(16)?;
            let lo = (hex[1] as char).to_digit(16)?;
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_are_named_in_order_decoded_and_checked() {
        let q = parse_query(Some("channel=room%3A1&channel=news&framed=1")).unwrap();
        assert_eq!(q.channels, ["room:1", "news"]);
        assert!(q.framed);
        for bad in [
            "channel=a&channel=a",
            "channel=",
            "channel=42",
            "channel=a%20b",
            "framed=2",
        ] {
            assert!(
                matches!(parse_query(Some(bad)), Err(QueryError::Bad(_))),
                "{bad}"
            );
        }
        let many: Vec<String> = (0..256).map(|i| format!("channel=c{i}")).collect();
        assert!(parse_query(Some(&many.join("&"))).is_err());
    }

    #[test]
    fn a_session_is_a_short_plain_name_given_once() {
        let q = parse_query(Some("channel=a&session=tab-1_B")).unwrap();
        assert_eq!(q.session.as_deref(), Some("tab-1_B"));
        assert_eq!(
            parse_query(Some(&format!("session={}", "s".repeat(64))))
                .unwrap()
                .session
                .map(|s| s.len()),
            Some(64)
        );
        for bad in [
            "session=",
            "session=a%2Db",
            "session=a.b",
            "session=a&session=b",
            &format!("session={}", "s".repeat(65)),
        ] {
            assert!(
                matches!(parse_query(Some(bad)), Err(QueryError::Bad(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_control_names_one_session_and_one_channel() {
        assert_eq!(
            parse_control_query(Some("session=s&channel=room%3A1&since=3-4"), true),
            Ok(ControlQuery {
                session: "s".into(),
                channel: "room:1".into(),
                since: Some("3-4".into()),
                presence: false,
            })
        );
        // The channel and since are checked by the stream (JSON answers), not here.
        assert_eq!(
            parse_control_query(Some("channel=gap&since=x&session=s"), true)
                .map(|q| (q.channel, q.since)),
            Ok(("gap".into(), Some("x".into())))
        );
        for (bad, subscribe, want) in [
            (
                "channel=a",
                true,
                QueryError::Bad("names the stream's session="),
            ),
            ("session=s", true, QueryError::Bad("names one channel=")),
            (
                "session=s&channel=a&channel=b",
                true,
                QueryError::Bad("names one channel="),
            ),
            (
                "session=s&channel=a&since=1&since=2",
                true,
                QueryError::BadSince,
            ),
            (
                "session=s&channel=a&since=1",
                false,
                QueryError::Bad("an unsubscribe takes no since"),
            ),
            (
                "session=s&session=s&channel=a",
                false,
                QueryError::Bad("session given twice"),
            ),
            (
                "session=a+b&channel=a",
                false,
                QueryError::Bad("session is 1 to 64 bytes of A-Z a-z 0-9 _ -"),
            ),
            (
                "session=s&channel=%ff",
                false,
                QueryError::Bad("channel is not valid percent-encoded UTF-8"),
            ),
        ] {
            assert_eq!(
                parse_control_query(Some(bad), subscribe),
                Err(want),
                "{bad}"
            );
        }
    }

    #[test]
    fn since_and_token() {
        let q = parse_query(Some("x=1&since=5-9&token=a.b.c&cb")).unwrap();
        assert_eq!(
            q.since,
            Some(vec![Some(Since {
                epoch: Some(5),
                seq: 9
            })])
        );
        assert_eq!(q.token.as_deref(), Some("a.b.c"));
        assert_eq!(parse_query(None).unwrap(), SubscriptionQuery::default());
        assert_eq!(
            parse_query(Some("token=a%2Eb%2ec+d"))
                .unwrap()
                .token
                .as_deref(),
            Some("a.b.c+d")
        );
        assert_eq!(
            parse_query(Some("token=")).unwrap().token.as_deref(),
            Some("")
        );
        for (bad, want) in [
            ("since=1&since=2", QueryError::BadSince),
            ("since=01", QueryError::BadSince),
            ("since=", QueryError::BadSince),
            ("token=a&token=b", QueryError::Bad("token given twice")),
        ] {
            assert_eq!(parse_query(Some(bad)), Err(want), "{bad}");
        }
        for bad in ["token=%", "token=%4", "token=%zz", "token=%ff"] {
            assert!(
                matches!(parse_query(Some(bad)), Err(QueryError::Bad(_))),
                "{bad}"
            );
        }
    }
}
