//! Complete HTTP/1.1 responses with a `Content-Length` (API answers and errors).
//!
//! Not here: streaming heads (`stream`, `sse`) and the WebSocket handshake (`ws`).
//! No `Date` header: this crate has no clock, and every client here ignores it.

use std::io::Write as _;

/// The standard reason phrase for `status` ("Unknown" for unlisted codes).
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// Adds `name: value` to the response head that starts at `out[start..]` (before
/// its blank line); nothing when there is no complete head there.
pub fn add_header(out: &mut Vec<u8>, start: usize, name: &str, value: &str) {
    let Some(end) = out[start..].windows(4).position(|w| w == b"\r\n\r\n") else {
        return;
    };
    let at = start + end + 2;
    let line = format!("{name}: {value}\r\n");
    out.splice(at..at, line.into_bytes());
}

/// Appends a complete response with `Content-Length` to `out`; adds
/// `Connection: close` when `!keep_alive`. An empty `content_type` omits the header.
/// 1xx, 204 and 304 responses carry neither a body nor `Content-Length` (RFC 9110 8.6).
pub fn write_response(
    out: &mut Vec<u8>,
    status: u16,
    content_type: &str,
    body: &[u8],
    keep_alive: bool,
    extra_headers: &[(&str, &str)],
) {
    if write_head(
        out,
        status,
        content_type,
        body.len(),
        keep_alive,
        extra_headers,
    ) {
        out.extend_from_slice(body);
    }
}

/// Appends a short `text/plain` error response: the body is `message` + "\n".
/// `extra_headers` carries `Allow` (405), `Upgrade` (426) or `Retry-After` (503).
pub fn write_error_response(
    out: &mut Vec<u8>,
    status: u16,
    message: &str,
    keep_alive: bool,
    extra_headers: &[(&str, &str)],
) {
    let content_type = "text/plain; charset=utf-8";
    if write_head(
        out,
        status,
        content_type,
        message.len() + 1,
        keep_alive,
        extra_headers,
    ) {
        out.extend_from_slice(message.as_bytes());
        out.push(b'\n');
    }
}

/// The status line and headers; returns whether a body follows.
fn write_head(
    out: &mut Vec<u8>,
    status: u16,
    content_type: &str,
    body_len: usize,
    keep_alive: bool,
    extra_headers: &[(&str, &str)],
) -> bool {
    let bodyless = matches!(status, 100..=199 | 204 | 304);
    out.reserve(128 + if bodyless { 0 } else { body_len });
    // Writing into a Vec cannot fail.
    write!(out, "HTTP/1.1 {} {}\r\n", status, reason_phrase(status)).expect("Vec write");
    if !content_type.is_empty() {
        write!(out, "Content-Type: {content_type}\r\n").expect("Vec write");
    }
    if !bodyless {
        write!(out, "Content-Length: {body_len}\r\n").expect("Vec write");
    }
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    for (name, value) in extra_headers {
        // Header values come from the gateway's own constants; a CR or LF here
        // would be header injection, a bug in the caller.
        debug_assert!(
            !name.contains(['\r', '\n']) && !value.contains(['\r', '\n']),
            "CR/LF in response header {name:?}"
        );
        write!(out, "{name}: {value}\r\n").expect("Vec write");
    }
    out.extend_from_slice(b"\r\n");
    !bodyless
}

/// The interim `100 Continue` line sent before reading a body the client holds
/// back (`Expect: 100-continue`).
pub const CONTINUE_100: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Appends an API answer: `body` and a newline, as `application/json` when `json`,
/// else as a text error ([`write_error_response`]); `Retry-After: 1` when
/// `retry_after` (a 503 worth retrying).
pub fn write_api_answer(
    out: &mut Vec<u8>,
    status: u16,
    json: bool,
    body: &str,
    keep_alive: bool,
    retry_after: bool,
) {
    let retry: &[(&str, &str)] = if retry_after {
        &[("Retry-After", "1")]
    } else {
        &[]
    };
    if json {
        let mut line = Vec::with_capacity(body.len() + 1);
        line.extend_from_slice(body.as_bytes());
        line.push(b'\n');
        write_response(out, status, "application/json", &line, keep_alive, retry);
    } else {
        write_error_response(out, status, body, keep_alive, retry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(
        status: u16,
        content_type: &str,
        body: &[u8],
        keep_alive: bool,
        extra: &[(&str, &str)],
    ) -> Vec<u8> {
        let mut out = b"before|".to_vec();
        write_response(&mut out, status, content_type, body, keep_alive, extra);
        assert!(out.starts_with(b"before|"), "appends, never clears");
        out.split_off(7)
    }

    fn error_response(status: u16, message: &str, keep_alive: bool) -> Vec<u8> {
        let mut out = Vec::new();
        write_error_response(&mut out, status, message, keep_alive, &[]);
        out
    }

    #[test]
    fn reason_phrases() {
        assert_eq!(reason_phrase(200), "OK");
        assert_eq!(reason_phrase(404), "Not Found");
        assert_eq!(reason_phrase(431), "Request Header Fields Too Large");
        assert_eq!(reason_phrase(505), "HTTP Version Not Supported");
        assert_eq!(reason_phrase(599), "Unknown");
    }

    #[test]
    fn response_with_body_and_headers() {
        let r = response(200, "application/json", b"{}", true, &[("X-A", "1")]);
        assert_eq!(
            r,
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nX-A: 1\r\n\r\n{}"
        );
    }

    #[test]
    fn response_close_and_no_content_type() {
        let r = response(503, "", b"", false, &[("Retry-After", "1")]);
        assert_eq!(
            r,
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
        );
    }

    #[test]
    fn bodyless_statuses_have_no_length() {
        let r = response(204, "", b"ignored", true, &[]);
        assert_eq!(r, b"HTTP/1.1 204 No Content\r\n\r\n");
    }

    #[test]
    fn error_response_is_text_with_newline() {
        let r = error_response(404, "not found", false);
        assert_eq!(
            r,
            b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 10\r\nConnection: close\r\n\r\nnot found\n"
        );
    }

    #[test]
    #[should_panic(expected = "CR/LF in response header")]
    #[cfg(debug_assertions)]
    fn header_injection_is_caught_in_debug_builds() {
        response(200, "", b"", true, &[("X", "a\r\nSet-Cookie: x")]);
    }

    #[test]
    fn continue_line() {
        assert_eq!(CONTINUE_100, b"HTTP/1.1 100 Continue\r\n\r\n");
    }
}
