//! Request bodies: an incremental decoder for `Content-Length` and `chunked`
//! framing (RFC 9112 6 and 7.1), fed from wherever the bytes happen to split.
//!
//! Hand-rolled on purpose: the gateway keeps no per-connection read buffer (budget
//! ≤ 256 B per idle connection) and parses out of a per-loop scratch buffer, so the
//! decoder must resume from any byte boundary with a few bytes of state, never
//! asking to "see the whole chunk line again". It does not interpret the body and
//! does not keep trailers (they are checked for size and bytes, then dropped).

use crate::head::BodyKind;

/// Longest accepted chunk extension (`;name=value…`) per chunk-size line. Nothing
/// here uses extensions; the bound stops a client from streaming an endless line.
pub const MAX_CHUNK_EXT: u16 = 256;
/// Longest accepted trailer section, in bytes (trailers are read and dropped).
pub const MAX_TRAILER: u16 = 4096;
/// Most hex digits accepted in a chunk size (leading zeros included): 16 fills a u64.
const MAX_SIZE_DIGITS: u8 = 16;

/// Why a body was refused.
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyError {
    /// The body is longer than the limit given to [`BodyDecoder::new`] (413).
    #[error("request body too large")]
    TooLarge,
    /// Broken chunked framing (400).
    #[error("malformed chunked body: {0}")]
    Malformed(&'static str),
}

impl BodyError {
    /// The HTTP status to answer with (the connection is closed afterwards).
    pub fn status(&self) -> u16 {
        match self {
            BodyError::TooLarge => 413,
            BodyError::Malformed(_) => 400,
        }
    }
}

/// Where the decoder is in the framing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// `Content-Length` body: `remaining` bytes still to come.
    Fixed,
    /// Reading chunk-size hex digits.
    Size,
    /// After SP/HTAB following the size: only more whitespace or ';' may come.
    SizeSpace,
    /// Inside a chunk extension, until CR.
    Ext,
    /// Saw CR ending the size line; LF must follow.
    SizeLf,
    /// Chunk data: `remaining` bytes to copy.
    Data,
    /// After chunk data: CR must follow.
    DataCr,
    /// After chunk data and CR: LF must follow.
    DataLf,
    /// At the start of a trailer line (or of the final blank line).
    TrailerStart,
    /// Inside a trailer field line, until CR.
    Trailer,
    /// Saw CR ending a trailer field line; LF must follow.
    TrailerLf,
    /// Saw CR of the final blank line; LF must follow.
    EndLf,
    /// The whole body was read.
    Done,
}

/// Incremental body decoder; exists only while a request body is in flight.
#[derive(Clone, Debug)]
pub struct BodyDecoder {
    /// Bytes left in the fixed body or the current chunk (or the size being read).
    remaining: u64,
    /// Decoded bytes so far (for the limit).
    total: u64,
    limit: u64,
    state: State,
    /// Digits in the current size line, or bytes of extension / trailer seen.
    count: u16,
}

impl BodyDecoder {
    /// A decoder for a body framed as `kind`, refusing more than `limit` decoded bytes.
    pub fn new(kind: BodyKind, limit: usize) -> Self {
        let (state, remaining) = match kind {
            BodyKind::None => (State::Done, 0),
            BodyKind::Length(0) => (State::Done, 0),
            BodyKind::Length(n) => (State::Fixed, n),
            BodyKind::Chunked => (State::Size, 0),
        };
        BodyDecoder {
            remaining,
            total: 0,
            limit: limit as u64,
            state,
            count: 0,
        }
    }

    /// True once the whole body has been decoded.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes from `input`, appends decoded body bytes to `out`; returns
    /// `(consumed, done)`. Bytes after the end of the body are not consumed
    /// (they belong to the next pipelined request). After an error the decoder
    /// must not be used again: the connection is to be closed.
    pub fn handle_bytes(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(usize, bool), BodyError> {
        if self.state == State::Fixed {
            // Checked up front so a lying Content-Length fails before any read.
            if self.remaining > self.limit {
                return Err(BodyError::TooLarge);
            }
            let n = input
                .len()
                .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
            out.extend_from_slice(&input[..n]);
            self.remaining -= n as u64;
            if self.remaining == 0 {
                self.state = State::Done;
            }
            return Ok((n, self.is_done()));
        }
        let mut i = 0;
        while i < input.len() && self.state != State::Done {
            if self.state == State::Data {
                let n =
                    (input.len() - i).min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
                out.extend_from_slice(&input[i..i + n]);
                self.remaining -= n as u64;
                i += n;
                if self.remaining == 0 {
                    self.state = State::DataCr;
                }
                continue;
            }
            self.handle_framing_byte(input[i])?;
            i += 1;
        }
        Ok((i, self.is_done()))
    }

    /// One byte of chunked framing (everything but chunk data).
    fn handle_framing_byte(&mut self, b: u8) -> Result<(), BodyError> {
        use BodyError::Malformed;
        match self.state {
            State::Size => match hex_value(b) {
                Some(d) => {
                    if self.count == u16::from(MAX_SIZE_DIGITS) {
                        return Err(Malformed("chunk size too long"));
                    }
                    self.count += 1;
                    self.remaining = (self.remaining << 4) | u64::from(d);
                }
                None if self.count == 0 => return Err(Malformed("bad chunk size")),
                None => {
                    self.end_size()?;
                    self.state = match b {
                        b'\r' => State::SizeLf,
                        b';' => State::Ext,
                        b' ' | b'\t' => State::SizeSpace,
                        b'\n' => return Err(Malformed("bare LF after chunk size")),
                        _ => return Err(Malformed("bad chunk size")),
                    };
                }
            },
            State::SizeSpace => match b {
                b' ' | b'\t' => self.bump(MAX_CHUNK_EXT, "chunk extension too long")?,
                b';' => {
                    self.count = 0;
                    self.state = State::Ext;
                }
                _ => return Err(Malformed("whitespace after chunk size")),
            },
            State::Ext => match b {
                b'\r' => self.state = State::SizeLf,
                b'\t' | 0x20..=0x7e | 0x80..=0xff => {
                    self.bump(MAX_CHUNK_EXT, "chunk extension too long")?
                }
                _ => return Err(Malformed("bad byte in chunk extension")),
            },
            State::SizeLf => {
                if b != b'\n' {
                    return Err(Malformed("missing LF after chunk size"));
                }
                self.count = 0;
                self.state = if self.remaining == 0 {
                    State::TrailerStart
                } else {
                    State::Data
                };
            }
            State::DataCr => {
                if b != b'\r' {
                    return Err(Malformed("missing CRLF after chunk data"));
                }
                self.state = State::DataLf;
            }
            State::DataLf => {
                if b != b'\n' {
                    return Err(Malformed("missing CRLF after chunk data"));
                }
                self.state = State::Size;
                self.count = 0;
            }
            State::TrailerStart => match b {
                b'\r' => self.state = State::EndLf,
                _ => {
                    self.state = State::Trailer;
                    self.trailer_byte(b)?;
                }
            },
            State::Trailer => match b {
                b'\r' => {
                    self.bump(MAX_TRAILER, "trailer too long")?;
                    self.state = State::TrailerLf;
                }
                _ => self.trailer_byte(b)?,
            },
            State::TrailerLf => {
                if b != b'\n' {
                    return Err(Malformed("missing LF in trailer"));
                }
                self.bump(MAX_TRAILER, "trailer too long")?;
                self.state = State::TrailerStart;
            }
            State::EndLf => {
                if b != b'\n' {
                    return Err(Malformed("missing final CRLF"));
                }
                self.state = State::Done;
            }
            // Handled by the caller before reaching here.
            State::Fixed | State::Data | State::Done => {}
        }
        Ok(())
    }

    /// A chunk size has been fully read: check it against the limit before any data.
    fn end_size(&mut self) -> Result<(), BodyError> {
        self.total = self.total.saturating_add(self.remaining);
        if self.total > self.limit {
            return Err(BodyError::TooLarge);
        }
        self.count = 0;
        Ok(())
    }

    fn trailer_byte(&mut self, b: u8) -> Result<(), BodyError> {
        if b != b'\t' && (b < 0x20 || b == 0x7f) {
            return Err(BodyError::Malformed("bad byte in trailer"));
        }
        self.bump(MAX_TRAILER, "trailer too long")
    }

    fn bump(&mut self, max: u16, what: &'static str) -> Result<(), BodyError> {
        if self.count >= max {
            return Err(BodyError::Malformed(what));
        }
        self.count += 1;
        Ok(())
    }
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
#[path = "body_tests.rs"]
mod tests;
