//! HTTP/1.1 chunked streaming (A1): the response head, one chunk per message,
//! heartbeats and the terminator. Encoded once per message and shared.
//!
//! Not here: deciding when to send them (the gateway's timing wheel does).

use crate::Since;
use std::io::Write as _;

/// The response head of a chunked stream. Any origin may read it (CORS `*`): a
/// subscription carries no credentials, so browsers on other origins can use it.
pub fn write_stream_head(out: &mut Vec<u8>) {
    out.extend_from_slice(
        b"HTTP/1.1 200 OK\r\n\
      Content-Type: text/plain; charset=utf-8\r\n\
      Transfer-Encoding: chunked\r\n\
      Cache-Control: no-cache\r\n\
      X-Accel-Buffering: no\r\n\
      Access-Control-Allow-Origin: *\r\n\
      \r\n",
    );
}

/// The response head of a stream for an HTTP/1.0 client, which cannot read chunked
/// bodies: no `Transfer-Encoding`, the body ends when the connection closes
/// (RFC 9112 6.3, close-delimited). Its messages are [`write_stream_line`]s.
pub fn write_stream_head_http10(out: &mut Vec<u8>) {
    out.extend_from_slice(
        b"HTTP/1.1 200 OK\r\n\
      Content-Type: text/plain; charset=utf-8\r\n\
      Connection: close\r\n\
      Cache-Control: no-cache\r\n\
      X-Accel-Buffering: no\r\n\
      Access-Control-Allow-Origin: *\r\n\
      \r\n",
    );
}

/// A line of a close-delimited (HTTP/1.0) stream: `parts` then a newline, unframed.
pub fn write_stream_line(out: &mut Vec<u8>, parts: &[&[u8]]) {
    for part in parts {
        out.extend_from_slice(part);
    }
    out.push(b'\n');
}

/// One chunk whose data is the concatenation of `parts`:
/// `<hex len>\r\n<parts…>\r\n`. No parts (or only empty ones) yield no bytes at
/// all, because an empty chunk would end the stream.
pub fn write_chunk(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len == 0 {
        return;
    }
    out.reserve(len + 20);
    // Writing into a Vec cannot fail.
    write!(out, "{len:x}\r\n").expect("Vec write");
    for part in parts {
        out.extend_from_slice(part);
    }
    out.extend_from_slice(b"\r\n");
}

/// A message on a stream: one chunk holding the payload and a newline, so line
/// readers (curl, classic comet clients) see one message per line.
pub fn write_stream_message(out: &mut Vec<u8>, payload: &[u8]) {
    write_chunk(out, &[payload, b"\n"]);
}

/// The first chunk of a stream, naming the connected user: `welcome <id>\n`.
pub fn write_welcome_chunk(out: &mut Vec<u8>, user: u64) {
    let mut line = [0u8; 32];
    let mut cursor = std::io::Cursor::new(&mut line[..]);
    // "welcome " + 20 digits + "\n" fits in 32 bytes.
    writeln!(cursor, "welcome {user}").expect("fits in 32 bytes");
    let n = cursor.position() as usize;
    write_chunk(out, &[&line[..n]]);
}

/// The line a resuming stream (`?since=`, SPEC B6) gets after its welcome:
/// `position <epoch>-<seq>\n` (or `position <seq>` while the user has no history),
/// with ` gap` before the newline when messages after the client's position were
/// lost. The messages that follow are `seq + 1`, `seq + 2`, … of that epoch.
pub fn write_stream_position(out: &mut Vec<u8>, position: Since, gap: bool) {
    let line = format!("position {position}{}\n", if gap { " gap" } else { "" });
    write_chunk(out, &[line.as_bytes()]);
}

/// A heartbeat chunk carrying one newline (non-empty: an empty chunk ends the stream).
pub const STREAM_HEARTBEAT: &[u8] = b"1\r\n\n\r\n";
/// The last chunk, ending a stream (no trailers).
pub const STREAM_END: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(write: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        write(&mut out);
        out
    }
    fn stream_head() -> Vec<u8> {
        enc(write_stream_head)
    }
    fn chunk(payload: &[u8]) -> Vec<u8> {
        enc(|o| write_chunk(o, &[payload]))
    }
    fn welcome_chunk(user: u64) -> Vec<u8> {
        enc(|o| write_welcome_chunk(o, user))
    }

    #[test]
    fn a_message_is_one_newline_terminated_chunk() {
        assert_eq!(enc(|o| write_stream_message(o, b"hi")), b"3\r\nhi\n\r\n");
        assert_eq!(enc(|o| write_chunk(o, &[b"", b""])), b"");
    }
    use crate::body::BodyDecoder;
    use crate::head::BodyKind;

    #[test]
    fn head_is_chunked_200() {
        let h = String::from_utf8(stream_head()).unwrap();
        assert!(h.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(h.contains("\r\nTransfer-Encoding: chunked\r\n"));
        assert!(h.contains("\r\nContent-Type: text/plain; charset=utf-8\r\n"));
        assert!(h.contains("\r\nCache-Control: no-cache\r\n"));
        assert!(h.ends_with("\r\n\r\n"));
        assert!(!h.contains("Content-Length"));
    }

    #[test]
    fn chunks_are_hex_framed() {
        assert_eq!(chunk(b"hello"), b"5\r\nhello\r\n");
        assert_eq!(chunk(&[b'x'; 255])[..4], *b"ff\r\n");
        assert_eq!(chunk(b""), b"");
        assert_eq!(welcome_chunk(42), b"b\r\nwelcome 42\n\r\n");
    }

    #[test]
    fn a_stream_decodes_with_our_own_chunked_decoder() {
        let mut s = welcome_chunk(7);
        s.extend_from_slice(STREAM_HEARTBEAT);
        s.extend_from_slice(&chunk(b"msg"));
        s.extend_from_slice(STREAM_END);
        let mut out = Vec::new();
        let mut d = BodyDecoder::new(BodyKind::Chunked, 1 << 20);
        assert_eq!(d.handle_bytes(&s, &mut out), Ok((s.len(), true)));
        assert_eq!(out, b"welcome 7\n\nmsg");
    }
}
