//! Client frames on a WebSocket subscription (A4): pings are answered, a close is
//! echoed, a text frame may be a token refresh (`refresh`) or a client publish (C7,
//! `client_publish`), other data frames are validated and ignored; protocol errors
//! close with the RFC 6455 code. After the token has expired a text message is
//! answered `{"error":"token expired"}` and the connection ends (`expiry`), even if
//! the loop's timer has not ended it yet.

use super::{channels, client_publish, expiry, refresh, Connection, Consumed, Cx, WS_CLOSE_SENT};
use wire::{Opcode, WsFrame};

pub(super) fn handle_frame_bytes(conn: &mut Connection, cx: &mut Cx, buf: &[u8]) -> Consumed {
    match wire::parse_ws_frame(buf, cx.config.max_message) {
        Ok(None) => Consumed::Wait,
        Ok(Some((frame, n))) => {
            handle_frame(conn, cx, frame);
            Consumed::Bytes(n)
        }
        Err(e) => {
            fail(conn, cx, e.close_code(), &e.to_string());
            Consumed::All
        }
    }
}

fn handle_frame(conn: &mut Connection, cx: &mut Cx, frame: WsFrame) {
    if let Err(e) = conn.ws.handle_frame(&frame) {
        return fail(conn, cx, e.close_code(), &e.to_string());
    }
    match frame.opcode {
        Opcode::Ping => cx
            .out
            .write(|out| wire::write_ws_frame(out, Opcode::Pong, &frame.payload)),
        Opcode::Close => {
            if conn.has(WS_CLOSE_SENT) {
                // Our close was answered: the handshake is complete.
                return cx.out.close_now();
            }
            // Echo the peer's status code (RFC 6455 5.5.1), then close. The parser
            // has checked that a non-empty close payload starts with a valid code.
            let code = match frame.payload.len() {
                0 => 1000,
                _ => u16::from_be_bytes([frame.payload[0], frame.payload[1]]),
            };
            conn.set(WS_CLOSE_SENT, true);
            cx.out.write(|out| wire::write_ws_close(out, code, ""));
            conn.start_closing(cx);
        }
        // A Pusher client speaks only Pusher's events (`pusher`).
        Opcode::Text if frame.fin && super::pusher::is(cx) => {
            super::pusher::handle_text(conn, cx, &frame.payload)
        }
        // The token's rights end on its second, not when the timer gets round.
        Opcode::Text if frame.fin && expiry::expired(cx) => {
            client_publish::error(cx, "token expired");
            expiry::handle(conn, cx);
        }
        // An unfragmented text message may be a refresh or a client publish (C7).
        Opcode::Text if frame.fin => {
            if !refresh::handle_text(conn, cx, &frame.payload)
                && !channels::handle_control(conn, cx, &frame.payload)
            {
                client_publish::handle_text(conn, cx, &frame.payload);
            }
        }
        // Other client messages are accepted and ignored; pongs need nothing.
        Opcode::Text | Opcode::Binary | Opcode::Continuation | Opcode::Pong => {}
    }
}

/// A protocol error: a close frame with the RFC 6455 code, then close.
fn fail(conn: &mut Connection, cx: &mut Cx, code: u16, reason: &str) {
    conn.set(WS_CLOSE_SENT, true);
    cx.out.write(|out| wire::write_ws_close(out, code, reason));
    conn.start_closing(cx);
}
