//! Client frames in (RFC 6455 5.2–5.5): one frame from the start of a slice.
//!
//! Checks run as soon as the bytes they need are present, so a hostile header is
//! refused without waiting for (or buffering) its payload. Invariant relied on by
//! the fuzz tests: if a buffer yields an error, every longer buffer with the same
//! prefix yields the same error, and a prefix yields `Ok(None)` or that error.

use super::{is_valid_close_code, Opcode, WsError};

/// One parsed client frame, payload already unmasked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WsFrame {
    pub fin: bool,
    pub opcode: Opcode,
    pub payload: Vec<u8>,
}

/// Parses one client frame from the start of `buf`. `Ok(None)`: incomplete, read
/// more. `Ok(Some((frame, consumed)))`: `buf[consumed..]` starts the next frame.
///
/// Validates: MASK set, RSV bits zero, known opcode, control frames FIN and ≤ 125
/// bytes, minimal length encoding, 64-bit length top bit clear, payload ≤
/// `max_payload`, close payload (code per RFC 6455 7.4, reason UTF-8). Text UTF-8
/// is checked by [`super::WsMessageState`], which knows about fragments.
pub fn parse_ws_frame(buf: &[u8], max_payload: usize) -> Result<Option<(WsFrame, usize)>, WsError> {
    let [b0, b1, ..] = *buf else {
        return Ok(None);
    };
    let fin = b0 & 0x80 != 0;
    if b0 & 0x70 != 0 {
        return Err(WsError::ReservedBits);
    }
    let opcode = Opcode::from_bits(b0 & 0x0f).ok_or(WsError::UnknownOpcode(b0 & 0x0f))?;
    if opcode.is_control() && !fin {
        return Err(WsError::FragmentedControl);
    }
    if b1 & 0x80 == 0 {
        return Err(WsError::Unmasked);
    }
    let len7 = b1 & 0x7f;
    if opcode.is_control() && len7 > 125 {
        return Err(WsError::ControlTooLong);
    }
    let (len, mut pos) = match len7 {
        126 => {
            let Some(ext) = buf.get(2..4) else {
                return Ok(None);
            };
            let len = u64::from(u16::from_be_bytes([ext[0], ext[1]]));
            if len < 126 {
                return Err(WsError::NonMinimalLength);
            }
            (len, 4)
        }
        127 => {
            let Some(ext) = buf.get(2..10) else {
                return Ok(None);
            };
            // The slice is exactly 8 bytes long.
            let len = u64::from_be_bytes(ext.try_into().expect("8 bytes"));
            if len >> 63 != 0 {
                return Err(WsError::LengthTopBit);
            }
            if len <= 0xffff {
                return Err(WsError::NonMinimalLength);
            }
            (len, 10)
        }
        n => (u64::from(n), 2),
    };
    if len > max_payload as u64 {
        return Err(WsError::TooBig);
    }
    // len <= max_payload, a usize.
    let len = len as usize;
    let Some(mask) = buf.get(pos..pos + 4) else {
        return Ok(None);
    };
    let mask = [mask[0], mask[1], mask[2], mask[3]];
    pos += 4;
    let Some(masked) = buf.get(pos..pos + len) else {
        return Ok(None);
    };
    let payload: Vec<u8> = masked
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ mask[i & 3])
        .collect();
    if opcode == Opcode::Close {
        validate_close_payload(&payload)?;
    }
    Ok(Some((
        WsFrame {
            fin,
            opcode,
            payload,
        },
        pos + len,
    )))
}

/// RFC 6455 5.5.1: empty, or a valid 2-byte code followed by a UTF-8 reason.
fn validate_close_payload(p: &[u8]) -> Result<(), WsError> {
    match p.len() {
        0 => Ok(()),
        1 => Err(WsError::CloseTooShort),
        _ => {
            let code = u16::from_be_bytes([p[0], p[1]]);
            if !is_valid_close_code(code) {
                return Err(WsError::BadCloseCode(code));
            }
            std::str::from_utf8(&p[2..]).map_err(|_| WsError::InvalidUtf8)?;
            Ok(())
        }
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
