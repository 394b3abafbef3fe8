//! One HTTP/2 frame from the front of a buffer, in two steps as everywhere in `wire`:
//! is a whole frame here (else `Ok(None)`, a normal value), then what it says. Every
//! violation the frame alone shows is a connection error with its RFC 9113 code;
//! what needs stream state (ids, windows) is the caller's to judge.

use super::{code, flag, kind, FRAME_HEADER};

/// A frame, borrowing its payload from the input.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Padding already removed.
    Data {
        stream: u32,
        end_stream: bool,
        data: &'a [u8],
        /// The whole payload length, padding included: what flow control counts.
        flow_len: u32,
    },
    /// A header block fragment; padding and priority fields already removed.
    Headers {
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        block: &'a [u8],
    },
    Continuation {
        stream: u32,
        end_headers: bool,
        block: &'a [u8],
    },
    RstStream {
        stream: u32,
        code: u32,
    },
    /// `params` holds whole 6-byte entries (see [`parse_settings`]).
    Settings {
        ack: bool,
        params: &'a [u8],
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        code: u32,
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    /// PRIORITY frames and unknown types: ignored (RFC 9113 5.5, 5.3.2).
    Ignored,
}

/// A connection error: GOAWAY with `code`, then close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("http/2 connection error {code:#x}: {reason}")]
pub struct FrameError {
    pub code: u32,
    pub reason: &'static str,
}

fn error(code: u32, reason: &'static str) -> FrameError {
    FrameError { code, reason }
}

/// One SETTINGS entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub id: u16,
    pub value: u32,
}

/// The entries of a SETTINGS payload (whole 6-byte entries: [`parse_frame`] checked).
pub fn parse_settings(params: &[u8]) -> impl Iterator<Item = Setting> + '_ {
    params.chunks_exact(6).map(|e| Setting {
        id: u16::from_be_bytes([e[0], e[1]]),
        value: u32::from_be_bytes([e[2], e[3], e[4], e[5]]),
    })
}

/// Parses the frame at the front of `buf` if it is all there: `Ok(Some((frame,
/// bytes used)))`, `Ok(None)` when more bytes are needed. `max_frame` is our
/// SETTINGS_MAX_FRAME_SIZE: a larger frame is a FRAME_SIZE_ERROR before its payload
/// arrives, so a peer cannot make us hold more than one frame's worth.
pub fn parse_frame(buf: &[u8], max_frame: u32) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    if buf.len() < FRAME_HEADER {
        return Ok(None);
    }
    let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]);
    let (ty, flags) = (buf[3], buf[4]);
    let stream = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
    if len > max_frame {
        return Err(error(
            code::FRAME_SIZE_ERROR,
            "frame larger than SETTINGS_MAX_FRAME_SIZE",
        ));
    }
    let total = FRAME_HEADER + len as usize;
    if buf.len() < total {
        return Ok(None);
    }
    let payload = &buf[FRAME_HEADER..total];
    let frame = decode(ty, flags, stream, payload)?;
    Ok(Some((frame, total)))
}

fn decode(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    let on_stream = |what| {
        if stream == 0 {
            Err(error(code::PROTOCOL_ERROR, what))
        } else {
            Ok(())
        }
    };
    let on_connection = |what| {
        if stream != 0 {
            Err(error(code::PROTOCOL_ERROR, what))
        } else {
            Ok(())
        }
    };
    Ok(match ty {
        kind::DATA => {
            on_stream("DATA on stream 0")?;
            Frame::Data {
                stream,
                end_stream: flags & flag::END_STREAM != 0,
                data: unpad(flags, payload)?,
                flow_len: payload.len() as u32,
            }
        }
        kind::HEADERS => {
            on_stream("HEADERS on stream 0")?;
            let mut block = unpad(flags, payload)?;
            if flags & flag::PRIORITY != 0 {
                if block.len() < 5 {
                    return Err(error(
                        code::FRAME_SIZE_ERROR,
                        "HEADERS too short for priority",
                    ));
                }
                if dependency(block) == stream {
                    return Err(error(code::PROTOCOL_ERROR, "a stream depends on itself"));
                }
                block = &block[5..];
            }
            Frame::Headers {
                stream,
                end_stream: flags & flag::END_STREAM != 0,
                end_headers: flags & flag::END_HEADERS != 0,
                block,
            }
        }
        kind::PRIORITY => {
            on_stream("PRIORITY on stream 0")?;
            if payload.len() != 5 {
                return Err(error(code::FRAME_SIZE_ERROR, "PRIORITY is not 5 bytes"));
            }
            // RFC 7540 5.3.1 (a stream error; RFC 9113 5.4.1 lets it close the
            // connection): the only part of priority the gateway checks.
            if dependency(payload) == stream {
                return Err(error(code::PROTOCOL_ERROR, "a stream depends on itself"));
            }
            Frame::Ignored
        }
        kind::RST_STREAM => {
            on_stream("RST_STREAM on stream 0")?;
            let code = u32_of(payload, 4, "RST_STREAM is not 4 bytes")?;
            Frame::RstStream { stream, code }
        }
        kind::SETTINGS => {
            on_connection("SETTINGS on a stream")?;
            let ack = flags & flag::ACK != 0;
            if ack && !payload.is_empty() {
                return Err(error(code::FRAME_SIZE_ERROR, "SETTINGS ack with a payload"));
            }
            if !payload.len().is_multiple_of(6) {
                return Err(error(
                    code::FRAME_SIZE_ERROR,
                    "SETTINGS not a multiple of 6",
                ));
            }
            for s in parse_settings(payload) {
                check_setting(s)?;
            }
            Frame::Settings {
                ack,
                params: payload,
            }
        }
        kind::PUSH_PROMISE => {
            return Err(error(code::PROTOCOL_ERROR, "PUSH_PROMISE from a client"))
        }
        kind::PING => {
            on_connection("PING on a stream")?;
            let data: [u8; 8] = payload
                .try_into()
                .map_err(|_| error(code::FRAME_SIZE_ERROR, "PING is not 8 bytes"))?;
            Frame::Ping {
                ack: flags & flag::ACK != 0,
                data,
            }
        }
        kind::GOAWAY => {
            on_connection("GOAWAY on a stream")?;
            if payload.len() < 8 {
                return Err(error(code::FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes"));
            }
            Frame::GoAway {
                last_stream: u32_of(&payload[..4], 4, "")? & 0x7fff_ffff,
                code: u32_of(&payload[4..8], 4, "")?,
            }
        }
        kind::WINDOW_UPDATE => {
            let increment = u32_of(payload, 4, "WINDOW_UPDATE is not 4 bytes")? & 0x7fff_ffff;
            if increment == 0 {
                // A stream-level zero increment is a stream error; treated as the
                // connection's, like a misbehaving peer (RFC 9113 6.9 allows either
                // for stream 0 only, so the stream case is stricter than required).
                return Err(error(code::PROTOCOL_ERROR, "WINDOW_UPDATE of 0"));
            }
            Frame::WindowUpdate { stream, increment }
        }
        kind::CONTINUATION => {
            on_stream("CONTINUATION on stream 0")?;
            Frame::Continuation {
                stream,
                end_headers: flags & flag::END_HEADERS != 0,
                block: payload,
            }
        }
        _ => Frame::Ignored,
    })
}

/// The stream a priority block (4 bytes of E flag and dependency, a weight) names.
fn dependency(priority: &[u8]) -> u32 {
    u32::from_be_bytes([priority[0], priority[1], priority[2], priority[3]]) & 0x7fff_ffff
}

fn u32_of(payload: &[u8], len: usize, what: &'static str) -> Result<u32, FrameError> {
    if payload.len() != len {
        return Err(error(code::FRAME_SIZE_ERROR, what));
    }
    Ok(u32::from_be_bytes([
        payload[0], payload[1], payload[2], payload[3],
    ]))
}

/// Removes padding (PADDED flag: a length byte, then padding at the end).
fn unpad(flags: u8, payload: &[u8]) -> Result<&[u8], FrameError> {
    if flags & flag::PADDED == 0 {
        return Ok(payload);
    }
    let Some((&pad, rest)) = payload.split_first() else {
        return Err(error(
            code::FRAME_SIZE_ERROR,
            "padded frame without a pad length",
        ));
    };
    if pad as usize > rest.len() {
        return Err(error(
            code::PROTOCOL_ERROR,
            "padding longer than the payload",
        ));
    }
    Ok(&rest[..rest.len() - pad as usize])
}

fn check_setting(s: Setting) -> Result<(), FrameError> {
    use super::setting::*;
    match s.id {
        ENABLE_PUSH if s.value > 1 => Err(error(code::PROTOCOL_ERROR, "ENABLE_PUSH not 0 or 1")),
        INITIAL_WINDOW_SIZE if s.value > super::MAX_WINDOW => Err(error(
            code::FLOW_CONTROL_ERROR,
            "INITIAL_WINDOW_SIZE over 2^31-1",
        )),
        MAX_FRAME_SIZE if !(16_384..=16_777_215).contains(&s.value) => {
            Err(error(code::PROTOCOL_ERROR, "MAX_FRAME_SIZE out of range"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        super::super::encode::write_frame_header(&mut out, payload.len(), ty, flags, stream);
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn incomplete_frames_wait() {
        let f = frame(kind::PING, 0, 0, &[1; 8]);
        for cut in 0..f.len() {
            assert_eq!(parse_frame(&f[..cut], 16_384), Ok(None), "cut at {cut}");
        }
        let (parsed, used) = parse_frame(&f, 16_384).unwrap().unwrap();
        assert_eq!(used, f.len());
        assert_eq!(
            parsed,
            Frame::Ping {
                ack: false,
                data: [1; 8]
            }
        );
    }

    #[test]
    fn oversized_frames_fail_before_their_payload() {
        let f = frame(kind::DATA, 0, 1, &[0; 20_000]);
        let e = parse_frame(&f[..9], 16_384).unwrap_err();
        assert_eq!(e.code, code::FRAME_SIZE_ERROR);
    }

    #[test]
    fn padding_and_priority_are_removed() {
        let mut p = vec![2u8]; // pad length
        p.extend_from_slice(&[0, 0, 0, 3, 16]); // priority: dependency + weight
        p.extend_from_slice(b"blk");
        p.extend_from_slice(&[0, 0]);
        let f = frame(
            kind::HEADERS,
            flag::PADDED | flag::PRIORITY | flag::END_HEADERS,
            1,
            &p,
        );
        let (parsed, _) = parse_frame(&f, 16_384).unwrap().unwrap();
        assert_eq!(
            parsed,
            Frame::Headers {
                stream: 1,
                end_stream: false,
                end_headers: true,
                block: b"blk"
            }
        );
        let bad = frame(kind::DATA, flag::PADDED, 1, &[9, 1, 2]);
        assert_eq!(
            parse_frame(&bad, 16_384).unwrap_err().code,
            code::PROTOCOL_ERROR
        );
    }

    #[test]
    fn connection_errors_carry_their_codes() {
        let cases: &[(Vec<u8>, u32)] = &[
            (frame(kind::DATA, 0, 0, b"x"), code::PROTOCOL_ERROR),
            (frame(kind::SETTINGS, 0, 1, &[]), code::PROTOCOL_ERROR),
            (frame(kind::SETTINGS, 0, 0, &[0; 5]), code::FRAME_SIZE_ERROR),
            (
                frame(kind::SETTINGS, flag::ACK, 0, &[0; 6]),
                code::FRAME_SIZE_ERROR,
            ),
            (
                frame(kind::SETTINGS, 0, 0, &[0, 4, 0x80, 0, 0, 0]),
                code::FLOW_CONTROL_ERROR,
            ),
            (
                frame(kind::SETTINGS, 0, 0, &[0, 5, 0, 0, 0, 1]),
                code::PROTOCOL_ERROR,
            ),
            (frame(kind::PING, 0, 0, &[0; 7]), code::FRAME_SIZE_ERROR),
            (
                frame(kind::WINDOW_UPDATE, 0, 0, &[0; 4]),
                code::PROTOCOL_ERROR,
            ),
            (
                frame(kind::RST_STREAM, 0, 1, &[0; 3]),
                code::FRAME_SIZE_ERROR,
            ),
            (
                frame(kind::PUSH_PROMISE, 0, 1, &[0; 4]),
                code::PROTOCOL_ERROR,
            ),
            (frame(kind::PRIORITY, 0, 1, &[0; 4]), code::FRAME_SIZE_ERROR),
            (
                frame(kind::PRIORITY, 0, 3, &[0x80, 0, 0, 3, 16]),
                code::PROTOCOL_ERROR,
            ),
            (
                frame(
                    kind::HEADERS,
                    flag::PRIORITY | flag::END_HEADERS,
                    5,
                    &[0, 0, 0, 5, 16, 0x82],
                ),
                code::PROTOCOL_ERROR,
            ),
        ];
        for (bytes, want) in cases {
            let got = parse_frame(bytes, 16_384).unwrap_err();
            assert_eq!(got.code, *want, "{got}");
        }
    }

    #[test]
    fn settings_and_unknown_frames() {
        let f = frame(kind::SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0, 0, 3, 0, 0, 0, 9]);
        let (Frame::Settings { ack: false, params }, _) = parse_frame(&f, 16_384).unwrap().unwrap()
        else {
            panic!("not settings");
        };
        let all: Vec<Setting> = parse_settings(params).collect();
        assert_eq!(
            all,
            [
                Setting {
                    id: 4,
                    value: 65_536
                },
                Setting { id: 3, value: 9 }
            ]
        );
        let unknown = frame(0xfa, 0xff, 7, b"whatever");
        assert_eq!(
            parse_frame(&unknown, 16_384).unwrap().unwrap().0,
            Frame::Ignored
        );
    }
}
