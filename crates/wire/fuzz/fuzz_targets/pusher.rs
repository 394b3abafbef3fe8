//! The Pusher protocol (`wire::pusher`): a client's text frame, a channel message's
//! payload and an `/app/` query on arbitrary bytes; and the same bytes as the
//! `auth` of a `private-`/`presence-` subscription (`auth::PusherApp`), which is
//! refused unless it is the app's own signature, as a sign-in's `user_data` and
//! `auth` and as a user id (its key), and as a signed HTTP API request (query,
//! newline, body) to the events, terminate and channel-list paths.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    invariants::targets::pusher(data);
    let app = auth::PusherApp::parse("app:key1:secret1").expect("a valid app");
    if let Ok(text) = std::str::from_utf8(data) {
        let (socket_id, rest) = text.split_once('|').unwrap_or(("1.2", text));
        let signed = app.sign(&format!("{socket_id}:private-a"));
        let ok = app
            .check_channel_auth(socket_id, "private-a", None, Some(rest))
            .is_ok();
        // Hex digits of either case; the key exactly.
        let expected = rest
            .strip_prefix("key1:")
            .is_some_and(|hex| hex.eq_ignore_ascii_case(&signed));
        assert_eq!(ok, expected, "{rest:?}");
        let _ = app.check_channel_auth(socket_id, "presence-a", Some(rest), Some(rest));
        // The same text as a sign-in's user_data and auth: only the app's own
        // signature of `<socket_id>::user::<user_data>` passes.
        let signed = app.sign(&format!("{socket_id}::user::{rest}"));
        let ok = app.check_user_auth(socket_id, rest, Some(rest)).is_ok();
        assert!(!ok || rest.strip_prefix("key1:").is_some_and(|h| h.eq_ignore_ascii_case(&signed)));
        let good = format!("key1:{signed}");
        assert!(app.check_user_auth(socket_id, rest, Some(&good)).is_ok());
        // A user id's key: itself when canonical, else in the upper half.
        let key = auth::pusher_user_key(rest);
        let canonical = rest.parse::<u64>().ok().filter(|n| n.to_string() == rest);
        assert!(canonical.map_or(key >= 1 << 63, |n| n == key), "{rest:?}");
        // The same text as a signed API request's query, and its body.
        let (query, body) = text.split_once('\n').unwrap_or((text, ""));
        let now = 1_353_088_179;
        let _ = app.check_api_request("POST", "/apps/app/events", query, body.as_bytes(), now);
        let path = "/apps/app/users/u-1/terminate_connections";
        let _ = app.check_api_request("POST", path, query, body.as_bytes(), now);
        let _ = app.check_api_request("GET", "/apps/app/channels", query, b"", now);
    }
});
