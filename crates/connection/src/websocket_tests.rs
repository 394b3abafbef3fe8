//! WebSocket in the core: the handshake, fragmented messages with control frames
//! between them, pong and ping heartbeats, the close handshake, protocol errors closing with
//! their code, and frames that arrive before the login's reply.

use super::harness::{history, Harness};
use super::*;

const UPGRADE: &str =
    "GET /ws/9 HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

fn client_frame(op: wire::Opcode, fin: bool, payload: &[u8]) -> Vec<u8> {
    wire::ws_client_frame(op, fin, [1, 2, 3, 4], payload)
}

#[test]
fn websocket_handshake_fragments_control_frames_and_close() {
    use wire::Opcode::*;
    let (mut h, step) = Harness::subscribed(UPGRADE, history(0, &[], false));
    assert_eq!(
        step.text(),
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
    );
    let (_, step) = h.deliver(1, b"hey");
    assert_eq!(step.bytes, b"\x81\x03hey");
    assert_eq!(
        h.fire_timer().bytes,
        b"\x8a\x00",
        "an unsolicited pong heartbeat (the default)"
    );
    h.config.ws_heartbeat = WsHeartbeat::Ping;
    assert_eq!(
        h.fire_timer().bytes,
        b"\x89\x00",
        "a ping heartbeat (--ws-heartbeat ping)"
    );
    // A fragmented text message with a ping between its fragments, in pieces.
    let mut input = client_frame(Text, false, b"a");
    input.extend(client_frame(Ping, true, b"p"));
    input.extend(client_frame(Continuation, true, b"b"));
    let (first, second) = input.split_at(5);
    assert!(h.bytes(first).bytes.is_empty());
    assert_eq!(h.bytes(second).bytes, b"\x8a\x01p", "pong echoes the ping");
    // The client closes: the code is echoed, then we wait for its EOF.
    let step = h.bytes(&client_frame(Close, true, &1000u16.to_be_bytes()));
    assert_eq!(step.bytes, b"\x88\x02\x03\xe8");
    assert!(h.conn.is_closing());
}

#[test]
fn websocket_protocol_errors_close_with_their_code() {
    let (mut h, _) = Harness::subscribed(UPGRADE, history(0, &[], false));
    // Unmasked client frame: 1002.
    let step = h.bytes(b"\x81\x01x");
    assert_eq!(&step.bytes[2..4], &1002u16.to_be_bytes());
    assert_eq!(step.bytes[..2], [0x88, step.bytes.len() as u8 - 2]);
    assert!(h.conn.is_closing());
    let (mut h, _) = Harness::subscribed(UPGRADE, history(0, &[], false));
    let step = h.bytes(&client_frame(wire::Opcode::Text, true, b"\xff"));
    assert_eq!(&step.bytes[2..4], &1007u16.to_be_bytes(), "invalid UTF-8");
}

#[test]
fn frames_sent_before_the_login_reply_are_read_after_it() {
    let mut h = Harness::new();
    let mut input = UPGRADE.as_bytes().to_vec();
    input.extend(client_frame(wire::Opcode::Ping, true, b"early"));
    h.bytes(&input);
    let step = h.reply(Reply::History(history(0, &[], false)));
    assert!(step.resume);
    assert_eq!(h.bytes(b"").bytes, b"\x8a\x05early");
}
