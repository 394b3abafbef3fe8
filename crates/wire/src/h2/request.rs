//! A request's decoded header list → the HTTP/1.1 head the connection core reads, so
//! an HTTP/2 stream is served by the same request code as an HTTP/1.1 connection.
//!
//! HPACK carries any bytes, so everything that would change the meaning of an
//! HTTP/1.1 head is refused here (RFC 9113 8.2 calls such requests malformed: a stream
//! error): CR, LF or NUL in a name or value, uppercase names, connection-specific
//! headers, pseudo-headers after regular ones or unknown ones, a `content-length` on a
//! request without DATA, or one that is not a number.
//!
//! The head is written as soon as the HEADERS arrive, before any DATA, so the core
//! judges the request (routes, keys, tokens, limits) before its body is read. The body
//! then follows as the head says: `Content-Length` when the request stated one (the
//! caller holds the DATA to it), else `Transfer-Encoding: chunked` (the caller frames
//! each DATA payload as a chunk and END_STREAM as the last one).

/// Why a request's headers were refused (RST_STREAM PROTOCOL_ERROR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed http/2 request: {0}")]
pub struct RequestError(pub &'static str);

/// Headers that only mean something to one HTTP/1.1 connection (RFC 9113 8.2.2).
const CONNECTION_SPECIFIC: &[&[u8]] = &[
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"upgrade",
];

/// How the body of a request follows its head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (END_STREAM came with the HEADERS).
    None,
    /// Exactly this many bytes of DATA (the request's `content-length`).
    Length(u64),
    /// DATA payloads as chunks, END_STREAM as the last chunk.
    Chunked,
}

/// Writes `METHOD path HTTP/1.1`, `Host`, the regular headers and the body's framing
/// into `out`; `has_body`: DATA may follow (no END_STREAM on the HEADERS).
pub fn write_request_head<'a>(
    out: &mut Vec<u8>,
    headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    has_body: bool,
) -> Result<Framing, RequestError> {
    let mut stated: Option<u64> = None;
    let mut method: Option<&[u8]> = None;
    let mut path: Option<&[u8]> = None;
    let mut authority: Option<&[u8]> = None;
    let mut regular = Vec::new();
    for (name, value) in headers {
        if value.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(RequestError("CR, LF or NUL in a value"));
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            if !regular.is_empty() {
                return Err(RequestError("pseudo-header after a regular header"));
            }
            let slot = match pseudo {
                b"method" => &mut method,
                b"path" => &mut path,
                b"authority" => &mut authority,
                b"scheme" => continue,
                _ => return Err(RequestError("unknown pseudo-header")),
            };
            if slot.replace(value).is_some() {
                return Err(RequestError("repeated pseudo-header"));
            }
            continue;
        }
        if name.is_empty() || !name.iter().all(|&b| is_token(b) && !b.is_ascii_uppercase()) {
            return Err(RequestError("bad header name"));
        }
        if CONNECTION_SPECIFIC.contains(&name) || (name == b"te" && value != b"trailers") {
            return Err(RequestError("connection-specific header"));
        }
        if name == b"content-length" {
            // RFC 9113 8.1.1: a length that differs from the DATA received is
            // malformed; the caller holds the DATA to the length stated here.
            let len = std::str::from_utf8(value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or(RequestError("content-length is not a number"))?;
            if stated.replace(len).is_some_and(|before| before != len) {
                return Err(RequestError("two different content-lengths"));
            }
            continue;
        }
        if name == b"host" && authority.is_some() {
            continue;
        }
        regular.push((name, value));
    }
    let (Some(method), Some(path)) = (method, path) else {
        return Err(RequestError("missing :method or :path"));
    };
    if method == b"CONNECT" {
        return Err(RequestError("CONNECT is not served"));
    }
    if path.is_empty() || path.contains(&b' ') || !method.iter().all(|&b| is_token(b)) {
        return Err(RequestError("bad :method or :path"));
    }
    out.extend_from_slice(method);
    out.push(b' ');
    out.extend_from_slice(path);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if let Some(host) = authority {
        out.extend_from_slice(b"host: ");
        out.extend_from_slice(host);
        out.extend_from_slice(b"\r\n");
    }
    for (name, value) in regular {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    // A GET or HEAD without a stated length has no body even when its HEADERS did not
    // end the stream (some clients end it with an empty DATA frame).
    let has_body = has_body && (stated.is_some() || !matches!(method, b"GET" | b"HEAD"));
    let framing = match (has_body, stated) {
        (false, None | Some(0)) => Framing::None,
        (false, Some(_)) => return Err(RequestError("content-length differs from the DATA")),
        (true, Some(len)) => Framing::Length(len),
        (true, None) => Framing::Chunked,
    };
    match framing {
        Framing::None => {}
        Framing::Length(len) => {
            out.extend_from_slice(format!("content-length: {len}\r\n").as_bytes())
        }
        Framing::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    out.extend_from_slice(b"\r\n");
    Ok(framing)
}

/// An RFC 9110 token character.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(h: &[(&str, &str)], has_body: bool) -> Result<String, RequestError> {
        let mut out = Vec::new();
        write_request_head(
            &mut out,
            h.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            has_body,
        )?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn a_get_becomes_an_http11_head() {
        let h = head(
            &[
                (":method", "GET"),
                (":scheme", "https"),
                (":authority", "localhost:8443"),
                (":path", "/sse/7?since=3"),
                ("accept", "text/event-stream"),
                ("content-length", "0"),
            ],
            false,
        );
        assert_eq!(
            h.unwrap(),
            "GET /sse/7?since=3 HTTP/1.1\r\nhost: localhost:8443\r\naccept: text/event-stream\r\n\r\n"
        );
        let post = head(&[(":method", "POST"), (":path", "/pub/1")], true).unwrap();
        assert!(
            post.ends_with("transfer-encoding: chunked\r\n\r\n"),
            "{post}"
        );
        let stated = [
            (":method", "POST"),
            (":path", "/pub/1"),
            ("content-length", "5"),
        ];
        let post = head(&stated, true).unwrap();
        assert!(post.ends_with("content-length: 5\r\n\r\n"), "{post}");
        assert!(head(&stated, false).is_err(), "a length without DATA");
        let empty = [
            (":method", "POST"),
            (":path", "/pub/1"),
            ("content-length", "0"),
        ];
        assert!(!head(&empty, false).unwrap().contains("content-length"));
        for bad in ["-1", "5x", "", "+5", "99999999999999999999999"] {
            let h = [
                (":method", "POST"),
                (":path", "/pub/1"),
                ("content-length", bad),
            ];
            assert!(head(&h, true).is_err(), "content-length {bad:?}");
        }
        let twice = [
            (":method", "POST"),
            (":path", "/pub/1"),
            ("content-length", "5"),
            ("content-length", "6"),
        ];
        assert!(head(&twice, true).is_err());
        let get = [(":method", "GET"), (":path", "/sse/1")];
        assert!(head(&get, true)
            .unwrap()
            .ends_with("/sse/1 HTTP/1.1\r\n\r\n"));
    }

    #[test]
    fn malformed_requests_are_refused() {
        let base = [(":method", "GET"), (":path", "/sse/1")];
        let bad: &[&[(&str, &str)]] = &[
            &[(":method", "GET")],
            &[(":method", "GET"), (":path", "/x"), (":path", "/y")],
            &[(":method", "GET"), (":path", "/x\r\nevil: 1")],
            &[(":method", "GET"), (":path", "/a b")],
            &[(":method", "CONNECT"), (":path", "/x")],
            &[(":method", "GET"), (":path", "/x"), (":bogus", "1")],
            &[(":method", "GET"), ("a", "1"), (":path", "/x")],
            &[base[0], base[1], ("Accept", "x")],
            &[base[0], base[1], ("connection", "close")],
            &[base[0], base[1], ("te", "gzip")],
            &[base[0], base[1], ("x", "a\0b")],
            &[base[0], base[1], ("bad name", "1")],
        ];
        for h in bad {
            assert!(head(h, false).is_err(), "{h:?} accepted");
        }
        assert!(head(&[base[0], base[1], ("te", "trailers")], false).is_ok());
    }
}
