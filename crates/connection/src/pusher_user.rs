//! Pusher users on a connection (docs/protocol.md "Pusher clients"):
//! `pusher:signin` checks the app's signature of `<socket_id>::user::<user_data>`
//! and joins the user's internal channel (`wire::pusher_user::user_channel`, the
//! id's key from `auth::pusher_user_key`), answered `pusher:signin_success` once
//! the router has the join. What the HTTP API sends to the user
//! (`#server-to-user-<id>`) and its terminate reach every signed-in connection
//! of the user, in any process, as messages of that channel.
//!
//! Budget: the `user_data` as signed, in the loop's Pusher sessions
//! (`pusher_session`), only once signed in.

use super::pusher::{self, session};
use super::{channels, Connection, Cx};
use wire::pusher::code;
use wire::pusher_user::{self as names, SERVER_TO_USER};

/// `pusher:signin`: a bad signature or `user_data` is `pusher:error` 4009 and a
/// close with 4009 (the client does not reconnect as it is), as Pusher does.
pub(super) fn signin(conn: &mut Connection, cx: &mut Cx, auth: Option<&str>, user_data: &str) {
    let Some(s) = session(cx) else { return };
    if cx.credentials.pusher.user_data(cx.key).is_some() {
        return pusher::error(cx, None, "this connection is signed in already");
    }
    let app_index = s.app;
    let socket_id = s.socket_id(cx.key);
    let Some(app) = cx.config.access.pusher.get(app_index) else {
        return;
    };
    if let Err(e) = app.check_user_auth(&socket_id, user_data, auth) {
        return refuse(conn, cx, &format!("signin: {e}"));
    }
    let id = match names::parse_user_data(user_data) {
        Ok(id) => id,
        Err(why) => return refuse(conn, cx, &format!("signin: {why}")),
    };
    let namespace = cx.config.access.pusher.namespace(app_index);
    let channel = names::user_channel(&namespace, auth::pusher_user_key(&id));
    cx.credentials.pusher.sign_in(cx.key, user_data);
    if let Err(refused) = channels::subscribe_as(conn, cx, &channel, None, false, None) {
        pusher::error(cx, None, &format!("signin: {}", refused.why));
    }
}

fn refuse(conn: &mut Connection, cx: &mut Cx, why: &str) {
    pusher::send(cx, |out| {
        wire::pusher::write_error(out, Some(code::REFUSED), why)
    });
    pusher::close(conn, cx, code::REFUSED, why);
}

/// The user's channel is joined: `pusher:signin_success` with the `user_data`.
pub(super) fn signed_in(cx: &mut Cx) {
    let Some(user_data) = cx.credentials.pusher.user_data(cx.key) else {
        return;
    };
    let data = serde_json::json!({ "user_data": user_data }).to_string();
    pusher::send(cx, |out| {
        wire::pusher::write_event(out, "pusher:signin_success", None, &data)
    });
}

/// pusher-js subscribes to `#server-to-user-<its own id>` after a sign-in: that
/// is the user's channel, joined already; any other user's is refused.
pub(super) fn subscribe_to_self(cx: &mut Cx, channel: &str) {
    let own = (cx.credentials.pusher.user_data(cx.key))
        .and_then(|d| names::parse_user_data(d).ok())
        .is_some_and(|id| channel.strip_prefix(SERVER_TO_USER) == Some(id.as_str()));
    match own {
        true => pusher::subscription_succeeded(cx, channel, "{}"),
        false => {
            pusher::subscription_error(cx, channel, "AuthError", "sign in as this user first", 403)
        }
    }
}

/// A message of a user's internal channel that is not an event: a terminate,
/// which closes the connection with 4009 after saying why. True when it was one.
pub(super) fn control(conn: &mut Connection, cx: &mut Cx, channel: &str, payload: &[u8]) -> bool {
    if !names::is_user_channel(channel) || payload != names::TERMINATE {
        return false;
    }
    let why = "the app terminated this user's connections";
    pusher::send(cx, |out| {
        wire::pusher::write_error(out, Some(code::REFUSED), why)
    });
    pusher::close(conn, cx, code::REFUSED, why);
    true
}
