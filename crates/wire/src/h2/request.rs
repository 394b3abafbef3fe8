//! A request's decoded header list → the HTTP/1.1 head the connection core reads, so
//! an HTTP/2 stream is served by the same request code as an HTTP/1.1 connection.
//!
//! HPACK carries any bytes, so everything that would change the meaning of an
//! HTTP/1.1 head is refused here (RFC 9113 8.2 calls such requests malformed: a stream
//! error): CR, LF or NUL in a name or value, uppercase names, connection-specific
//! headers, pseudo-headers after regular ones or unknown ones, a `content-length` that
//! differs from the DATA received. The head's `Content-Length` is the length of the
//! body the caller collected.

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

/// Writes `METHOD path HTTP/1.1`, `Host`, the regular headers and `Content-Length`
/// (when the request has a body) into `out`.
pub fn write_request_head<'a>(
    out: &mut Vec<u8>,
    headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    body_len: Option<usize>,
) -> Result<(), RequestError> {
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
            // malformed. The head gets the collected length below.
            let len = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.parse::<usize>().ok());
            if len != Some(body_len.unwrap_or(0)) {
                return Err(RequestError("content-length differs from the DATA"));
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
    if let Some(len) = body_len {
        out.extend_from_slice(format!("content-length: {len}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// An RFC 9110 token character.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(h: &[(&str, &str)], body: Option<usize>) -> Result<String, RequestError> {
        let mut out = Vec::new();
        write_request_head(
            &mut out,
            h.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            body,
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
            None,
        );
        assert_eq!(
            h.unwrap(),
            "GET /sse/7?since=3 HTTP/1.1\r\nhost: localhost:8443\r\naccept: text/event-stream\r\n\r\n"
        );
        let post = head(&[(":method", "POST"), (":path", "/pub/1")], Some(5)).unwrap();
        assert!(post.ends_with("content-length: 5\r\n\r\n"), "{post}");
        let stated = [
            (":method", "POST"),
            (":path", "/pub/1"),
            ("content-length", "5"),
        ];
        assert_eq!(head(&stated, Some(5)).unwrap(), post);
        assert!(head(&stated, Some(4)).is_err(), "a length that differs");
        assert!(head(&stated, None).is_err(), "a length without DATA");
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
            assert!(head(h, None).is_err(), "{h:?} accepted");
        }
        assert!(head(&[base[0], base[1], ("te", "trailers")], None).is_ok());
    }
}
