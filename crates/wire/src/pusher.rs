//! The Pusher Channels protocol v7's JSON frames (SPEC J1, docs/protocol.md
//! "Pusher clients"): what a client sends on `/app/<key>` ([`parse_client_frame`]),
//! what the server writes ([`write_event`]), and how a message published to a
//! channel names its Pusher event ([`Published`]). Bytes in, bytes out; the
//! connection core (`connection::pusher`) decides what to do with them.
//!
//! A Pusher event's `data` travels as a string (pusher-js parses it as JSON when it
//! can), so every `data` written here is a JSON string, whatever the client sent.

use serde::Deserialize;
use serde_json::Value;

/// The protocol version myriad speaks; a client asking for less is refused (4007).
pub const PROTOCOL: u32 = 7;

/// The event name a message gets when its payload does not name one (a myriad
/// `POST /pub/<channel>` of plain bytes).
pub const DEFAULT_EVENT: &str = "message";

/// Longest event name accepted from a client (Pusher's own limit is 200).
pub const MAX_EVENT_NAME: usize = 200;

/// Pusher's error codes used by myriad (pusher.com protocol, "Error codes"):
/// 4000–4099 the client must not reconnect as it is, 4100–4199 reconnect after a
/// back-off, 4200–4299 reconnect at once; 4300+ is sent as an error without a close.
pub mod code {
    /// The application key is not one the server knows.
    pub const APP_UNKNOWN: u16 = 4001;
    /// The client asked for a protocol below 7.
    pub const PROTOCOL_UNSUPPORTED: u16 = 4007;
    /// The client sent too much (client-event rate); back off.
    pub const OVER_CAPACITY: u16 = 4100;
    /// The server is going away (drain): reconnect now, elsewhere.
    pub const RECONNECT: u16 = 4200;
    /// A subscription or a client event was refused (auth, name, not subscribed).
    pub const REFUSED: u16 = 4009;
    /// A frame the server could not read as a Pusher event.
    pub const BAD_FRAME: u16 = 4300;
    /// A client event over the per-connection rate.
    pub const RATE_LIMITED: u16 = 4301;
}

/// One frame a client sent, read.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientFrame {
    Ping,
    Pong,
    Subscribe {
        channel: String,
        auth: Option<String>,
        /// A presence channel's member data, as the signature covers it.
        channel_data: Option<String>,
    },
    Unsubscribe {
        channel: String,
    },
    /// `client-*` on a channel: `data` as a JSON string.
    ClientEvent {
        event: String,
        channel: String,
        data: String,
    },
    /// `pusher:signin`: `auth` signs `<socket_id>::user::<user_data>`
    /// (`crate::pusher_user::parse_user_data` reads `user_data`).
    Signin {
        auth: Option<String>,
        user_data: Option<String>,
    },
    /// Any other event: answered with an error or ignored.
    Other {
        event: String,
    },
}

/// Why a client frame could not be read.
#[derive(thiserror::Error, Debug, PartialEq, Eq)]
pub enum PusherFrameError {
    #[error("not a Pusher event: want {{\"event\":…,\"data\":…}}")]
    NotJson,
    #[error("event name longer than 200 bytes")]
    LongEvent,
    #[error("{0} needs data.channel")]
    NoChannel(&'static str),
    #[error("a client event needs a channel")]
    ClientEventNoChannel,
}

#[derive(Deserialize)]
struct Raw {
    event: String,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    data: Option<Value>,
}

#[derive(Deserialize, Default)]
struct SubscribeData {
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    channel_data: Option<String>,
    #[serde(default)]
    user_data: Option<String>,
}

/// Reads one text frame of a Pusher client.
pub fn parse_client_frame(text: &[u8]) -> Result<ClientFrame, PusherFrameError> {
    let raw: Raw = serde_json::from_slice(text).map_err(|_| PusherFrameError::NotJson)?;
    if raw.event.len() > MAX_EVENT_NAME {
        return Err(PusherFrameError::LongEvent);
    }
    // pusher-js sends `data` as an object; some clients send it as a JSON string.
    let data = match raw.data {
        Some(Value::String(s)) => serde_json::from_str::<Value>(&s).unwrap_or(Value::String(s)),
        Some(v) => v,
        None => Value::Null,
    };
    Ok(match raw.event.as_str() {
        "pusher:ping" => ClientFrame::Ping,
        "pusher:pong" => ClientFrame::Pong,
        "pusher:subscribe" => {
            let d: SubscribeData = serde_json::from_value(data).unwrap_or_default();
            ClientFrame::Subscribe {
                channel: d
                    .channel
                    .ok_or(PusherFrameError::NoChannel("pusher:subscribe"))?,
                auth: d.auth,
                channel_data: d.channel_data,
            }
        }
        "pusher:unsubscribe" => {
            let d: SubscribeData = serde_json::from_value(data).unwrap_or_default();
            ClientFrame::Unsubscribe {
                channel: d
                    .channel
                    .ok_or(PusherFrameError::NoChannel("pusher:unsubscribe"))?,
            }
        }
        "pusher:signin" => {
            let d: SubscribeData = serde_json::from_value(data).unwrap_or_default();
            ClientFrame::Signin {
                auth: d.auth,
                user_data: d.user_data,
            }
        }
        e if e.starts_with("client-") => ClientFrame::ClientEvent {
            event: raw.event,
            channel: raw.channel.ok_or(PusherFrameError::ClientEventNoChannel)?,
            data: data_string(data),
        },
        _ => ClientFrame::Other { event: raw.event },
    })
}

/// `data` as Pusher carries it: a string stays itself, anything else is its JSON.
fn data_string(data: Value) -> String {
    match data {
        Value::String(s) => s,
        v => v.to_string(),
    }
}

/// Writes `{"event":…,"channel":…,"data":…}` (no channel: `{"event":…,"data":…}`);
/// `data` is written as a JSON string.
pub fn write_event(out: &mut Vec<u8>, event: &str, channel: Option<&str>, data: &str) {
    write_event_from(out, event, channel, data, None);
}

/// [`write_event`] with the `user_id` of the presence member that sent it (a client
/// event on a presence channel: pusher-js hands it to the callback as
/// `metadata.user_id`).
pub fn write_event_from(
    out: &mut Vec<u8>,
    event: &str,
    channel: Option<&str>,
    data: &str,
    user_id: Option<&str>,
) {
    out.extend_from_slice(b"{\"event\":");
    write_json_string(out, event);
    if let Some(c) = channel {
        out.extend_from_slice(b",\"channel\":");
        write_json_string(out, c);
    }
    out.extend_from_slice(b",\"data\":");
    write_json_string(out, data);
    if let Some(u) = user_id {
        out.extend_from_slice(b",\"user_id\":");
        write_json_string(out, u);
    }
    out.push(b'}');
}

/// `pusher:error` with a code and message (sent as `data`, an object, as Pusher does).
pub fn write_error(out: &mut Vec<u8>, code: Option<u16>, message: &str) {
    let data = serde_json::json!({ "code": code, "message": message });
    let frame = serde_json::json!({ "event": "pusher:error", "data": data });
    out.extend_from_slice(frame.to_string().as_bytes());
}

fn write_json_string(out: &mut Vec<u8>, s: &str) {
    // Writing a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// A channel message as a Pusher client receives it: the event it names, its data,
/// and the socket it came from (not echoed to that socket). A payload published
/// through Pusher (a client event, later the HTTP API) is the envelope
/// `{"event":"…","data":"…"[,"socket_id":"…"]}`, which myriad's own subscribers see
/// as it is; any other payload is the data of a [`DEFAULT_EVENT`].
#[derive(Debug, PartialEq, Eq)]
pub struct Published {
    pub event: String,
    pub data: String,
    pub socket_id: Option<String>,
    /// The channel a Pusher client is shown instead of the message's own: a
    /// message to a user (`#server-to-user-<id>`, `crate::pusher_user`).
    pub channel: Option<String>,
    /// A client event on a presence channel: the member that sent it, as the app
    /// gave its id. The gateway writes its myriad user (a decimal,
    /// [`Published::client_event`]); the router that owns the channel replaces it
    /// with the id as given, or drops it when the publishing connection is not that
    /// user's (`hub`), so no client names another member.
    pub user_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    event: String,
    data: String,
    #[serde(default)]
    socket_id: Option<String>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    user_id: Option<String>,
}

impl Published {
    /// Reads a channel message's payload (never fails: plain bytes are data).
    pub fn read(payload: &[u8]) -> Published {
        if payload.first() == Some(&b'{') {
            if let Ok(e) = serde_json::from_slice::<Envelope>(payload) {
                return Published {
                    event: e.event,
                    data: e.data,
                    socket_id: e.socket_id,
                    channel: e.channel,
                    user_id: e.user_id,
                };
            }
        }
        Published {
            event: DEFAULT_EVENT.to_string(),
            data: String::from_utf8_lossy(payload).into_owned(),
            socket_id: None,
            channel: None,
            user_id: None,
        }
    }

    /// The envelope a Pusher publish stores as the message's payload.
    pub fn envelope(event: &str, data: &str, socket_id: Option<&str>) -> Vec<u8> {
        Published::envelope_shown(event, data, socket_id, None)
    }

    /// The envelope, naming the channel its Pusher clients are shown (`channel`).
    pub fn envelope_shown(
        event: &str,
        data: &str,
        socket_id: Option<&str>,
        channel: Option<&str>,
    ) -> Vec<u8> {
        Published {
            event: event.to_string(),
            data: data.to_string(),
            socket_id: socket_id.map(str::to_string),
            channel: channel.map(str::to_string),
            user_id: None,
        }
        .to_envelope()
    }

    /// A client event's envelope: `socket_id` its sender, `user` the myriad user of
    /// the presence member that sent it (resolved by the router, see
    /// [`Published::user_id`]).
    pub fn client_event(event: &str, data: &str, socket_id: &str, user: Option<u64>) -> Vec<u8> {
        Published {
            event: event.to_string(),
            data: data.to_string(),
            socket_id: Some(socket_id.to_string()),
            channel: None,
            user_id: user.map(|u| u.to_string()),
        }
        .to_envelope()
    }

    /// The envelope of this message, as stored.
    pub fn to_envelope(&self) -> Vec<u8> {
        let mut v = serde_json::json!({ "event": self.event, "data": self.data });
        if let Some(s) = &self.socket_id {
            v["socket_id"] = s.as_str().into();
        }
        if let Some(c) = &self.channel {
            v["channel"] = c.as_str().into();
        }
        if let Some(u) = &self.user_id {
            v["user_id"] = u.as_str().into();
        }
        v.to_string().into_bytes()
    }
}

/// Longest `user_info` of a presence member, in bytes of compact JSON (myriad's
/// default `--max-presence-info`).
pub const MAX_USER_INFO: usize = 256;

#[derive(Deserialize)]
struct ChannelData {
    user_id: Value,
    #[serde(default)]
    user_info: Option<Value>,
}

/// A presence subscription's `channel_data`: the member's user id as the app
/// gave it (a JSON number as its text; `crate::pusher_user` maps it to a myriad
/// user), and its `user_info` as compact JSON (`None`: absent or null).
pub fn parse_channel_data(data: &str) -> Result<(String, Option<String>), &'static str> {
    let d: ChannelData =
        serde_json::from_str(data).map_err(|_| "channel_data is not {\"user_id\":…}")?;
    let id = crate::pusher_user::user_id(&d.user_id)?;
    let info = d.user_info.filter(|v| !v.is_null()).map(|v| v.to_string());
    if info.as_ref().is_some_and(|i| i.len() > MAX_USER_INFO) {
        return Err("user_info is longer than 256 bytes");
    }
    Ok((id, info))
}

/// The query of `/app/<key>`: the `protocol` the client speaks (`None`: absent or
/// not a number). Other parameters (`client`, `version`, `flash`) are ignored.
pub fn protocol_of(query: Option<&str>) -> Option<u32> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("protocol="))
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pusher_js_frames() {
        assert_eq!(
            parse_client_frame(br#"{"event":"pusher:ping","data":{}}"#),
            Ok(ClientFrame::Ping)
        );
        assert_eq!(
            parse_client_frame(
                br#"{"event":"pusher:subscribe","data":{"auth":"k:ab","channel":"private-a"}}"#
            ),
            Ok(ClientFrame::Subscribe {
                channel: "private-a".into(),
                auth: Some("k:ab".into()),
                channel_data: None
            })
        );
        assert_eq!(
            parse_client_frame(br#"{"event":"client-x","channel":"private-a","data":{"a":1}}"#),
            Ok(ClientFrame::ClientEvent {
                event: "client-x".into(),
                channel: "private-a".into(),
                data: r#"{"a":1}"#.into()
            })
        );
        assert_eq!(
            parse_client_frame(b"{\"event\":\"pusher:subscribe\",\"data\":{}}"),
            Err(PusherFrameError::NoChannel("pusher:subscribe"))
        );
        assert_eq!(parse_client_frame(b"[1]"), Err(PusherFrameError::NotJson));
    }

    #[test]
    fn writes_data_as_a_string() {
        let mut out = Vec::new();
        write_event(&mut out, "e", Some("c"), "{\"a\":\"\\\"\"}");
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["data"], Value::String("{\"a\":\"\\\"\"}".into()));
        assert_eq!(v["channel"], "c");
    }

    #[test]
    fn a_published_envelope_names_its_event_and_plain_bytes_are_a_message() {
        let env = Published::envelope("ev", "d", Some("1.2"));
        let p = Published::read(&env);
        assert_eq!((p.event.as_str(), p.data.as_str()), ("ev", "d"));
        assert_eq!(p.socket_id.as_deref(), Some("1.2"));
        let p = Published::read(b"{\"x\":1}");
        assert_eq!(
            (p.event.as_str(), p.data.as_str()),
            ("message", "{\"x\":1}")
        );
    }

    #[test]
    fn a_client_event_carries_its_member_and_a_frame_shows_it() {
        let env = Published::client_event("client-x", "{}", "1.2", Some(42));
        let p = Published::read(&env);
        assert_eq!(p.user_id.as_deref(), Some("42"));
        assert_eq!(Published::read(&p.to_envelope()), p);
        let mut out = Vec::new();
        write_event_from(
            &mut out,
            "client-x",
            Some("presence-a"),
            "{}",
            Some("alice"),
        );
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["user_id"], "alice");
        let mut out = Vec::new();
        write_event(&mut out, "client-x", Some("presence-a"), "{}");
        assert!(!String::from_utf8(out).unwrap().contains("user_id"));
    }

    #[test]
    fn channel_data() {
        assert_eq!(
            parse_channel_data(r#"{"user_id":"7","user_info":{"n":"a"}}"#),
            Ok(("7".into(), Some(r#"{"n":"a"}"#.into())))
        );
        assert_eq!(
            parse_channel_data(r#"{"user_id":8}"#),
            Ok(("8".into(), None))
        );
        assert_eq!(
            parse_channel_data(r#"{"user_id":"bob"}"#),
            Ok(("bob".into(), None))
        );
        assert!(parse_channel_data(r#"{"user_id":""}"#).is_err());
        assert!(parse_channel_data(r#"{"user_id":[1]}"#).is_err());
    }

    #[test]
    fn protocol_query() {
        assert_eq!(protocol_of(Some("client=js&protocol=7")), Some(7));
        assert_eq!(protocol_of(Some("protocol=x")), None);
        assert_eq!(protocol_of(None), None);
    }
}
