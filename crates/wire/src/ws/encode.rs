//! Server frames (RFC 6455 5.2): FIN set, unmasked (servers must not mask),
//! minimal length encoding. Each message is encoded once and shared by recipients.

use super::Opcode;

/// Largest control frame payload (RFC 6455 5.5); longer inputs are truncated.
pub const MAX_CONTROL_PAYLOAD: usize = 125;

/// Appends a frame header: FIN, opcode, the (unmasked or masked) minimal length.
fn write_header(out: &mut Vec<u8>, fin: bool, opcode: Opcode, len: usize, masked: bool) {
    let mask_bit = if masked { 0x80 } else { 0 };
    out.push(if fin { 0x80 } else { 0 } | opcode.bits());
    if len < 126 {
        out.push(mask_bit | len as u8);
    } else if let Ok(len16) = u16::try_from(len) {
        out.push(mask_bit | 126);
        out.extend_from_slice(&len16.to_be_bytes());
    } else {
        out.push(mask_bit | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// Appends a complete (FIN) server frame. Control frames (close, ping, pong) have
/// their payload cut to 125 bytes (RFC 6455 5.5). A text payload should be UTF-8; it
/// is not checked here because published payloads are passed through as they came.
pub fn write_ws_frame(out: &mut Vec<u8>, opcode: Opcode, payload: &[u8]) {
    let payload = if opcode.is_control() {
        &payload[..payload.len().min(MAX_CONTROL_PAYLOAD)]
    } else {
        payload
    };
    out.reserve(payload.len() + 10);
    write_header(out, true, opcode, payload.len(), false);
    out.extend_from_slice(payload);
}

/// The opcode a published payload goes out with: text when it is UTF-8, binary
/// otherwise (a text frame with invalid UTF-8 makes standard clients close with 1007,
/// so one publisher could disconnect every subscriber of a subject).
pub fn ws_message_opcode(payload: &[u8]) -> Opcode {
    if std::str::from_utf8(payload).is_ok() {
        Opcode::Text
    } else {
        Opcode::Binary
    }
}

/// The text frame a resuming WebSocket (`?since=`, SPEC B6) gets right after the
/// handshake: `{"position":"<epoch>-<seq>","gap":<bool>}` (a bare `"<seq>"` while
/// the user has no history). The messages that follow are `seq + 1`, `seq + 2`, …
pub fn write_ws_position(out: &mut Vec<u8>, position: crate::Since, gap: bool) {
    let text = format!("{{\"position\":\"{position}\",\"gap\":{gap}}}");
    write_ws_frame(out, Opcode::Text, text.as_bytes());
}

/// Appends a close frame with `code` and `reason` (cut at a character boundary to
/// fit in 125 bytes). Code 1005 ("no status") sends an empty close payload, as the
/// RFC forbids putting 1005 on the wire.
pub fn write_ws_close(out: &mut Vec<u8>, code: u16, reason: &str) {
    if code == 1005 {
        write_header(out, true, Opcode::Close, 0, false);
        return;
    }
    let mut cut = reason.len().min(MAX_CONTROL_PAYLOAD - 2);
    while !reason.is_char_boundary(cut) {
        cut -= 1;
    }
    write_header(out, true, Opcode::Close, 2 + cut, false);
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(&reason.as_bytes()[..cut]);
}

/// Appends a masked client frame, as a client sends it (for load tools and tests;
/// the server never masks). Length is minimally encoded.
pub fn write_ws_client_frame(
    out: &mut Vec<u8>,
    opcode: Opcode,
    fin: bool,
    mask: [u8; 4],
    payload: &[u8],
) {
    out.reserve(payload.len() + 14);
    write_header(out, fin, opcode, payload.len(), true);
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
}

/// [`write_ws_client_frame`] into a new buffer: for load tools and tests, where one
/// allocation per client frame does not matter.
pub fn ws_client_frame(opcode: Opcode, fin: bool, mask: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_ws_client_frame(&mut out, opcode, fin, mask, payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(opcode: Opcode, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_ws_frame(&mut out, opcode, payload);
        out
    }
    fn ws_text_frame(payload: &[u8]) -> Vec<u8> {
        frame(Opcode::Text, payload)
    }
    fn ws_binary_frame(payload: &[u8]) -> Vec<u8> {
        frame(Opcode::Binary, payload)
    }
    fn ws_ping(payload: &[u8]) -> Vec<u8> {
        frame(Opcode::Ping, payload)
    }
    fn ws_pong(payload: &[u8]) -> Vec<u8> {
        frame(Opcode::Pong, payload)
    }
    fn ws_close(code: u16, reason: &str) -> Vec<u8> {
        let mut out = Vec::new();
        write_ws_close(&mut out, code, reason);
        out
    }

    #[test]
    fn length_encodings() {
        assert_eq!(ws_text_frame(b"Hello"), b"\x81\x05Hello");
        let f = ws_text_frame(&[b'a'; 125]);
        assert_eq!(f[..2], [0x81, 125]);
        let f = ws_text_frame(&[b'a'; 126]);
        assert_eq!(f[..4], [0x81, 126, 0, 126]);
        assert_eq!(f.len(), 4 + 126);
        let f = ws_binary_frame(&[0; 65535]);
        assert_eq!(f[..4], [0x82, 126, 0xff, 0xff]);
        let f = ws_text_frame(&[0; 65536]);
        assert_eq!(f[..10], [0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(f.len(), 10 + 65536);
    }

    #[test]
    fn control_frames() {
        assert_eq!(ws_ping(b"hb"), b"\x89\x02hb");
        assert_eq!(ws_pong(b"hb"), b"\x8a\x02hb");
        assert_eq!(ws_ping(&[7; 300]).len(), 2 + 125);
        assert_eq!(ws_close(1000, "bye"), b"\x88\x05\x03\xe8bye");
        assert_eq!(ws_close(1005, "ignored"), b"\x88\x00");
    }

    #[test]
    fn close_reason_is_cut_on_a_char_boundary() {
        let reason = "é".repeat(100); // 200 bytes
        let f = ws_close(1001, &reason);
        assert_eq!(f[1] as usize, f.len() - 2);
        assert!(f.len() - 2 <= MAX_CONTROL_PAYLOAD);
        assert!(std::str::from_utf8(&f[4..]).is_ok());
        assert_eq!(f.len() - 4, 122);
    }
}
