//! Pusher users and names on myriad's channels (docs/protocol.md "Pusher clients"):
//! a signed-in user's `user_data`, a member's id as the app gave it and as myriad
//! keeps it, the internal channel of a signed-in user, and the per-app namespace of
//! channel names. IO-free; the hash of a non-numeric id is `auth::pusher::user_key`
//! (it needs SHA-256, which this crate does not carry).
//!
//! A myriad user is a u64. A Pusher user id is a string (Laravel's are decimal
//! integers, many apps use UUIDs): a canonical decimal maps to itself, anything else
//! to a 63-bit hash with the top bit set, and the original string rides in the
//! member's presence info ([`member_info`]) so members lists, `member_added` and
//! `member_removed` show it back ([`read_member`]).

use serde::Deserialize;
use serde_json::Value;

/// Longest user id accepted (Pusher's own limit on a user id is 200 bytes).
pub const MAX_USER_ID: usize = 200;

/// What ends the internal channel of a signed-in user: every signed-in connection
/// of the user joins `<namespace><user key>~user` (`~`: no client can name it), so
/// a message to the user and a terminate reach them from any process.
pub const USER_SUFFIX: &str = "~user";

/// The channel name the `pusher` server SDKs' `sendToUser` publishes to.
pub const SERVER_TO_USER: &str = "#server-to-user-";

/// The payload of a user's internal channel that closes their connections
/// (`POST /apps/<id>/users/<user>/terminate_connections`). An envelope starts
/// with `{`, so no published event reads as it.
pub const TERMINATE: &[u8] = b"~terminate";

/// The key of the info object that carries a non-numeric user id ([`member_info`]).
const ID_KEY: &str = "#user_id";

/// A user id as an app sends it (`channel_data.user_id`, `user_data.id`): a
/// non-empty string of at most [`MAX_USER_ID`] bytes, or a JSON number (as its text).
pub fn user_id(v: &Value) -> Result<String, &'static str> {
    let id = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return Err("a user id must be a string or a number"),
    };
    if id.is_empty() || id.len() > MAX_USER_ID {
        return Err("a user id is 1 to 200 bytes");
    }
    Ok(id)
}

#[derive(Deserialize)]
struct UserData {
    id: Value,
}

/// A `pusher:signin`'s `user_data` (a JSON object with an `id`, as signed): the id.
pub fn parse_user_data(user_data: &str) -> Result<String, &'static str> {
    let d: UserData = serde_json::from_str(user_data).map_err(|_| "user_data is not {\"id\":…}")?;
    user_id(&d.id)
}

/// The myriad user of a canonical decimal id (`None`: the id must be hashed).
pub fn numeric(id: &str) -> Option<u64> {
    crate::since::canonical_u64(id)
}

/// The presence info myriad keeps for a member: `info` as it is when `id` is the
/// decimal of its myriad user, else `{"#user_id":id,"user_info":info}` so the id
/// shows back (also when `info` itself names `#user_id`: no member shows as
/// another id). `None`: nothing to keep.
pub fn member_info(id: &str, info: Option<String>) -> Option<String> {
    let parsed: Value = info
        .as_deref()
        .and_then(|i| serde_json::from_str(i).ok())
        .unwrap_or(Value::Null);
    let looks_kept = matches!(&parsed, Value::Object(o) if o.contains_key(ID_KEY));
    if numeric(id).is_some() && !looks_kept {
        return info;
    }
    let info = parsed;
    Some(serde_json::json!({ ID_KEY: id, "user_info": info }).to_string())
}

/// A member as a Pusher client is shown it: its id (the original string when its
/// info carries one, else the decimal of `user`) and its `user_info` (`Null`: none).
pub fn read_member(user: u64, info: Option<&str>) -> (String, Value) {
    let info: Value = info
        .and_then(|i| serde_json::from_str(i).ok())
        .unwrap_or(Value::Null);
    if let Value::Object(o) = &info {
        if let (Some(Value::String(id)), 2) = (o.get(ID_KEY), o.len()) {
            let user_info = o.get("user_info").cloned().unwrap_or(Value::Null);
            return (id.clone(), user_info);
        }
    }
    (user.to_string(), info)
}

/// The internal channel of the user whose key is `key`, in an app's namespace.
pub fn user_channel(namespace: &str, key: u64) -> String {
    format!("{namespace}{key}{USER_SUFFIX}")
}

/// True for a user's internal channel.
pub fn is_user_channel(name: &str) -> bool {
    name.ends_with(USER_SUFFIX)
}

/// What separates an app's namespace from a channel's name: `:` is a myriad
/// channel character but not a Pusher one, so no Pusher client names another
/// app's channel.
pub const NAMESPACE_END: char = ':';

/// The myriad channel of a Pusher channel `name` in an app's `namespace` (empty for
/// the first app, `<app id>:` for the others).
pub fn internal(namespace: &str, name: &str) -> String {
    format!("{namespace}{name}")
}

/// The Pusher channel a myriad channel is for a client: its name without the
/// app's namespace (a Pusher client only holds channels of its own app, whose
/// names have no `:` of their own).
pub fn shown(internal: &str) -> &str {
    internal
        .split_once(NAMESPACE_END)
        .map_or(internal, |(_, name)| name)
}

/// Why a channel name a Pusher client or API call sends is refused: myriad's
/// rules (`crate::channel::check_name`), and no `:` (Pusher's characters are
/// `A-Z a-z 0-9 _ - = @ , . ;`; myriad uses `:` for the app's namespace).
pub fn check_name(name: &str) -> Result<(), &'static str> {
    crate::channel::check_name(name)?;
    if name.contains(NAMESPACE_END) {
        return Err("a Pusher channel name has no ':'");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_ids_keep_their_info_and_others_carry_the_id() {
        assert_eq!(
            member_info("42", Some("{\"n\":1}".into())),
            Some("{\"n\":1}".into())
        );
        assert_eq!(member_info("42", None), None);
        let kept = member_info("bob", Some("{\"n\":1}".into())).unwrap();
        assert_eq!(
            read_member(9, Some(&kept)),
            ("bob".into(), serde_json::json!({"n": 1}))
        );
        let kept = member_info("07", None).unwrap();
        assert_eq!(read_member(9, Some(&kept)), ("07".into(), Value::Null));
        assert_eq!(
            read_member(42, Some("{\"n\":1}")),
            ("42".into(), serde_json::json!({"n": 1}))
        );
        assert_eq!(read_member(42, None), ("42".into(), Value::Null));
        // A numeric member whose own info looks like the wrapper still shows as itself.
        let forged = r##"{"#user_id":"admin","user_info":null}"##;
        let kept = member_info("5", Some(forged.into()));
        assert_eq!(read_member(5, kept.as_deref()).0, "5");
    }

    #[test]
    fn user_data_and_ids() {
        assert_eq!(
            parse_user_data(r#"{"id":"u-1","user_info":{}}"#),
            Ok("u-1".into())
        );
        assert_eq!(parse_user_data(r#"{"id":5}"#), Ok("5".into()));
        assert!(parse_user_data(r#"{"id":""}"#).is_err());
        assert!(parse_user_data(r#"{"name":"x"}"#).is_err());
        assert!(parse_user_data("x").is_err());
        assert!(user_id(&Value::String("x".repeat(201))).is_err());
    }

    #[test]
    fn namespaces() {
        assert_eq!(internal("app2:", "news"), "app2:news");
        assert_eq!(shown("app2:news"), "news");
        assert_eq!(shown("news"), "news");
        assert_eq!(shown("app2:presence-a~presence"), "presence-a~presence");
        assert!(check_name("a:b").is_err());
        assert!(check_name("private-a").is_ok());
        assert_eq!(user_channel("", 7), "7~user");
        assert!(is_user_channel("app2:7~user"));
    }
}
