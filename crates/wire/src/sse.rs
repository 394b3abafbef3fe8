//! Server-Sent Events (A2): the response head with `retry:`, message events,
//! per-recipient `id:` lines, gap notices and comment heartbeats.
//!
//! The body is not chunk-encoded: an SSE response is sent until the connection
//! closes, so `sse_data` bytes are the same for every recipient and are encoded
//! once per message. Not here: history and resume (the router keeps sequences).

use crate::Since;
use std::io::Write as _;

/// The response head, followed in the same bytes by `retry: <ms>` for the client.
/// CORS `*`: an `EventSource` on any origin may subscribe (no credentials involved).
pub fn write_sse_head(out: &mut Vec<u8>, retry_ms: u32) {
    out.extend_from_slice(
        b"HTTP/1.1 200 OK\r\n\
          Content-Type: text/event-stream\r\n\
          Cache-Control: no-cache\r\n\
          Connection: keep-alive\r\n\
          X-Accel-Buffering: no\r\n\
          Access-Control-Allow-Origin: *\r\n\
          \r\n",
    );
    // Writing into a Vec cannot fail.
    write!(out, "retry: {retry_ms}\n\n").expect("Vec write");
}

/// The data lines of one event: one `data: <line>\n` per line of `payload`
/// (split on `\r\n`, `\r` and `\n`, the line ends EventSource recognises), then
/// the blank line that dispatches it. A trailing newline in the payload survives
/// as an empty last `data:` line, so the client sees exactly `payload`.
pub fn write_sse_data(out: &mut Vec<u8>, payload: &[u8]) {
    out.reserve(payload.len() + 8);
    let mut rest = payload;
    loop {
        out.extend_from_slice(b"data: ");
        match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            Some(i) => {
                out.extend_from_slice(&rest[..i]);
                out.push(b'\n');
                let skip = if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                rest = &rest[i + skip..];
            }
            None => {
                out.extend_from_slice(rest);
                out.push(b'\n');
                break;
            }
        }
    }
    out.push(b'\n');
}

/// The `id:` line of an event (sent just before its `sse_data`, per recipient):
/// `<epoch>-<seq>` (SPEC B6), the form `Last-Event-ID` brings back as a [`Since`].
pub fn write_sse_id(out: &mut Vec<u8>, position: Since) {
    // Writing into a Vec cannot fail.
    writeln!(out, "id: {position}").expect("Vec write");
}

/// An `event: gap` event: messages before sequence `first_available` of `epoch`
/// were lost (history window passed, the server restarted, or dropped for a slow
/// consumer). Its data is JSON: `{"first":<seq>,"epoch":<epoch>}` (`epoch` is
/// `null` while the user has no history). It carries no `id:`; the next event's id
/// is the new resume point.
pub fn write_sse_gap(out: &mut Vec<u8>, first_available: u64, epoch: Option<u32>) {
    let epoch = epoch.map_or("null".to_string(), |e| e.to_string());
    // Writing into a Vec cannot fail.
    write!(
        out,
        "event: gap\ndata: {{\"first\":{first_available},\"epoch\":{epoch}}}\n\n"
    )
    .expect("Vec write");
}

/// A comment line: keeps proxies and the client's idle timers from closing the stream.
pub const SSE_HEARTBEAT: &[u8] = b": hb\n\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(write: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        write(&mut out);
        out
    }
    fn sse_head(retry_ms: u32) -> Vec<u8> {
        enc(|o| write_sse_head(o, retry_ms))
    }
    fn sse_data(payload: &[u8]) -> Vec<u8> {
        enc(|o| write_sse_data(o, payload))
    }
    fn sse_id(seq: u64) -> Vec<u8> {
        enc(|o| write_sse_id(o, Since { epoch: None, seq }))
    }
    fn sse_gap(first: u64) -> Vec<u8> {
        enc(|o| write_sse_gap(o, first, None))
    }

    #[test]
    fn head_has_retry_and_no_framing() {
        let h = String::from_utf8(sse_head(3000)).unwrap();
        assert!(h.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(h.contains("\r\nContent-Type: text/event-stream\r\n"));
        assert!(h.contains("\r\nCache-Control: no-cache\r\n"));
        assert!(h.contains("\r\nConnection: keep-alive\r\n"));
        assert!(!h.contains("Transfer-Encoding") && !h.contains("Content-Length"));
        assert!(h.ends_with("\r\n\r\nretry: 3000\n\n"));
    }

    #[test]
    fn data_splits_every_line_ending() {
        assert_eq!(sse_data(b"hello"), b"data: hello\n\n");
        assert_eq!(sse_data(b"a\nb"), b"data: a\ndata: b\n\n");
        assert_eq!(sse_data(b"a\r\nb\rc"), b"data: a\ndata: b\ndata: c\n\n");
        assert_eq!(sse_data(b"a\n\nb"), b"data: a\ndata: \ndata: b\n\n");
        assert_eq!(sse_data(b"a\r\r\nb"), b"data: a\ndata: \ndata: b\n\n");
        assert_eq!(sse_data(b"end\n"), b"data: end\ndata: \n\n");
        assert_eq!(sse_data(b""), b"data: \n\n");
        assert_eq!(sse_data(b" lead"), b"data:  lead\n\n");
    }

    /// The EventSource parsing algorithm (HTML 9.2.6) for data fields, to check that
    /// what we encode decodes to the original payload.
    fn eventsource_data(stream: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(stream);
        let mut data = String::new();
        for line in text.split('\n') {
            if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
                data.push('\n');
            }
        }
        data.pop();
        data.into_bytes()
    }

    #[test]
    fn data_round_trips_through_eventsource_rules() {
        for p in [&b"x"[..], b"a\nb", b"\n", b"a\r\nb\n\nc\r", b" sp", b"x:y"] {
            let normalised = String::from_utf8_lossy(p)
                .replace("\r\n", "\n")
                .replace('\r', "\n");
            assert_eq!(
                eventsource_data(&sse_data(p)),
                normalised.as_bytes(),
                "{p:?}"
            );
        }
    }

    #[test]
    fn id_gap_and_heartbeat() {
        assert_eq!(sse_id(17), b"id: 17\n");
        assert_eq!(
            sse_gap(100),
            b"event: gap\ndata: {\"first\":100,\"epoch\":null}\n\n"
        );
        let mut with_epoch = Vec::new();
        write_sse_id(
            &mut with_epoch,
            Since {
                epoch: Some(9),
                seq: 17,
            },
        );
        write_sse_gap(&mut with_epoch, 3, Some(9));
        assert_eq!(
            with_epoch,
            b"id: 9-17\nevent: gap\ndata: {\"first\":3,\"epoch\":9}\n\n"
        );
        assert_eq!(SSE_HEARTBEAT, b": hb\n\n");
    }
}
