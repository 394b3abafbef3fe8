//! Server frames (RFC 6455 5.2): FIN set, unmasked (servers must not mask),
//! minimal length encoding. Each message is encoded once and shared by recipients.

use super::Opcode;

/// Largest control frame payload (RFC 6455 5.5); longer inputs are truncated.
pub const MAX_CONTROL_PAYLOAD: usize = 125;

fn frame(opcode: Opcode, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut out = Vec::with_capacity(len + 10);
    out.push(0x80 | opcode.bits());
    if len < 126 {
        out.push(len as u8);
    } else if let Ok(len16) = u16::try_from(len) {
        out.push(126);
        out.extend_from_slice(&len16.to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(payload);
    out
}

/// A complete text message. The payload should be UTF-8; it is not checked here
/// because published payloads are passed through as they came.
pub fn ws_text_frame(payload: &[u8]) -> Vec<u8> {
    frame(Opcode::Text, payload)
}

/// A complete binary message.
pub fn ws_binary_frame(payload: &[u8]) -> Vec<u8> {
    frame(Opcode::Binary, payload)
}

/// A ping (payload truncated to 125 bytes).
pub fn ws_ping(payload: &[u8]) -> Vec<u8> {
    frame(
        Opcode::Ping,
        &payload[..payload.len().min(MAX_CONTROL_PAYLOAD)],
    )
}

/// A pong, echoing a ping's payload (truncated to 125 bytes).
pub fn ws_pong(payload: &[u8]) -> Vec<u8> {
    frame(
        Opcode::Pong,
        &payload[..payload.len().min(MAX_CONTROL_PAYLOAD)],
    )
}

/// A close frame with `code` and `reason` (cut at a character boundary to fit in
/// 125 bytes). Code 1005 ("no status") sends an empty close payload, as the RFC
/// forbids putting 1005 on the wire.
pub fn ws_close(code: u16, reason: &str) -> Vec<u8> {
    if code == 1005 {
        return frame(Opcode::Close, &[]);
    }
    let mut cut = reason.len().min(MAX_CONTROL_PAYLOAD - 2);
    while !reason.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut payload = Vec::with_capacity(2 + cut);
    payload.extend_from_slice(&code.to_be_bytes());
    payload.extend_from_slice(&reason.as_bytes()[..cut]);
    frame(Opcode::Close, &payload)
}

/// A masked client frame, as a client sends it (for load tools and tests; the
/// server never masks). Length is minimally encoded.
pub fn ws_client_frame(opcode: Opcode, fin: bool, mask: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut out = frame(opcode, &[]);
    // `frame` wrote FIN|opcode and a zero length byte: redo the length, masked.
    out[0] = if fin { 0x80 } else { 0 } | opcode.bits();
    out.pop();
    let len = payload.len();
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if let Ok(len16) = u16::try_from(len) {
        out.push(0x80 | 126);
        out.extend_from_slice(&len16.to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
