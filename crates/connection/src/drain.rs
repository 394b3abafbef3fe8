//! Graceful drain (`SIGTERM`, `--drain SECONDS`): each connection is told to go
//! elsewhere in its own protocol's words, then closed once those bytes are out. The
//! pump spreads the calls over the drain period so clients do not all reconnect at
//! once.
//!
//! | state | goodbye |
//! |---|---|
//! | chunked stream | the final chunk (`0\r\n\r\n`): a complete response, not a cut |
//! | SSE | `event: reconnect` and a `retry:` advice, then EOF (EventSource reconnects) |
//! | WebSocket | close frame 1012 "service restart" |
//! | Pusher client (`/app/<key>`) | close frame 4200 (pusher-js reconnects at once) |
//! | waiting long-poll | its empty answer with `Connection: close` |
//! | idle keep-alive, partial head | closed |
//! | API call or login in flight | answered, then closed (keep-alive off) |

use super::{reply, Connection, Cx, State, HTTP10, KEEP_ALIVE, WS_CLOSE_SENT};

/// The SSE event that tells a client to reconnect (to another server).
const SSE_RECONNECT: &[u8] = b"event: reconnect\ndata: {}\n\n";

/// WebSocket close code 1012 (IANA registry): the service is restarting; try again.
pub const WS_SERVICE_RESTART: u16 = 1012;

pub(super) fn handle(conn: &mut Connection, cx: &mut Cx) {
    conn.set(KEEP_ALIVE, false);
    match conn.state {
        State::Stream => {
            // A close-delimited (HTTP/1.0) body simply ends with the connection.
            if !conn.has(HTTP10) {
                cx.out.send_static(wire::STREAM_END);
            }
            conn.start_closing(cx);
        }
        State::Sse => {
            cx.out.send_static(SSE_RECONNECT);
            let retry = cx.config.sse_retry_ms;
            cx.out
                .write(|out| out.extend_from_slice(format!("retry: {retry}\n\n").as_bytes()));
            conn.start_closing(cx);
        }
        State::WebSocket if crate::pusher::is(cx) => crate::pusher::drain(conn, cx),
        State::WebSocket => {
            if !conn.has(WS_CLOSE_SENT) {
                conn.set(WS_CLOSE_SENT, true);
                cx.out.write(|out| {
                    wire::write_ws_close(out, WS_SERVICE_RESTART, "server restarting")
                });
            }
            conn.start_closing(cx);
        }
        State::PollWaiting => reply::answer_poll_timeout(conn, cx),
        State::Head | State::Idle => cx.out.close_now(),
        // Finishes its request; the response closes the connection.
        State::Body
        | State::Calling(_)
        | State::Controlling
        | State::SubscribingStream
        | State::SubscribingSse
        | State::SubscribingWebSocket
        | State::Polling
        | State::Closing => {}
    }
}
