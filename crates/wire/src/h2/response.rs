//! The connection core's HTTP/1.1 response bytes → an HTTP/2 response: the head (status
//! and headers, connection-specific ones dropped), then the body with its HTTP/1.1
//! framing removed (chunked, Content-Length or close-delimited), then the end.
//!
//! Incremental with a few bytes of state: deliveries arrive one core call at a time,
//! each a whole chunk in practice, but the reader resumes at any byte. A head must
//! arrive whole in one call (the core writes every head in one piece).

/// One part of a response, borrowing from the input.
#[derive(Debug, PartialEq, Eq)]
pub enum Part<'a> {
    /// Names lowercased (HTTP/2 requires it).
    Head {
        status: u16,
        headers: Vec<(Vec<u8>, &'a [u8])>,
    },
    Body(&'a [u8]),
    /// The response is complete (END_STREAM).
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("core response not understood: {0}")]
pub struct ResponseError(pub &'static str);

/// Where in the response the reader is.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    #[default]
    Head,
    /// Chunked body: reading a size line (`size` so far; after `;` only skipping).
    Size {
        size: u64,
        ext: bool,
    },
    SizeLf {
        size: u64,
    },
    Data(u64),
    DataCr,
    DataLf,
    /// After the last chunk's size line: the final CRLF (the core sends no trailers).
    EndCr,
    EndLf,
    Length(u64),
    UntilClose,
    Done,
}

/// Reads one response; see the module doc. 16 bytes.
#[derive(Debug, Default)]
pub struct ResponseReader {
    state: State,
}

impl ResponseReader {
    /// True once the whole response has been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// True before the head has been read.
    pub fn in_head(&self) -> bool {
        self.state == State::Head
    }

    /// Reads `input`, handing each part to `each`. Bytes after the end are ignored
    /// (a stream carries one response).
    pub fn feed<'a>(
        &mut self,
        mut input: &'a [u8],
        mut each: impl FnMut(Part<'a>),
    ) -> Result<(), ResponseError> {
        while !input.is_empty() {
            match self.state {
                State::Head => {
                    let used = self.head(input, &mut each)?;
                    input = &input[used..];
                }
                State::Length(left) => {
                    let n = (left as usize).min(input.len());
                    each(Part::Body(&input[..n]));
                    input = &input[n..];
                    self.state = State::Length(left - n as u64);
                    if left == n as u64 {
                        self.finish(&mut each);
                    }
                }
                State::UntilClose => {
                    each(Part::Body(input));
                    return Ok(());
                }
                State::Data(left) => {
                    let n = (left as usize).min(input.len());
                    each(Part::Body(&input[..n]));
                    input = &input[n..];
                    self.state = if left == n as u64 {
                        State::DataCr
                    } else {
                        State::Data(left - n as u64)
                    };
                }
                State::Done => return Ok(()),
                _ => {
                    self.framing_byte(input[0], &mut each)?;
                    input = &input[1..];
                }
            }
        }
        Ok(())
    }

    /// The response is over: the body is complete.
    fn finish<'a>(&mut self, each: &mut impl FnMut(Part<'a>)) {
        self.state = State::Done;
        each(Part::End);
    }

    /// One byte of chunked framing (size lines and CRLFs).
    fn framing_byte<'a>(
        &mut self,
        b: u8,
        each: &mut impl FnMut(Part<'a>),
    ) -> Result<(), ResponseError> {
        self.state = match (self.state, b) {
            (State::Size { size, ext: false }, b) if b.is_ascii_hexdigit() => {
                let digit = (b as char).to_digit(16).unwrap_or(0) as u64;
                let size = size
                    .checked_mul(16)
                    .and_then(|s| s.checked_add(digit))
                    .ok_or(ResponseError("chunk size overflows"))?;
                State::Size { size, ext: false }
            }
            (State::Size { size, .. }, b';') => State::Size { size, ext: true },
            (State::Size { size, .. }, b'\r') => State::SizeLf { size },
            (State::Size { size, ext: true }, _) => State::Size { size, ext: true },
            (State::SizeLf { size: 0 }, b'\n') => State::EndCr,
            (State::SizeLf { size }, b'\n') => State::Data(size),
            (State::DataCr, b'\r') => State::DataLf,
            (State::DataLf, b'\n') => State::Size {
                size: 0,
                ext: false,
            },
            (State::EndCr, b'\r') => State::EndLf,
            (State::EndLf, b'\n') => {
                self.finish(each);
                return Ok(());
            }
            _ => return Err(ResponseError("bad chunked framing")),
        };
        Ok(())
    }

    /// Parses a whole head; returns the bytes it used.
    fn head<'a>(
        &mut self,
        input: &'a [u8],
        each: &mut impl FnMut(Part<'a>),
    ) -> Result<usize, ResponseError> {
        let mut storage = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut storage);
        let used = match response.parse(input) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Err(ResponseError("head not whole")),
            Err(_) => return Err(ResponseError("malformed head")),
        };
        let status = response.code.ok_or(ResponseError("no status"))?;
        if (100..200).contains(&status) {
            return Ok(used); // 100 Continue: HTTP/2 needs none, the final head follows
        }
        let (mut chunked, mut length) = (false, None);
        let mut headers = Vec::with_capacity(response.headers.len());
        for h in response.headers.iter() {
            let name = h.name.to_ascii_lowercase();
            match name.as_str() {
                "transfer-encoding" => {
                    chunked = h.value.eq_ignore_ascii_case(b"chunked");
                    continue;
                }
                "connection" | "keep-alive" => continue,
                "content-length" => {
                    let text = std::str::from_utf8(h.value).ok();
                    length = text.and_then(|t| t.trim().parse::<u64>().ok());
                }
                _ => {}
            }
            headers.push((name.into_bytes(), h.value));
        }
        self.state = if chunked {
            State::Size {
                size: 0,
                ext: false,
            }
        } else if let Some(n) = length {
            State::Length(n)
        } else if status == 204 || status == 304 {
            State::Length(0)
        } else {
            State::UntilClose
        };
        each(Part::Head { status, headers });
        if self.state == State::Length(0) {
            self.finish(each);
        }
        Ok(used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(input: &[u8], split: usize) -> (u16, Vec<u8>, bool) {
        let mut r = ResponseReader::default();
        let (mut status, mut body, mut end) = (0, Vec::new(), false);
        let (head_len, rest) = {
            let pos = input.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            (pos, &input[pos..])
        };
        let mut sink = |p: Part| match p {
            Part::Head { status: s, .. } => status = s,
            Part::Body(b) => body.extend_from_slice(b),
            Part::End => end = true,
        };
        r.feed(&input[..head_len], &mut sink).unwrap();
        for piece in rest.chunks(split.max(1)) {
            r.feed(piece, &mut sink).unwrap();
        }
        (status, body, end)
    }

    #[test]
    fn chunked_bodies_lose_their_framing_at_any_split() {
        let mut resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n".to_vec();
        resp.extend_from_slice(
            b"5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n",
        );
        for split in 1..12 {
            let (status, body, end) = read_all(&resp, split);
            assert_eq!(status, 200);
            assert_eq!(body, b"helloabcdefghijklmnopqrstuvwxyz", "split {split}");
            assert!(end);
        }
    }

    #[test]
    fn length_and_close_delimited_bodies() {
        let (s, body, end) = read_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
            2,
        );
        assert_eq!((s, &body[..], end), (404, &b"abc"[..], true));
        let (_, body, end) = read_all(b"HTTP/1.0 200 OK\r\n\r\nline\n", 3);
        assert_eq!((&body[..], end), (&b"line\n"[..], false));
    }

    #[test]
    fn heads_drop_connection_headers_and_skip_100() {
        let mut r = ResponseReader::default();
        let mut heads = Vec::new();
        r.feed(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nKeep-Alive: timeout=5\r\nContent-Length: 0\r\nX-A: b\r\n\r\n",
            |p| {
                if let Part::Head { status, headers } = p {
                    heads.push((status, headers.into_iter().map(|(n, _)| n).collect::<Vec<_>>()));
                }
            },
        )
        .unwrap();
        assert_eq!(
            heads,
            [(200, vec![b"content-length".to_vec(), b"x-a".to_vec()])]
        );
        assert!(r.is_done());
        let mut bad = ResponseReader::default();
        assert!(bad
            .feed(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz",
                |_| {}
            )
            .is_err());
    }
}
