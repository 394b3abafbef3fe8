//! Pusher Channels apps (`--pusher-app ID:KEY:SECRET`, SPEC J1) and the channel
//! signature a `private-` or `presence-` subscription carries: `<key>:<hex
//! hmac-sha256(secret, "<socket_id>:<channel>[:<channel_data>]")>`, made by the
//! app's own auth endpoint (the `pusher` server SDKs' `authorizeChannel`). The
//! signature is compared in constant time (`hmac`'s `verify_slice`).

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// One Pusher application: clients connect with its `key`, the HTTP API names its
/// `id`, and its `secret` signs channel auth and API requests.
#[derive(Clone, PartialEq, Eq)]
pub struct PusherApp {
    pub id: String,
    pub key: String,
    secret: String,
}

impl std::fmt::Debug for PusherApp {
    // Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PusherApp(id {}, key {})", self.id, self.key)
    }
}

/// Why an app flag or a channel signature was refused.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum PusherAuthError {
    #[error("--pusher-app wants ID:KEY:SECRET, each non-empty, without ':' in ID or KEY")]
    BadApp,
    #[error("two --pusher-app share an id or a key")]
    DuplicateApp,
    #[error("a --pusher-app ID after the first is its channels' namespace: only A-Z a-z 0-9 _ - = @ , . ;")]
    BadAppId,
    #[error("this channel needs an auth signature")]
    Missing,
    #[error("the auth signature is not <key>:<hex hmac-sha256>")]
    Malformed,
    #[error("the auth signature names another app's key")]
    WrongKey,
    #[error("invalid signature")]
    Signature,
    #[error("auth_timestamp is more than 600 s from the server's clock")]
    Expired,
    #[error("body_md5 is not the body's MD5")]
    BodyMd5,
    #[error("auth_version must be 1.0")]
    Version,
}

/// How far an API request's `auth_timestamp` may be from the server's clock.
pub const API_WINDOW_SECS: u64 = 600;

impl PusherApp {
    /// `ID:KEY:SECRET` (the secret may contain ':').
    pub fn parse(spec: &str) -> Result<PusherApp, PusherAuthError> {
        let mut parts = spec.splitn(3, ':');
        let (Some(id), Some(key), Some(secret)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(PusherAuthError::BadApp);
        };
        if id.is_empty() || key.is_empty() || secret.is_empty() {
            return Err(PusherAuthError::BadApp);
        }
        Ok(PusherApp {
            id: id.to_string(),
            key: key.to_string(),
            secret: secret.to_string(),
        })
    }

    /// Hex HMAC-SHA256 of `text` with the app's secret (what an auth endpoint
    /// signs; tests and the HTTP API use it too).
    pub fn sign(&self, text: &str) -> String {
        hex(&self.mac(text).finalize().into_bytes())
    }

    fn mac(&self, text: &str) -> HmacSha256 {
        // HMAC takes a key of any length: `new_from_slice` cannot fail.
        let mut mac = HmacSha256::new_from_slice(self.secret.as_bytes())
            .expect("HMAC accepts any key length");
        mac.update(text.as_bytes());
        mac
    }

    /// Checks a subscription's `auth` for `channel` on `socket_id`
    /// (`channel_data`: a presence channel's member data, signed with it).
    pub fn check_channel_auth(
        &self,
        socket_id: &str,
        channel: &str,
        channel_data: Option<&str>,
        auth: Option<&str>,
    ) -> Result<(), PusherAuthError> {
        let text = match channel_data {
            Some(d) => format!("{socket_id}:{channel}:{d}"),
            None => format!("{socket_id}:{channel}"),
        };
        self.check_auth(&text, auth)
    }

    /// Checks a `pusher:signin`'s `auth`: the app's signature of
    /// `<socket_id>::user::<user_data>` (the SDKs' `authenticateUser`).
    pub fn check_user_auth(
        &self,
        socket_id: &str,
        user_data: &str,
        auth: Option<&str>,
    ) -> Result<(), PusherAuthError> {
        self.check_auth(&format!("{socket_id}::user::{user_data}"), auth)
    }

    /// `auth` is `<this app's key>:<hex hmac-sha256(secret, text)>`.
    fn check_auth(&self, text: &str, auth: Option<&str>) -> Result<(), PusherAuthError> {
        let auth = auth.ok_or(PusherAuthError::Missing)?;
        let (key, signature) = auth.split_once(':').ok_or(PusherAuthError::Malformed)?;
        if key != self.key {
            return Err(PusherAuthError::WrongKey);
        }
        let signature = unhex(signature).ok_or(PusherAuthError::Malformed)?;
        self.mac(text)
            .verify_slice(&signature)
            .map_err(|_| PusherAuthError::Signature)
    }
}

/// The myriad user (a u64) of a Pusher user id: a canonical decimal is itself;
/// anything else is the first 8 bytes of its SHA-256 with the top bit set, so a
/// string id never takes a numeric id below 2^63. SHA-256 rather than a fast
/// hash: an id an attacker picks cannot be made to land on another user's (that
/// takes a second preimage of 63 bits). Two of n string ids collide with odds
/// about n^2 / 2^64 (a million users: 5e-8).
pub fn user_key(id: &str) -> u64 {
    let numeric = id.parse::<u64>().ok().filter(|n| n.to_string() == id);
    if let Some(n) = numeric {
        return n;
    }
    use sha2::Digest;
    let digest = Sha256::digest(id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first) | 1 << 63
}

impl PusherApp {
    /// Checks a signed HTTP API request (Pusher's "authenticating requests"):
    /// `auth_key` is this app's, `auth_version` 1.0, `auth_timestamp` within
    /// [`API_WINDOW_SECS`] of `now` (Unix seconds), `body_md5` the body's when
    /// there is one, and `auth_signature` the hex HMAC-SHA256 of
    /// `"<METHOD>\n<path>\n<the other parameters sorted by key, k=v joined by &>"`.
    pub fn check_api_request(
        &self,
        method: &str,
        path: &str,
        query: &str,
        body: &[u8],
        now: u64,
    ) -> Result<(), PusherAuthError> {
        let mut params: Vec<(&str, &str)> = query
            .split('&')
            .filter(|kv| !kv.is_empty())
            .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
            .collect();
        let get = |k: &str| params.iter().find(|p| p.0 == k).map(|p| p.1);
        let signature = get("auth_signature").ok_or(PusherAuthError::Missing)?;
        let signature = unhex(signature).ok_or(PusherAuthError::Malformed)?;
        if get("auth_key") != Some(self.key.as_str()) {
            return Err(PusherAuthError::WrongKey);
        }
        if get("auth_version") != Some("1.0") {
            return Err(PusherAuthError::Version);
        }
        let at: u64 = get("auth_timestamp")
            .and_then(|t| t.parse().ok())
            .ok_or(PusherAuthError::Malformed)?;
        if at.abs_diff(now) > API_WINDOW_SECS {
            return Err(PusherAuthError::Expired);
        }
        if !body.is_empty() {
            use md5::Digest;
            let md5 = hex(&md5::Md5::digest(body));
            if get("body_md5") != Some(md5.as_str()) {
                return Err(PusherAuthError::BodyMd5);
            }
        }
        params.retain(|p| p.0 != "auth_signature");
        params.sort();
        let sorted: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let text = format!("{method}\n{path}\n{}", sorted.join("&"));
        self.mac(&text)
            .verify_slice(&signature)
            .map_err(|_| PusherAuthError::Signature)
    }

    /// The query string that signs an API request to `path` at Unix second `now`
    /// with `body` (what the `pusher` server SDKs send, [`Self::check_api_request`]'s
    /// other side): load tools publish through any Pusher server with it.
    pub fn sign_api_request(&self, method: &str, path: &str, body: &[u8], now: u64) -> String {
        use md5::Digest;
        let mut query = format!(
            "auth_key={}&auth_timestamp={now}&auth_version=1.0",
            self.key
        );
        if !body.is_empty() {
            query.push_str(&format!("&body_md5={}", hex(&md5::Md5::digest(body))));
        }
        let signature = self.sign(&format!("{method}\n{path}\n{query}"));
        format!("{query}&auth_signature={signature}")
    }
}

/// The configured apps, looked up by key (connections) or id (the HTTP API).
#[derive(Clone, Debug, Default)]
pub struct PusherApps {
    apps: Vec<PusherApp>,
}

impl PusherApps {
    /// Apps from `--pusher-app` values; ids and keys must be unique.
    pub fn parse<S: AsRef<str>>(
        specs: impl IntoIterator<Item = S>,
    ) -> Result<PusherApps, PusherAuthError> {
        let mut apps: Vec<PusherApp> = Vec::new();
        for s in specs {
            let app = PusherApp::parse(s.as_ref())?;
            if apps.iter().any(|a| a.id == app.id || a.key == app.key) {
                return Err(PusherAuthError::DuplicateApp);
            }
            let channel_char = |b: u8| b.is_ascii_alphanumeric() || b"_-=@,.;".contains(&b);
            if !apps.is_empty() && !app.id.bytes().all(channel_char) {
                return Err(PusherAuthError::BadAppId);
            }
            apps.push(app);
        }
        Ok(PusherApps { apps })
    }

    pub fn is_empty(&self) -> bool {
        self.apps.is_empty()
    }

    /// The app of `key`, with its index (what a connection keeps).
    pub fn by_key(&self, key: &str) -> Option<(u16, &PusherApp)> {
        self.apps
            .iter()
            .enumerate()
            .find(|(_, a)| a.key == key)
            .map(|(i, a)| (i as u16, a))
    }

    /// The app at `index` (from [`PusherApps::by_key`]).
    pub fn get(&self, index: u16) -> Option<&PusherApp> {
        self.apps.get(usize::from(index))
    }

    /// The app of HTTP API id `id`, with its index.
    pub fn by_id(&self, id: &str) -> Option<(u16, &PusherApp)> {
        self.apps
            .iter()
            .enumerate()
            .find(|(_, a)| a.id == id)
            .map(|(i, a)| (i as u16, a))
    }

    /// The namespace of the app at `index`'s channels on myriad: none for the
    /// first app (so `POST /pub/<channel>` and myriad's own subscribers reach its
    /// clients by the same names), `<id>:` for the others (`wire::pusher_user`).
    pub fn namespace(&self, index: u16) -> String {
        match self.apps.get(usize::from(index)) {
            Some(a) if index > 0 => format!("{}:", a.id),
            _ => String::new(),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// Lower- or upper-case hex to bytes (`None`: odd length or not hex).
fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 128 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_apps_and_refuses_bad_or_duplicate_ones() {
        let apps = PusherApps::parse(["1:k1:s:with:colons", "2:k2:s2"]).unwrap();
        assert_eq!(
            apps.by_key("k2").map(|(i, a)| (i, a.id.as_str())),
            Some((1, "2"))
        );
        assert_eq!(apps.by_id("1").map(|(_, a)| a.key.as_str()), Some("k1"));
        assert_eq!(
            (apps.namespace(0).as_str(), apps.namespace(1).as_str()),
            ("", "2:")
        );
        assert_eq!(
            PusherApps::parse(["1:k:s", "a/b:k2:t"]).unwrap_err(),
            PusherAuthError::BadAppId
        );
        assert!(apps.by_key("nope").is_none());
        assert_eq!(
            PusherApps::parse(["1:k"]).unwrap_err(),
            PusherAuthError::BadApp
        );
        assert_eq!(
            PusherApps::parse(["1:k:s", "2:k:t"]).unwrap_err(),
            PusherAuthError::DuplicateApp
        );
    }

    #[test]
    fn user_keys_and_the_signin_signature() {
        assert_eq!(user_key("42"), 42);
        assert!(user_key("042") >= 1 << 63);
        assert!(user_key("bob") >= 1 << 63);
        assert_ne!(user_key("bob"), user_key("alice"));
        let app = PusherApp::parse("1:key:secret").unwrap();
        let data = r#"{"id":"bob"}"#;
        let signed = format!("key:{}", app.sign(&format!("1.2::user::{data}")));
        assert_eq!(app.check_user_auth("1.2", data, Some(&signed)), Ok(()));
        assert_eq!(
            app.check_user_auth("1.3", data, Some(&signed)),
            Err(PusherAuthError::Signature)
        );
    }

    #[test]
    fn checks_an_api_request() {
        let app = PusherApp::parse("3:278d425bdf160c739803:7ad3773142a6692b25b8").unwrap();
        // Pusher's documented example ("Generating authentication signatures").
        let body = br#"{"name":"foo","channels":["project-3"],"data":"{\"some\":\"data\"}"}"#;
        let query = "auth_key=278d425bdf160c739803&auth_timestamp=1353088179&auth_version=1.0\
                     &body_md5=ec365a775a4cd0599faeb73354201b6f&auth_signature=\
                     da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6c";
        let at = 1_353_088_179;
        let check =
            |q: &str, b: &[u8], now| app.check_api_request("POST", "/apps/3/events", q, b, now);
        assert_eq!(check(query, body, at + 600), Ok(()));
        assert_eq!(check(query, body, at + 601), Err(PusherAuthError::Expired));
        assert_eq!(check(query, b"{}", at), Err(PusherAuthError::BodyMd5));
        let forged = query.replace("da4548", "da4549");
        assert_eq!(check(&forged, body, at), Err(PusherAuthError::Signature));
        // The client's side gives the documented query, parameters in sorted order.
        let signed = app.sign_api_request("POST", "/apps/3/events", body, at);
        assert_eq!(signed, query);
    }

    #[test]
    fn checks_a_channel_signature() {
        let app = PusherApp::parse("1:key:secret").unwrap();
        // Computed independently:
        // `printf '1234.1234:private-foobar' | openssl dgst -sha256 -hmac secret`.
        let signed = "key:d72a34ff99c998e839c2958470377261870a474fa85674304db4589ba4fef019";
        assert_eq!(app.sign("1234.1234:private-foobar"), signed[4..]);
        assert_eq!(
            app.check_channel_auth("1234.1234", "private-foobar", None, Some(signed)),
            Ok(())
        );
        assert_eq!(
            app.check_channel_auth("1234.1234", "private-other", None, Some(signed)),
            Err(PusherAuthError::Signature)
        );
        let other_key = signed.replacen("key:", "k2:", 1);
        assert_eq!(
            app.check_channel_auth("1234.1234", "private-foobar", None, Some(&other_key)),
            Err(PusherAuthError::WrongKey)
        );
        assert_eq!(
            app.check_channel_auth("1.1", "private-a", None, Some("key:zz")),
            Err(PusherAuthError::Malformed)
        );
        let data = r#"{"user_id":"7"}"#;
        let signed = format!("key:{}", app.sign(&format!("1.1:presence-a:{data}")));
        assert_eq!(
            app.check_channel_auth("1.1", "presence-a", Some(data), Some(&signed)),
            Ok(())
        );
    }
}
