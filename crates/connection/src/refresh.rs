//! Token refresh over WebSocket: a text frame `{"refresh":"<jwt>"}` replaces the
//! token a subscription was let in with, so the connection outlives the first
//! token's `exp` (see `expiry`). The new token is checked like the first (signature,
//! time, `--jwt-issuer`/`--jwt-audience`) and must name the same user; its `pub`
//! claim replaces the old one (none: the connection may no longer publish), its
//! `exp` sets when the connection ends.
//!
//! Answers are text frames, like a client publish's (`client_publish`):
//! `{"refreshed":{"valid_until":<unix seconds>|null}}` — the second the new token
//! stops being accepted, when the connection will end unless refreshed again — or
//! `{"error":"refresh refused: <why>"}`. A refused refresh is a failed
//! authentication: at [`MAX_AUTH_FAILURES`] the connection is closed with
//! [`WS_AUTH_FAILURES`] instead.
//!
//! Not here: other client messages (`websocket`, `client_publish`).

use super::client_publish::{self, Publisher};
use super::credentials::MAX_AUTH_FAILURES;
use super::{Connection, Cx, LOGGED_IN, WS_CLOSE_SENT};
use serde::Deserialize;

/// WebSocket close code 4003 (private range): too many failed authentications on
/// this connection ([`MAX_AUTH_FAILURES`]); connect again with a valid token.
pub const WS_AUTH_FAILURES: u16 = 4003;

/// A refresh request frame, typed (unknown keys refused).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefreshFrame {
    refresh: String,
}

/// A complete text message from the client. True when it was a refresh request
/// (answered here).
pub(super) fn handle_text(conn: &mut Connection, cx: &mut Cx, text: &[u8]) -> bool {
    // Cheap test first: most messages are not refreshes.
    if !text.windows(9).any(|w| w == b"\"refresh\"") {
        return false;
    }
    let Ok(frame) = serde_json::from_slice::<RefreshFrame>(text) else {
        refuse(
            conn,
            cx,
            "bad refresh frame: want {\"refresh\":\"<token>\"}",
        );
        return true;
    };
    let Some(verifier) = &cx.config.access.jwt else {
        // Not an authentication that failed: this server takes no tokens at all.
        client_publish::error(cx, "refresh refused: this server takes no tokens");
        return true;
    };
    // Checked as the connection was let in: for its user, or for channels only.
    let token = Some(frame.refresh.as_str());
    let checked = match conn.has(LOGGED_IN) {
        true => verifier.authorize_subscribe(token, conn.user, cx.unix_now()),
        false => verifier.authorize_channels(token, cx.unix_now()),
    };
    let grant = match checked {
        Ok(grant) => grant,
        Err(e) => {
            refuse(conn, cx, &e.to_string());
            return true;
        }
    };
    cx.credentials.set_expiry(cx.key, grant.valid_until);
    // Later subscribes follow the new token's `chan` claim.
    super::channels::regrant(conn, cx, super::channels::Access::of(&grant));
    let now = cx.now;
    let p = conn.pending();
    p.publisher = Publisher::regrant(
        p.publisher.take(),
        (grant.publish, grant.publish_channels),
        now,
    );
    conn.tidy();
    let until = grant
        .valid_until
        .map_or("null".to_string(), |t| t.to_string());
    let text = format!(r#"{{"refreshed":{{"valid_until":{until}}}}}"#);
    cx.out
        .write(|out| wire::write_ws_frame(out, wire::Opcode::Text, text.as_bytes()));
    true
}

/// A refused refresh: an error frame, or at the last allowed failure the close.
fn refuse(conn: &mut Connection, cx: &mut Cx, why: &str) {
    if cx.credentials.fail(cx.key) < MAX_AUTH_FAILURES {
        return client_publish::error(cx, &format!("refresh refused: {why}"));
    }
    conn.set(WS_CLOSE_SENT, true);
    cx.out.write(|out| {
        wire::write_ws_close(out, WS_AUTH_FAILURES, "too many failed authentications")
    });
    conn.start_closing(cx);
}
