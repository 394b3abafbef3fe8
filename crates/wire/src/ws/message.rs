//! Fragmentation and UTF-8 state across the frames of one connection
//! (RFC 6455 5.4 and 8.1), in one byte.
//!
//! Text messages are validated as UTF-8. An unfragmented text frame is checked
//! whole. Fragmented text is checked incrementally, fragment by fragment: the byte
//! keeps the state of a small UTF-8 automaton (which continuation bytes the next
//! byte may be), so a code point split across fragments is accepted and an invalid
//! sequence fails on the fragment that contains it, without buffering anything.
//! Not here: bounding the total size of a fragmented message (the gateway ignores
//! client data messages; each frame is bounded by `parse_ws_frame`).

use super::{Opcode, WsError, WsFrame};

/// Bits 0–1: the open message (none, text, binary). Bits 2–4: UTF-8 automaton state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WsMessageState(u8);

const OPEN_MASK: u8 = 0b11;
const OPEN_NONE: u8 = 0;
const OPEN_TEXT: u8 = 1;
const OPEN_BINARY: u8 = 2;

/// UTF-8 automaton states: what the next byte must be (RFC 3629 table).
mod utf8 {
    /// Between characters.
    pub const ACCEPT: u8 = 0;
    /// One continuation byte 80..BF left.
    pub const NEED1: u8 = 1;
    /// Two continuation bytes 80..BF left.
    pub const NEED2: u8 = 2;
    /// After E0: A0..BF then one more.
    pub const E0: u8 = 3;
    /// After ED: 80..9F then one more (no surrogates).
    pub const ED: u8 = 4;
    /// After F0: 90..BF then two more.
    pub const F0: u8 = 5;
    /// After F4: 80..8F then two more (≤ U+10FFFF).
    pub const F4: u8 = 6;
    /// After F1..F3: 80..BF then two more.
    pub const NEED3: u8 = 7;

    /// Next state after byte `b`, or `None` if `b` cannot follow.
    pub fn step(state: u8, b: u8) -> Option<u8> {
        let cont = |lo: u8, hi: u8, next: u8| (lo..=hi).contains(&b).then_some(next);
        match state {
            ACCEPT => match b {
                0x00..=0x7f => Some(ACCEPT),
                0xc2..=0xdf => Some(NEED1),
                0xe0 => Some(E0),
                0xed => Some(ED),
                0xe1..=0xec | 0xee..=0xef => Some(NEED2),
                0xf0 => Some(F0),
                0xf1..=0xf3 => Some(NEED3),
                0xf4 => Some(F4),
                _ => None,
            },
            NEED1 => cont(0x80, 0xbf, ACCEPT),
            NEED2 => cont(0x80, 0xbf, NEED1),
            E0 => cont(0xa0, 0xbf, NEED1),
            ED => cont(0x80, 0x9f, NEED1),
            F0 => cont(0x90, 0xbf, NEED2),
            F4 => cont(0x80, 0x8f, NEED2),
            NEED3 => cont(0x80, 0xbf, NEED2),
            _ => None,
        }
    }
}

impl WsMessageState {
    /// A connection with no message open.
    pub fn new() -> Self {
        WsMessageState(0)
    }

    /// True while a fragmented message is open.
    pub fn in_message(&self) -> bool {
        self.0 & OPEN_MASK != OPEN_NONE
    }

    /// Accounts for one parsed client frame. Control frames may arrive between
    /// fragments and do not change the state.
    pub fn handle_frame(&mut self, frame: &WsFrame) -> Result<(), WsError> {
        let open = self.0 & OPEN_MASK;
        match frame.opcode {
            Opcode::Close | Opcode::Ping | Opcode::Pong => Ok(()),
            Opcode::Text | Opcode::Binary if open != OPEN_NONE => Err(WsError::MessageNotFinished),
            Opcode::Continuation if open == OPEN_NONE => Err(WsError::UnexpectedContinuation),
            Opcode::Text if frame.fin => {
                std::str::from_utf8(&frame.payload).map_err(|_| WsError::InvalidUtf8)?;
                Ok(())
            }
            Opcode::Binary if frame.fin => Ok(()),
            Opcode::Text => {
                let st = feed_utf8(utf8::ACCEPT, &frame.payload)?;
                self.0 = OPEN_TEXT | (st << 2);
                Ok(())
            }
            Opcode::Binary => {
                self.0 = OPEN_BINARY;
                Ok(())
            }
            Opcode::Continuation => {
                if open == OPEN_TEXT {
                    let st = feed_utf8(self.0 >> 2, &frame.payload)?;
                    if frame.fin && st != utf8::ACCEPT {
                        return Err(WsError::InvalidUtf8);
                    }
                    self.0 = OPEN_TEXT | (st << 2);
                }
                if frame.fin {
                    self.0 = 0;
                }
                Ok(())
            }
        }
    }
}

/// Runs the automaton over `bytes` from `state`: byte by byte until back between
/// characters, then the standard library's validator for the bulk, then the
/// automaton again for a sequence cut at the end.
fn feed_utf8(mut state: u8, bytes: &[u8]) -> Result<u8, WsError> {
    let mut i = 0;
    while state != utf8::ACCEPT && i < bytes.len() {
        state = utf8::step(state, bytes[i]).ok_or(WsError::InvalidUtf8)?;
        i += 1;
    }
    let rest = &bytes[i..];
    match std::str::from_utf8(rest) {
        Ok(_) => Ok(state),
        Err(e) if e.error_len().is_some() => Err(WsError::InvalidUtf8),
        Err(e) => rest[e.valid_up_to()..]
            .iter()
            .try_fold(utf8::ACCEPT, |s, &b| utf8::step(s, b))
            .ok_or(WsError::InvalidUtf8),
    }
}

#[cfg(test)]
#[path = "message_tests.rs"]
mod tests;
