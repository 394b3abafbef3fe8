//! A connection's token stops being valid (`exp` plus the leeway, see `auth`):
//! the connection ends, each transport in its own words, and its client connects
//! again with a new token (a WebSocket client may refresh in place before that,
//! `refresh`). Its `pub` rights end on the same second, before the close is out
//! (`websocket` checks [`expired`] before a client message is acted on).
//!
//! | state | goodbye |
//! |---|---|
//! | chunked stream | a last chunk, the line `token expired`, then the final chunk `0\r\n\r\n` (HTTP/1.0: the line, then close) |
//! | SSE | `event: expired` with `data: {"reason":"token expired"}`, then the end of the stream |
//! | WebSocket | close frame [`WS_TOKEN_EXPIRED`] (4001) "token expired" |
//! | waiting long-poll | 401 `token expired` with `WWW-Authenticate: Bearer error="invalid_token"` (keep-alive kept) |
//! | subscription or long-poll whose login is in flight | 401 `token expired`, then close |
//!
//! Other states hold no token (API calls, idle keep-alive) and are left alone.

use super::{Connection, Cx, State, HTTP10, KEEP_ALIVE, WS_CLOSE_SENT};

/// WebSocket close code 4001 (private range, RFC 6455 7.4.2): the token the
/// connection was let in with has expired; connect again with a new one (or send a
/// refresh before it expires).
pub const WS_TOKEN_EXPIRED: u16 = 4001;

/// The line that ends a chunked stream whose token expired.
const STREAM_EXPIRED: &[u8] = b"token expired";

/// The SSE event that ends a stream whose token expired.
const SSE_EXPIRED: &[u8] = b"event: expired\ndata: {\"reason\":\"token expired\"}\n\n";

/// What a 401 for an expired token says.
const EXPIRED: &str = "token expired";

/// Whether the connection's token has expired at the core's clock.
pub(super) fn expired(cx: &Cx) -> bool {
    cx.credentials.expired(cx.key, cx.unix_now())
}

pub(super) fn handle(conn: &mut Connection, cx: &mut Cx) {
    match conn.state {
        State::Stream => {
            if conn.has(HTTP10) {
                cx.out
                    .write(|out| wire::write_stream_line(out, &[STREAM_EXPIRED]));
            } else {
                cx.out
                    .write(|out| wire::write_stream_message(out, STREAM_EXPIRED));
                cx.out.send_static(wire::STREAM_END);
            }
            conn.set(KEEP_ALIVE, false);
            conn.start_closing(cx);
        }
        State::Sse => {
            cx.out.send_static(SSE_EXPIRED);
            conn.set(KEEP_ALIVE, false);
            conn.start_closing(cx);
        }
        State::WebSocket => {
            if !conn.has(WS_CLOSE_SENT) {
                conn.set(WS_CLOSE_SENT, true);
                cx.out
                    .write(|out| wire::write_ws_close(out, WS_TOKEN_EXPIRED, EXPIRED));
            }
            conn.start_closing(cx);
        }
        State::PollWaiting => {
            if let Some(p) = conn.pending.as_mut() {
                p.poll_since = None;
                p.poll_epoch = None;
            }
            let keep = conn.has(KEEP_ALIVE);
            conn.respond(cx, keep, |out| {
                let challenge = [("WWW-Authenticate", "Bearer error=\"invalid_token\"")];
                wire::write_error_response(out, 401, EXPIRED, keep, &challenge)
            });
            conn.tidy();
        }
        State::SubscribingStream
        | State::SubscribingSse
        | State::SubscribingWebSocket
        | State::Polling => conn.fail(cx, 401, EXPIRED),
        // A POST for another stream carries no token of its own.
        State::Head
        | State::Body
        | State::Idle
        | State::Calling(_)
        | State::Controlling
        | State::Closing => {}
    }
}
