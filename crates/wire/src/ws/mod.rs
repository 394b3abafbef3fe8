//! WebSocket (RFC 6455, A4): the opening handshake answer, server frames out,
//! client frames in, and the per-connection fragmentation state.
//!
//! Framing is hand-rolled on purpose: the gateway keeps no per-connection buffers
//! (budget ≤ 256 B per idle connection) and parses client frames straight out of a
//! per-loop scratch buffer, so the parser is a pure function of a byte slice
//! (`Ok(None)` = not enough bytes yet) and the only state carried between frames is
//! [`WsMessageState`], one byte. Not here: extensions (no permessage-deflate is
//! negotiated, so RSV bits must be zero) and subprotocols.

mod encode;
mod handshake;
mod message;
mod parse;

pub use encode::{
    write_ws_client_frame, write_ws_close, write_ws_frame, write_ws_position, ws_client_frame,
    ws_message_opcode, MAX_CONTROL_PAYLOAD,
};
pub use handshake::{write_ws_handshake, ws_accept_key};
pub use message::WsMessageState;
pub use parse::{parse_ws_frame, WsFrame};

/// A frame's opcode (RFC 6455 5.2; reserved opcodes are a protocol error).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Opcode {
    Continuation,
    Text,
    Binary,
    Close,
    Ping,
    Pong,
}

impl Opcode {
    /// The 4-bit wire value.
    pub fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }

    /// The opcode for a 4-bit wire value, `None` for reserved values.
    pub fn from_bits(bits: u8) -> Option<Opcode> {
        Some(match bits {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    /// Close, Ping and Pong: at most 125 bytes, never fragmented.
    pub fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// Why a client frame or message was refused; the connection is then closed with
/// [`WsError::close_code`] (table in RFC 6455 7.4.1).
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsError {
    #[error("client frame not masked")]
    Unmasked,
    #[error("reserved bits set (no extension negotiated)")]
    ReservedBits,
    #[error("reserved opcode {0:#x}")]
    UnknownOpcode(u8),
    #[error("fragmented control frame")]
    FragmentedControl,
    #[error("control frame payload over 125 bytes")]
    ControlTooLong,
    #[error("payload length not minimally encoded")]
    NonMinimalLength,
    #[error("64-bit payload length with the top bit set")]
    LengthTopBit,
    #[error("frame payload too big")]
    TooBig,
    #[error("close frame with a 1-byte payload")]
    CloseTooShort,
    #[error("invalid close code {0}")]
    BadCloseCode(u16),
    #[error("invalid UTF-8 in text message or close reason")]
    InvalidUtf8,
    #[error("continuation frame without a started message")]
    UnexpectedContinuation,
    #[error("new data frame while a fragmented message is open")]
    MessageNotFinished,
}

impl WsError {
    /// The close code to send: 1009 message too big, 1007 invalid UTF-8, else
    /// 1002 protocol error.
    pub fn close_code(&self) -> u16 {
        match self {
            WsError::TooBig => 1009,
            WsError::InvalidUtf8 => 1007,
            _ => 1002,
        }
    }
}

/// True for close codes a peer may send (RFC 6455 7.4.1/7.4.2 and the IANA
/// registry): 1000–1003, 1007–1014, and 3000–4999 for libraries and applications.
/// 1004–1006 and 1015 are reserved and must never appear on the wire.
pub fn is_valid_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_bits_round_trip() {
        for bits in 0..16u8 {
            match Opcode::from_bits(bits) {
                Some(op) => assert_eq!(op.bits(), bits),
                None => assert!(matches!(bits, 3..=7 | 0xb..=0xf), "{bits}"),
            }
        }
        assert!(Opcode::Ping.is_control() && !Opcode::Continuation.is_control());
    }

    #[test]
    fn close_codes() {
        let valid: Vec<u16> = (0..=u16::MAX).filter(|&c| is_valid_close_code(c)).collect();
        assert_eq!(valid.len(), 4 + 8 + 2000);
        assert!(is_valid_close_code(1000) && is_valid_close_code(4999));
        assert!(!is_valid_close_code(1005) && !is_valid_close_code(2000));
    }

    #[test]
    fn error_close_codes() {
        assert_eq!(WsError::Unmasked.close_code(), 1002);
        assert_eq!(WsError::TooBig.close_code(), 1009);
        assert_eq!(WsError::InvalidUtf8.close_code(), 1007);
        assert_eq!(WsError::UnknownOpcode(3).to_string(), "reserved opcode 0x3");
    }
}
