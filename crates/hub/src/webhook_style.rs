//! Whose format a webhook ([`crate::webhook`]) speaks, and how it signs: myriad's
//! (`X-Myriad-Signature: sha256=<hex>`, events as on NATS) or Pusher's for one
//! Pusher app (`X-Pusher-Key`, `X-Pusher-Signature: <hex HMAC-SHA256(secret,
//! body)>`, Pusher's event objects), which the `pusher` server SDKs' `webhook()`
//! checks.
//!
//! A Pusher app's webhook names only that app's channels, by the names its clients
//! use: the first `--pusher-app`'s channels are myriad's by the same names, a later
//! app's are `<id>:<name>` inside myriad (`wire::pusher_user::internal`), shown
//! without the prefix. A channel of another app, or a name no Pusher client can
//! send (a companion's `~`), is not posted: it would be signed with the wrong
//! app's secret. Members are named as the app gave them (`"alice"`, not the key
//! myriad keeps a string id under: `wire::pusher_user::read_member`).

use crate::presence::event_json;
use router::PresenceEvent;
use serde_json::Value;

/// A webhook's format and signing key.
pub enum Style {
    /// myriad's, signed with this key.
    Myriad(ring::hmac::Key),
    /// Pusher's, for one app.
    Pusher(PusherHook),
}

/// The Pusher-format webhook of one app.
pub struct PusherHook {
    /// Its key and secret (the signature is [`auth::PusherApp::sign`] of the body).
    pub app: auth::PusherApp,
    /// What its channels' myriad names start with (`""` for the first app,
    /// `<id>:` for a later one: `auth::PusherApps::namespace`).
    pub namespace: String,
}

impl Style {
    /// myriad's format, signed with `secret`.
    pub fn myriad(secret: &str) -> Style {
        Style::Myriad(ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            secret.as_bytes(),
        ))
    }

    /// The Pusher app this webhook speaks for, if it is one's.
    pub fn pusher(&self) -> Option<&PusherHook> {
        match self {
            Style::Myriad(_) => None,
            Style::Pusher(p) => Some(p),
        }
    }

    /// One membership event as this style's JSON; `info` is a user's presence info
    /// (which carries a Pusher id that is not a number). `None`: not this app's.
    pub fn event(
        &self,
        event: &PresenceEvent,
        info: &dyn Fn(u64) -> Option<String>,
        time_ms: u64,
    ) -> Option<Value> {
        let p = match self {
            Style::Myriad(_) => return Some(event_json(event, time_ms)),
            Style::Pusher(p) => p,
        };
        let channel = p.shown(&event.channel)?;
        let mut json = serde_json::json!({ "name": event.kind.name(), "channel": channel });
        if let Some(user) = event.user {
            let kept = info(user);
            json["user_id"] = wire::pusher_user::read_member(user, kept.as_deref())
                .0
                .into();
        }
        Some(json)
    }

    /// The signature's header line(s) for `body` (without the last CRLF).
    pub fn headers(&self, body: &str) -> String {
        match self {
            Style::Myriad(key) => format!(
                "X-Myriad-Signature: sha256={}",
                hex(ring::hmac::sign(key, body.as_bytes()).as_ref())
            ),
            Style::Pusher(p) => format!(
                "X-Pusher-Key: {}\r\nX-Pusher-Signature: {}",
                p.app.key,
                p.app.sign(body)
            ),
        }
    }
}

impl PusherHook {
    /// The name this app's clients use for the myriad channel `channel`; `None`
    /// when it is not one of this app's channels.
    pub fn shown<'a>(&self, channel: &'a str) -> Option<&'a str> {
        let name = channel.strip_prefix(self.namespace.as_str())?;
        wire::pusher_user::check_name(name).ok()?;
        Some(name)
    }

    /// Pusher's `client_event` of a message published on `channel`, when it is a
    /// client event of this app's (a `client-` event whose envelope names its
    /// socket, `wire::pusher::Published`), with `user_id` on a presence channel.
    pub fn client_event(&self, channel: &str, p: &wire::pusher::Published) -> Option<Value> {
        let socket_id = p
            .socket_id
            .as_deref()
            .filter(|_| p.event.starts_with("client-"))?;
        let channel = self.shown(channel)?;
        let mut json = serde_json::json!({
            "name": "client_event",
            "channel": channel,
            "event": p.event,
            "data": p.data,
            "socket_id": socket_id,
        });
        if let Some(user) = p
            .user_id
            .as_deref()
            .filter(|_| channel.starts_with("presence-"))
        {
            json["user_id"] = user.into();
        }
        Some(json)
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pusher(spec: &str, namespace: &str) -> Style {
        Style::Pusher(PusherHook {
            app: auth::PusherApp::parse(spec).unwrap(),
            namespace: namespace.into(),
        })
    }

    fn member(channel: &str, user: u64) -> PresenceEvent {
        PresenceEvent {
            kind: router::EventKind::MemberAdded,
            channel: channel.into(),
            user: Some(user),
        }
    }

    #[test]
    fn each_app_s_hook_names_only_its_channels_without_the_namespace() {
        let none = |_| None;
        let first = pusher("app1:k1:s1", "");
        let second = pusher("app2:k2:s2", "app2:");
        let json = first.event(&member("presence-a", 42), &none, 0).unwrap();
        assert_eq!(json["channel"], "presence-a");
        assert_eq!(json["user_id"], "42");
        assert_eq!(second.event(&member("presence-a", 42), &none, 0), None);
        let json = second
            .event(&member("app2:presence-a", 7), &none, 0)
            .unwrap();
        assert_eq!(json["channel"], "presence-a");
        for other in ["app2:presence-a", "app3:x", "7~friends", "app2:7~user"] {
            assert_eq!(first.event(&member(other, 1), &none, 0), None, "{other}");
        }
        for other in ["presence-a", "app3:x", "app2:7~user"] {
            assert_eq!(second.event(&member(other, 1), &none, 0), None, "{other}");
        }
        let myriad = Style::myriad("s");
        assert!(myriad.event(&member("7~friends", 1), &none, 0).is_some());
    }

    #[test]
    fn a_string_id_is_shown_as_the_app_gave_it() {
        let key = auth::pusher_user_key("alice");
        let kept = wire::pusher_user::member_info("alice", Some("{\"n\":1}".into()));
        let info = |u: u64| (u == key).then(|| kept.clone().unwrap());
        let json = pusher("app1:k1:s1", "")
            .event(&member("presence-a", key), &info, 0)
            .unwrap();
        assert_eq!(json["user_id"], "alice");
    }

    #[test]
    fn pusher_headers_carry_the_app_s_key_and_its_signature() {
        let style = pusher("app2:k2:s2", "app2:");
        let app = auth::PusherApp::parse("app2:k2:s2").unwrap();
        assert_eq!(
            style.headers("{}"),
            format!("X-Pusher-Key: k2\r\nX-Pusher-Signature: {}", app.sign("{}"))
        );
        assert!(Style::myriad("s")
            .headers("{}")
            .starts_with("X-Myriad-Signature: sha256="));
    }

    #[test]
    fn client_events_name_their_member_on_presence_channels_only() {
        let Style::Pusher(hook) = pusher("app2:k2:s2", "app2:") else {
            unreachable!("a Pusher style")
        };
        let read = |event: &str, user: Option<&str>| wire::pusher::Published {
            event: event.into(),
            data: "{}".into(),
            socket_id: Some("1.2".into()),
            channel: None,
            user_id: user.map(Into::into),
        };
        let json = hook
            .client_event("app2:presence-a", &read("client-x", Some("alice")))
            .unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "client_event", "channel": "presence-a",
                "event": "client-x", "data": "{}", "socket_id": "1.2", "user_id": "alice"})
        );
        let json = hook
            .client_event("app2:private-a", &read("client-x", Some("alice")))
            .unwrap();
        assert!(json.get("user_id").is_none(), "{json}");
        assert_eq!(
            hook.client_event("app2:private-a", &read("news", None)),
            None
        );
        assert_eq!(
            hook.client_event("private-a", &read("client-x", None)),
            None
        );
    }

    #[test]
    fn the_signature_is_the_hex_hmac_sha256_of_the_body() {
        // RFC 4231 test case 2.
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"Jefe");
        let tag = ring::hmac::sign(&key, b"what do ya want for nothing?");
        assert_eq!(
            hex(tag.as_ref()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
