//! HTTP/1.1 request heads: `parse_head` turns bytes into a [`RequestHead`] or a
//! [`HeadError`] that names the status to answer with.
//!
//! This module is not a router (see `route`) and does not read bodies (see `body`).
//! Parsing of the request line and header syntax is httparse's; this module adds
//! the semantics the gateway needs: framing (Content-Length / chunked, with the
//! request-smuggling checks of RFC 9112 6.3), keep-alive, SSE and WebSocket
//! detection. `Host` is not required: the gateway serves a single origin, and load
//! clients that omit it (classic C1M tools do) must still be served; but a second
//! `Host` is refused, and so is a bare LF line ending anywhere in the head: both
//! are read differently by different HTTP implementations, which is what request
//! smuggling through a proxy exploits (RFC 9112 2.2, 3.2).

mod text;
mod version;

use base64::Engine as _;

use crate::since::Since;
use text::{contains_ignore_case, parse_decimal, split_target, trim_ows};
use version::{classify_version, VersionClass};

/// Default upper bound on the size of a request head, in bytes.
pub const DEFAULT_MAX_HEAD: usize = 8192;
/// Default upper bound on the number of header fields in a request head.
pub const DEFAULT_MAX_HEADERS: usize = 32;
/// Header slots kept on the stack; larger `max_headers` limits allocate.
const STACK_HEADERS: usize = 64;

/// Bounds applied while parsing a request head (both answer 431 when exceeded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted head, request line and final blank line included.
    pub max_head: usize,
    /// Largest accepted number of header fields.
    pub max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head: DEFAULT_MAX_HEAD,
            max_headers: DEFAULT_MAX_HEADERS,
        }
    }
}

/// Request method; anything the gateway never serves is `Other` (answered 405).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Options,
    Other,
}

impl Method {
    fn from_token(token: &str) -> Method {
        // Methods are case-sensitive (RFC 9110 9.1).
        match token {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            _ => Method::Other,
        }
    }
}

/// How the request body is framed (RFC 9112 6.3).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BodyKind {
    /// No body: neither Content-Length nor Transfer-Encoding.
    None,
    /// Exactly this many bytes follow the head.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A valid RFC 6455 opening handshake request.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WsUpgrade {
    /// The `Sec-WebSocket-Key` value (base64 of 16 bytes), as sent.
    pub key: String,
}

/// What the gateway needs from a request head; owned, so the read buffer can be reused.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RequestHead {
    pub method: Method,
    /// Path without the query (absolute-form targets are reduced to their path).
    pub path: String,
    /// Raw query string after '?', if any.
    pub query: Option<String>,
    /// 0 or 1 (HTTP/1.0 or HTTP/1.1).
    pub minor_version: u8,
    /// HTTP/1.1: true unless `Connection: close`; 1.0: only with `Connection: keep-alive`.
    pub keep_alive: bool,
    pub body: BodyKind,
    /// `Accept` mentions `text/event-stream`.
    pub accept_event_stream: bool,
    /// Present only for a complete, valid WebSocket upgrade request.
    pub websocket: Option<WsUpgrade>,
    /// `Last-Event-ID`: `<seq>` or `<epoch>-<seq>` (see [`Since`]), or a composite
    /// of one per stream of a connection with channels
    /// ([`crate::parse_positions`]).
    pub last_event_id: Option<Vec<Option<Since>>>,
    pub authorization: Option<String>,
    /// `Expect: 100-continue`.
    pub expect_continue: bool,
    /// The authority: from an absolute-form target if there is one (RFC 9112 3.2.2:
    /// it then overrides `Host`), else the `Host` header.
    pub host: Option<String>,
    /// `Origin` (for the CORS and WebSocket origin checks), as sent.
    pub origin: Option<String>,
}

impl RequestHead {
    /// True for HTTP/1.0: such a client cannot read a chunked body, so a streaming
    /// answer must be close-delimited (no `Transfer-Encoding`, end = connection close).
    pub fn is_http10(&self) -> bool {
        self.minor_version == 0
    }
}

/// Why a head was refused. Every variant maps to one status (see [`HeadError::status`]);
/// the `Display` text is short and meant for the client.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum HeadError {
    /// Syntax error found by httparse, or a bad byte in a header.
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    /// The head is larger than `Limits::max_head` (431).
    #[error("request head too large")]
    HeadTooLarge,
    /// More header fields than `Limits::max_headers` (431).
    #[error("too many header fields")]
    TooManyHeaders,
    /// HTTP version other than 1.0 and 1.1 (505).
    #[error("HTTP version not supported")]
    UnsupportedVersion,
    /// Content-Length is not a plain decimal number (or overflows u64).
    #[error("invalid Content-Length")]
    BadContentLength,
    /// Several Content-Length values that differ.
    #[error("conflicting Content-Length values")]
    ConflictingContentLength,
    /// Both framings present: a request-smuggling vector (RFC 9112 6.3).
    #[error("Content-Length and Transfer-Encoding together")]
    LengthAndTransferEncoding,
    /// Transfer-Encoding other than exactly `chunked` (501).
    #[error("unsupported Transfer-Encoding (only chunked)")]
    UnsupportedTransferEncoding,
    /// Transfer-Encoding in an HTTP/1.0 request: framing cannot be trusted (RFC 9112 6.1).
    #[error("Transfer-Encoding in an HTTP/1.0 request")]
    TransferEncodingInHttp10,
    /// A header that may appear once appeared several times.
    #[error("duplicate {0} header")]
    DuplicateHeader(&'static str),
    /// A header value that must be text is not valid UTF-8.
    #[error("invalid {0} header")]
    BadHeaderValue(&'static str),
    /// `Last-Event-ID` is not `<seq>` or `<epoch>-<seq>`.
    #[error("invalid Last-Event-ID (want <seq> or <epoch>-<seq>)")]
    BadLastEventId,
    /// A line of the head ends in LF without CR (RFC 9112 2.2 lets a server refuse it;
    /// accepting it disagrees with stricter proxies in front).
    #[error("bare LF line ending (want CRLF)")]
    BareLf,
    /// `Expect` other than `100-continue` (417).
    #[error("unsupported Expect (only 100-continue)")]
    UnsupportedExpect,
    /// `Upgrade: websocket` was asked for but the handshake is invalid.
    #[error("bad WebSocket upgrade: {0}")]
    BadWebSocketUpgrade(&'static str),
}

impl HeadError {
    /// The HTTP status to answer with (the connection is closed afterwards).
    pub fn status(&self) -> u16 {
        match self {
            HeadError::HeadTooLarge | HeadError::TooManyHeaders => 431,
            HeadError::UnsupportedVersion => 505,
            HeadError::UnsupportedTransferEncoding => 501,
            HeadError::UnsupportedExpect => 417,
            HeadError::Malformed(_)
            | HeadError::BadContentLength
            | HeadError::ConflictingContentLength
            | HeadError::LengthAndTransferEncoding
            | HeadError::TransferEncodingInHttp10
            | HeadError::DuplicateHeader(_)
            | HeadError::BadHeaderValue(_)
            | HeadError::BadLastEventId
            | HeadError::BareLf
            | HeadError::BadWebSocketUpgrade(_) => 400,
        }
    }
}

/// Parses one request head from the start of `buf`.
///
/// `Ok(None)`: not a whole head yet, and `buf.len() <= limits.max_head`, so reading
/// more may complete it. `Ok(Some((head, consumed)))`: `buf[consumed..]` is the body
/// or the next pipelined request.
pub fn parse_head(buf: &[u8], limits: &Limits) -> Result<Option<(RequestHead, usize)>, HeadError> {
    let mut stack = [httparse::EMPTY_HEADER; STACK_HEADERS];
    let mut heap;
    let slots: &mut [httparse::Header<'_>] = if limits.max_headers <= STACK_HEADERS {
        &mut stack[..limits.max_headers]
    } else {
        heap = vec![httparse::EMPTY_HEADER; limits.max_headers];
        &mut heap
    };
    // Only the first `max_head` bytes are ever looked at: this bounds the work per
    // call, and makes the outcome depend on that window alone, so an error seen on
    // a prefix stays the same error however many bytes follow.
    let window = &buf[..buf.len().min(limits.max_head)];
    // httparse accepts bare LF. Parse only up to the first bare LF: a head that ends
    // before it is fine (the LF belongs to the body or the next request), an error
    // before it is reported as usual, and a head still open there is refused. The
    // outcome thus depends only on the bytes up to that LF, so no prefix of an input
    // answers differently from the whole (the fuzz invariant).
    let bare_lf = first_bare_lf(window);
    let scan = &window[..bare_lf.unwrap_or(window.len())];
    let mut req = httparse::Request::new(slots);
    match req.parse(scan) {
        Ok(httparse::Status::Complete(consumed)) => {
            return interpret(&req).map(|head| Some((head, consumed)))
        }
        Ok(httparse::Status::Partial) => {}
        // The version token may still be arriving: decided by the next bytes.
        Err(httparse::Error::Version) if classify_version(scan) == VersionClass::Undecided => {}
        Err(e) => return Err(map_httparse_error(e, scan)),
    }
    if bare_lf.is_some() {
        Err(HeadError::BareLf)
    } else if buf.len() > limits.max_head {
        Err(HeadError::HeadTooLarge)
    } else {
        Ok(None)
    }
}

/// Position of the first LF not preceded by CR.
fn first_bare_lf(window: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = window[from..].iter().position(|&b| b == b'\n') {
        let at = from + i;
        if at == 0 || window[at - 1] != b'\r' {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

fn map_httparse_error(e: httparse::Error, window: &[u8]) -> HeadError {
    match e {
        httparse::Error::TooManyHeaders => HeadError::TooManyHeaders,
        httparse::Error::Version => match classify_version(window) {
            VersionClass::Other => HeadError::UnsupportedVersion,
            VersionClass::Garbage => HeadError::Malformed("invalid request line"),
            // Unreachable: the caller handles it before mapping.
            VersionClass::Undecided => HeadError::Malformed("invalid request line"),
        },
        httparse::Error::HeaderName => HeadError::Malformed("invalid header name"),
        httparse::Error::HeaderValue => HeadError::Malformed("invalid header value"),
        httparse::Error::NewLine => HeadError::Malformed("invalid line ending"),
        httparse::Error::Token => HeadError::Malformed("invalid request line"),
        httparse::Error::Status => HeadError::Malformed("invalid request line"),
    }
}

/// Header-derived facts collected in one pass over the fields.
#[derive(Default)]
struct Fields<'a> {
    content_length: Option<u64>,
    transfer_encoding: Vec<&'a [u8]>,
    conn_close: bool,
    conn_keep_alive: bool,
    conn_upgrade: bool,
    upgrade_websocket: bool,
    accept_event_stream: bool,
    ws_key: Option<&'a [u8]>,
    ws_version: Option<&'a [u8]>,
    last_event_id: Option<&'a [u8]>,
    authorization: Option<&'a [u8]>,
    expect: Option<&'a [u8]>,
    host: Option<&'a [u8]>,
    origin: Option<&'a [u8]>,
}

fn interpret(req: &httparse::Request<'_, '_>) -> Result<RequestHead, HeadError> {
    // httparse guarantees all three are set on Complete.
    let method = Method::from_token(req.method.unwrap_or_default());
    let target = req.path.unwrap_or_default();
    let minor_version = req.version.unwrap_or_default();

    let mut f = Fields::default();
    for h in req.headers.iter() {
        let name = h.name;
        let value = trim_ows(h.value);
        if name.eq_ignore_ascii_case("content-length") {
            for item in value.split(|&b| b == b',') {
                let n = parse_content_length(trim_ows(item))?;
                match f.content_length {
                    Some(prev) if prev != n => return Err(HeadError::ConflictingContentLength),
                    _ => f.content_length = Some(n),
                }
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            f.transfer_encoding
                .extend(value.split(|&b| b == b',').map(trim_ows));
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(|&b| b == b',').map(trim_ows) {
                f.conn_close |= token.eq_ignore_ascii_case(b"close");
                f.conn_keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                f.conn_upgrade |= token.eq_ignore_ascii_case(b"upgrade");
            }
        } else if name.eq_ignore_ascii_case("upgrade") {
            f.upgrade_websocket |= value
                .split(|&b| b == b',')
                .any(|t| trim_ows(t).eq_ignore_ascii_case(b"websocket"));
        } else if name.eq_ignore_ascii_case("accept") {
            f.accept_event_stream |= contains_ignore_case(value, b"text/event-stream");
        } else if name.eq_ignore_ascii_case("sec-websocket-key") {
            set_once(&mut f.ws_key, value, "Sec-WebSocket-Key")?;
        } else if name.eq_ignore_ascii_case("sec-websocket-version") {
            set_once(&mut f.ws_version, value, "Sec-WebSocket-Version")?;
        } else if name.eq_ignore_ascii_case("last-event-id") {
            set_once(&mut f.last_event_id, value, "Last-Event-ID")?;
        } else if name.eq_ignore_ascii_case("authorization") {
            set_once(&mut f.authorization, value, "Authorization")?;
        } else if name.eq_ignore_ascii_case("expect") {
            set_once(&mut f.expect, value, "Expect")?;
        } else if name.eq_ignore_ascii_case("host") {
            // RFC 9112 3.2: more than one Host is a 400.
            set_once(&mut f.host, value, "Host")?;
        } else if name.eq_ignore_ascii_case("origin") {
            set_once(&mut f.origin, value, "Origin")?;
        }
    }

    let body = match (f.content_length, f.transfer_encoding.is_empty()) {
        (Some(_), false) => return Err(HeadError::LengthAndTransferEncoding),
        (None, false) if minor_version == 0 => return Err(HeadError::TransferEncodingInHttp10),
        (None, false) => {
            if f.transfer_encoding.len() == 1
                && f.transfer_encoding[0].eq_ignore_ascii_case(b"chunked")
            {
                BodyKind::Chunked
            } else {
                return Err(HeadError::UnsupportedTransferEncoding);
            }
        }
        (Some(0), true) | (None, true) => BodyKind::None,
        (Some(n), true) => BodyKind::Length(n),
    };

    let keep_alive = if f.conn_close {
        false
    } else {
        minor_version == 1 || f.conn_keep_alive
    };

    let websocket = if f.upgrade_websocket {
        Some(validate_upgrade(method, minor_version, &f)?)
    } else {
        None
    };

    let last_event_id = match f.last_event_id {
        None => None,
        Some([]) => return Err(HeadError::BadLastEventId),
        Some(v) => Some(crate::since::parse_positions(v).ok_or(HeadError::BadLastEventId)?),
    };
    let authorization = match f.authorization {
        None => None,
        Some(v) => Some(utf8(v, "Authorization")?.to_owned()),
    };
    let expect_continue = match f.expect {
        None => false,
        // RFC 9110 10.1.1: a 100-continue expectation in HTTP/1.0 is ignored.
        Some(v) if v.eq_ignore_ascii_case(b"100-continue") => minor_version == 1,
        Some(_) => return Err(HeadError::UnsupportedExpect),
    };

    let origin = match f.origin {
        None => None,
        Some(v) => Some(utf8(v, "Origin")?.to_owned()),
    };
    let (authority, path, query) = split_target(target);
    let host = match authority {
        Some("") => return Err(HeadError::Malformed("absolute-form target without a host")),
        Some(a) => Some(a.to_owned()),
        None => match f.host {
            None => None,
            Some(v) => Some(utf8(v, "Host")?.to_owned()),
        },
    };
    Ok(RequestHead {
        method,
        path: path.to_owned(),
        query: query.map(str::to_owned),
        minor_version,
        keep_alive,
        body,
        accept_event_stream: f.accept_event_stream,
        websocket,
        last_event_id,
        authorization,
        expect_continue,
        host,
        origin,
    })
}

/// RFC 6455 4.2.1: the checks a server must make on an opening handshake.
fn validate_upgrade(method: Method, minor: u8, f: &Fields<'_>) -> Result<WsUpgrade, HeadError> {
    if method != Method::Get {
        return Err(HeadError::BadWebSocketUpgrade("method must be GET"));
    }
    if minor != 1 {
        return Err(HeadError::BadWebSocketUpgrade("HTTP/1.1 required"));
    }
    if !f.conn_upgrade {
        return Err(HeadError::BadWebSocketUpgrade(
            "Connection must include upgrade",
        ));
    }
    match f.ws_version {
        Some(b"13") => {}
        Some(_) => {
            return Err(HeadError::BadWebSocketUpgrade(
                "Sec-WebSocket-Version must be 13",
            ))
        }
        None => {
            return Err(HeadError::BadWebSocketUpgrade(
                "missing Sec-WebSocket-Version",
            ))
        }
    }
    let key = f
        .ws_key
        .ok_or(HeadError::BadWebSocketUpgrade("missing Sec-WebSocket-Key"))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(key)
        .map_err(|_| HeadError::BadWebSocketUpgrade("Sec-WebSocket-Key is not base64"))?;
    if decoded.len() != 16 {
        return Err(HeadError::BadWebSocketUpgrade(
            "Sec-WebSocket-Key must encode 16 bytes",
        ));
    }
    // Valid base64 is ASCII, so this conversion cannot fail.
    let key = std::str::from_utf8(key)
        .expect("base64 is ASCII")
        .to_owned();
    Ok(WsUpgrade { key })
}

fn set_once<'a>(
    slot: &mut Option<&'a [u8]>,
    value: &'a [u8],
    name: &'static str,
) -> Result<(), HeadError> {
    if slot.is_some() {
        return Err(HeadError::DuplicateHeader(name));
    }
    *slot = Some(value);
    Ok(())
}

fn parse_content_length(v: &[u8]) -> Result<u64, HeadError> {
    parse_decimal(v).ok_or(HeadError::BadContentLength)
}

fn utf8<'a>(v: &'a [u8], name: &'static str) -> Result<&'a str, HeadError> {
    std::str::from_utf8(v).map_err(|_| HeadError::BadHeaderValue(name))
}

#[cfg(test)]
mod tests;
