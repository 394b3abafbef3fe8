//! Properties every `wire` parser must keep on any input, shared by the
//! deterministic fuzzer (`tests/fuzz.rs`) and the libFuzzer targets (`fuzz/`).
//!
//! Each `check_*` runs a parser on one input and panics if a property fails; the
//! parsers themselves must never panic. Not here: generating inputs.

#![allow(dead_code)] // each user calls a subset

pub mod targets;

use wire::{
    parse_batch, parse_batch_with, parse_edges, parse_head, parse_ws_frame, route, BatchLimits,
    BodyDecoder, BodyError, BodyKind, HeadError, Limits, Opcode, Since, WsError, WsMessageState,
};

/// What a check saw, so a fuzzer can assert it reached every outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// A whole head / body / frame.
    Complete,
    /// Needs more bytes.
    Partial,
    /// Refused with this HTTP status or WebSocket close code.
    Error(u16),
}

/// Statuses a head error may map to.
const HEAD_STATUSES: [u16; 5] = [400, 417, 431, 501, 505];

/// `parse_head` on `buf`, plus: consumed within bounds and the head's own bytes;
/// strict prefixes of a complete head are incomplete; an error is final (every
/// prefix is incomplete or the same error); incomplete means within `max_head`.
pub fn check_head(buf: &[u8], limits: &Limits, cuts: &[usize]) -> Outcome {
    let full = parse_head(buf, limits);
    match &full {
        Ok(Some((head, n))) => {
            assert!(*n <= buf.len() && *n <= limits.max_head, "consumed {n}");
            assert!(buf[..*n].ends_with(b"\n"), "a head ends with a line end");
            assert!(head.minor_version <= 1);
            assert_eq!(
                parse_head(&buf[..*n], limits),
                full,
                "a head is decided by its own bytes"
            );
            if let BodyKind::Length(0) = head.body {
                panic!("Content-Length: 0 is reported as BodyKind::None");
            }
            for &cut in cuts {
                let k = cut % *n;
                assert_eq!(
                    parse_head(&buf[..k], limits),
                    Ok(None),
                    "prefix {k} of a complete head"
                );
            }
        }
        Ok(None) => {
            assert!(buf.len() <= limits.max_head, "Ok(None) past max_head");
            for &cut in cuts {
                let k = cut % (buf.len() + 1);
                assert_eq!(
                    parse_head(&buf[..k], limits),
                    Ok(None),
                    "prefix {k} of a partial head"
                );
            }
        }
        Err(e) => {
            check_head_error(e);
            for &cut in cuts {
                let k = cut % (buf.len() + 1);
                match parse_head(&buf[..k], limits) {
                    Ok(None) => {}
                    Err(pe) => assert_eq!(
                        &pe,
                        e,
                        "prefix {k} errs differently; input {:?}",
                        String::from_utf8_lossy(buf)
                    ),
                    Ok(Some(_)) => panic!("prefix {k} complete but the whole input errs: {e}"),
                }
            }
        }
    }
    match full {
        Ok(Some(_)) => Outcome::Complete,
        Ok(None) => Outcome::Partial,
        Err(e) => Outcome::Error(e.status()),
    }
}

fn check_head_error(e: &HeadError) {
    assert!(
        HEAD_STATUSES.contains(&e.status()),
        "{e:?} -> {}",
        e.status()
    );
    let msg = e.to_string();
    assert!(
        !msg.is_empty() && msg.len() < 100 && !msg.contains('\n'),
        "{msg:?}"
    );
}

/// Decodes `input` whole and again split at `cuts`: same output, same bytes
/// consumed, same outcome. Consumed never exceeds the input, output never
/// exceeds the limit or the bytes consumed, a finished decoder takes nothing more.
pub fn check_body(kind: BodyKind, limit: usize, input: &[u8], cuts: &[usize]) -> Outcome {
    let whole = decode(kind, limit, input, &[]);
    let split = decode(kind, limit, input, cuts);
    assert_eq!(whole, split, "split at {cuts:?} changes the result");
    if let Ok((out, consumed, _)) = &whole {
        assert!(out.len() <= limit && out.len() <= *consumed && *consumed <= input.len());
    }
    match whole {
        Ok((_, _, true)) => Outcome::Complete,
        Ok((_, _, false)) => Outcome::Partial,
        Err(e) => {
            assert!(matches!(e.status(), 400 | 413), "{e:?}");
            Outcome::Error(e.status())
        }
    }
}

type Decoded = Result<(Vec<u8>, usize, bool), BodyError>;

fn decode(kind: BodyKind, limit: usize, input: &[u8], cuts: &[usize]) -> Decoded {
    let mut d = BodyDecoder::new(kind, limit);
    let mut out = Vec::new();
    let mut pos = 0;
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    bounds.push(input.len());
    bounds.sort_unstable();
    for end in bounds {
        if end < pos {
            continue;
        }
        let before = out.len();
        let (n, done) = d.handle_bytes(&input[pos..end], &mut out)?;
        assert!(n <= end - pos, "consumed {n} of {}", end - pos);
        assert!(out.len() - before <= n, "more output than input");
        pos += n;
        if done {
            assert_eq!(
                d.handle_bytes(&input[pos..], &mut out),
                Ok((0, true)),
                "done is final"
            );
            return Ok((out, pos, true));
        }
        assert_eq!(
            pos, end,
            "an unfinished decoder consumes everything it is given"
        );
    }
    Ok((out, pos, false))
}

/// `parse_ws_frame` on `buf`, plus: consumed = header + payload within bounds;
/// strict prefixes of a complete frame are incomplete; an error is final.
pub fn check_ws_frame(buf: &[u8], max_payload: usize, cuts: &[usize]) -> Outcome {
    let full = parse_ws_frame(buf, max_payload);
    match &full {
        Ok(Some((frame, n))) => {
            assert!(*n <= buf.len());
            assert!(frame.payload.len() <= max_payload);
            let header = *n - frame.payload.len();
            assert!([6, 8, 14].contains(&header), "header {header}");
            if frame.opcode == Opcode::Close
                || frame.opcode == Opcode::Ping
                || frame.opcode == Opcode::Pong
            {
                assert!(frame.fin && frame.payload.len() <= 125);
            }
            assert_eq!(
                parse_ws_frame(&buf[..*n], max_payload),
                full,
                "decided by its own bytes"
            );
            for &cut in cuts {
                let k = cut % *n;
                assert_eq!(
                    parse_ws_frame(&buf[..k], max_payload),
                    Ok(None),
                    "prefix {k}"
                );
            }
        }
        Ok(None) => {
            for &cut in cuts {
                let k = cut % (buf.len() + 1);
                assert_eq!(
                    parse_ws_frame(&buf[..k], max_payload),
                    Ok(None),
                    "prefix {k}"
                );
            }
        }
        Err(e) => {
            assert!([1002, 1007, 1009].contains(&e.close_code()), "{e:?}");
            for &cut in cuts {
                let k = cut % (buf.len() + 1);
                match parse_ws_frame(&buf[..k], max_payload) {
                    Ok(None) => {}
                    Err(pe) => assert_eq!(pe, *e, "prefix {k}"),
                    Ok(Some(_)) => panic!("prefix {k} complete but the whole input errs: {e}"),
                }
            }
        }
    }
    match full {
        Ok(Some(_)) => Outcome::Complete,
        Ok(None) => Outcome::Partial,
        Err(e) => Outcome::Error(e.close_code()),
    }
}

/// Parses a stream of frames through `WsMessageState` until the input runs out or
/// an error; every text message accepted must be valid UTF-8 as a whole, and every
/// complete text message rejected for UTF-8 must be invalid as a whole.
pub fn check_ws_stream(buf: &[u8], max_payload: usize) {
    let mut state = WsMessageState::new();
    let mut pos = 0;
    let mut text: Option<Vec<u8>> = None;
    while let Ok(Some((frame, n))) = parse_ws_frame(&buf[pos..], max_payload) {
        pos += n;
        let was_text_open = text.is_some();
        let was_open = state.in_message();
        let result = state.handle_frame(&frame);
        match (&result, frame.opcode) {
            (Ok(()), Opcode::Text) if !frame.fin => text = Some(frame.payload.clone()),
            (Ok(()), Opcode::Text) => assert!(std::str::from_utf8(&frame.payload).is_ok()),
            (Ok(()), Opcode::Continuation) if was_text_open => {
                // `text` is Some: was_text_open.
                let t = text.as_mut().expect("open text message");
                t.extend_from_slice(&frame.payload);
                if frame.fin {
                    assert!(std::str::from_utf8(t).is_ok(), "accepted invalid UTF-8");
                    text = None;
                }
            }
            (Err(WsError::InvalidUtf8), Opcode::Text) if frame.fin => {
                assert!(std::str::from_utf8(&frame.payload).is_err());
            }
            (Err(WsError::InvalidUtf8), Opcode::Continuation) if frame.fin => {
                let mut t = text.take().expect("open text message");
                t.extend_from_slice(&frame.payload);
                assert!(std::str::from_utf8(&t).is_err(), "rejected valid UTF-8");
            }
            (Err(WsError::InvalidUtf8), _) => {
                // Early rejection of a fragment: the message so far cannot be a
                // prefix of valid UTF-8 whatever follows.
                let mut t = text.take().unwrap_or_default();
                t.extend_from_slice(&frame.payload);
                match std::str::from_utf8(&t) {
                    Ok(_) => panic!("rejected a valid prefix"),
                    Err(e) => assert!(
                        e.error_len().is_some(),
                        "rejected an incomplete but valid prefix"
                    ),
                }
            }
            (Err(_), _) => {}
            (Ok(()), _) => {}
        }
        match result {
            Err(_) => break,
            Ok(())
                if frame.opcode == Opcode::Close
                    || frame.opcode == Opcode::Ping
                    || frame.opcode == Opcode::Pong =>
            {
                assert_eq!(
                    state.in_message(),
                    was_open,
                    "control frames leave messages alone"
                );
            }
            Ok(()) => assert_eq!(
                state.in_message(),
                !frame.fin,
                "a data frame opens or ends a message"
            ),
        }
    }
}

/// `parse_batch`: an error names a line that exists; success yields no more
/// items than lines.
pub fn check_batch(body: &[u8]) {
    check_batch_with(body, &BatchLimits::default());
    let lines = body.split(|&b| b == b'\n').count();
    match parse_batch(body) {
        Ok(items) => assert!(items.len() <= lines),
        Err(e) => {
            assert!(e.line >= 1 && e.line <= lines, "line {} of {lines}", e.line);
            assert!(matches!(e.status(), 400 | 413));
        }
    }
}

/// `parse_batch_with` under `limits`: items within both limits; an error names an
/// existing line, is 413 exactly when a limit was hit, and reads as one short line;
/// a success agrees with a plain `serde_json::Value` reading of every line (the
/// typed parser may only be stricter, except for out-of-range numbers in ignored
/// fields); raising the limits never turns a success
/// into something else.
pub fn check_batch_with(body: &[u8], limits: &BatchLimits) {
    let lines: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
    match parse_batch_with(body, limits) {
        Ok(items) => {
            assert!(items.len() <= limits.max_items && items.len() <= lines.len());
            let mut it = items.iter();
            for raw in &lines {
                let text = raw.strip_suffix(b"\r").unwrap_or(raw);
                if text.iter().all(|b| b.is_ascii_whitespace()) {
                    continue;
                }
                let item = it.next().expect("one item per non-blank line");
                assert!(item.data.len() <= limits.max_item);
                let v: serde_json::Value = match serde_json::from_slice(text) {
                    Ok(v) => v,
                    // Leniency 1: a number past f64's range in a field the batch
                    // ignores is valid JSON grammar, skipped unread; a Value cannot
                    // hold it.
                    Err(e) if e.to_string().starts_with("number out of range") => continue,
                    // Likewise an unpaired surrogate escape (`"\ude00"`) in an ignored
                    // field: the grammar allows it (RFC 8259 §8.2), a Value's String
                    // cannot hold it, and in `data` it is refused.
                    Err(e)
                        if ["lone leading surrogate", "unexpected end of hex escape"]
                            .iter()
                            .any(|m| e.to_string().starts_with(m)) =>
                    {
                        continue
                    }
                    Err(e) => panic!("accepted a line that is not JSON: {e}"),
                };
                assert_eq!(v["subject"].as_u64(), Some(item.subject));
                assert_eq!(v["data"].as_str().map(str::as_bytes), Some(&item.data[..]));
            }
            assert!(it.next().is_none());
            let wider = BatchLimits {
                max_item: limits.max_item.saturating_mul(2),
                max_items: limits.max_items.saturating_mul(2),
            };
            assert_eq!(parse_batch_with(body, &wider), Ok(items));
        }
        Err(e) => {
            assert!(e.line >= 1 && e.line <= lines.len(), "line {}", e.line);
            assert_eq!(e.status(), if e.too_large { 413 } else { 400 });
            let msg = e.to_string();
            assert!(msg.len() < 200 && !msg.contains('\n'), "{msg:?}");
        }
    }
}

/// Every head that parses routes without panicking, to a status the failure table
/// names; an absolute-form target routes exactly like its origin form.
pub fn check_route(buf: &[u8]) {
    let Ok(Some((head, _))) = parse_head(buf, &Limits::default()) else {
        return;
    };
    let routed = route(&head);
    if let Err(e) = &routed {
        assert!(matches!(e.status(), 400 | 404 | 405 | 426), "{e:?}");
    }
    // A session name is 1 to 64 bytes of `A-Z a-z 0-9 _ -`, whatever the query held;
    // a control is a POST that names one.
    let session_ok = |s: &str| {
        (1..=64).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    match &routed {
        Ok(wire::Route::Control(c)) => {
            assert_eq!(head.method, wire::Method::Post);
            assert!(session_ok(&c.session), "{c:?}");
            assert!(c.subscribe || c.since.is_none(), "{c:?}");
        }
        Ok(wire::Route::Subscribe {
            session: Some(s), ..
        }) => assert!(session_ok(s), "{s:?}"),
        // A client's own token on a publish (client publish over HTTP) comes from
        // the query's one `token=`.
        Ok(
            wire::Route::Publish { token: Some(_), .. }
            | wire::Route::PublishChannel { token: Some(_), .. }
            | wire::Route::PublishBatch { token: Some(_), .. },
        ) => {
            assert_eq!(head.method, wire::Method::Post);
            let q = head.query.as_deref().unwrap_or_default();
            let named = |p: &&str| p.split_once('=').map_or(*p, |(k, _)| k) == "token";
            assert_eq!(q.split('&').filter(named).count(), 1, "{q:?}");
        }
        _ => {}
    }
    if head.path.starts_with('/') {
        let target = match &head.query {
            Some(q) => format!("{}?{q}", head.path),
            None => head.path.clone(),
        };
        let absolute = format!("GET http://h{target} HTTP/1.1\r\n\r\n");
        let origin = format!("GET {target} HTTP/1.1\r\n\r\n");
        let a = parse_head(absolute.as_bytes(), &Limits::default());
        let o = parse_head(origin.as_bytes(), &Limits::default());
        if let (Ok(Some((a, _))), Ok(Some((o, _)))) = (a, o) {
            assert_eq!((&a.path, &a.query), (&o.path, &o.query));
            assert_eq!(route(&a), route(&o), "{target:?}");
        }
    }
}

/// `Since::parse` accepts exactly the canonical forms: what it accepts prints back
/// byte for byte.
pub fn check_since(v: &[u8]) {
    if let Some(s) = Since::parse(v) {
        assert_eq!(s.to_string().as_bytes(), v);
    }
    // A composite position (channels): what parses writes back the same, one part
    // per `_`, at most 256 parts.
    if let Some(parts) = wire::parse_positions(v) {
        assert!(parts.len() <= 256);
        assert_eq!(parts.len(), v.split(|&b| b == b'_').count());
        let mut out = Vec::new();
        wire::write_positions(&mut out, parts);
        assert_eq!(out, v);
    }
}

/// `parse_edges`: same shape of properties as [`check_batch`].
pub fn check_edges(body: &[u8]) {
    let lines = body.split(|&b| b == b'\n').count();
    match parse_edges(body) {
        Ok(edges) => {
            assert!(edges.len() <= lines);
            // The same list under a limit of its own length passes; one less is 413.
            assert_eq!(wire::parse_edges_with(body, edges.len()), Ok(edges.clone()));
            if let Some(fewer) = edges.len().checked_sub(1) {
                assert_eq!(
                    wire::parse_edges_with(body, fewer).map_err(|e| e.status()),
                    Err(413)
                );
            }
        }
        Err(e) => {
            assert!(e.line >= 1 && e.line <= lines, "line {} of {lines}", e.line);
            assert!(matches!(e.status(), 400 | 413));
        }
    }
}

/// HTTP/2 frames as the gateway reads them: `parse_frame` again and again from the
/// front of `buf`. A frame uses no more than the buffer and its header says how much;
/// every strict prefix of a parsed frame is incomplete; an error is final (it comes
/// from the header alone, or the whole frame); then the response reader (the other
/// untrusted-shaped input of the h2 layer, fed the same bytes in `cut`-sized pieces).
pub fn check_h2_frames(buf: &[u8], max_frame: u32, cut: usize) -> Outcome {
    use wire::h2::{parse_frame, parse_settings, Frame, ResponseReader};
    let mut pos = 0;
    let mut outcome = Outcome::Partial;
    while pos < buf.len() {
        let rest = &buf[pos..];
        match parse_frame(rest, max_frame) {
            Ok(Some((frame, used))) => {
                assert!(
                    used >= 9 && used <= rest.len(),
                    "used {used} of {}",
                    rest.len()
                );
                let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
                assert_eq!(used, 9 + len, "a frame is its header and its length");
                for p in [0, 8, used - 1] {
                    assert_eq!(parse_frame(&rest[..p], max_frame), Ok(None), "prefix {p}");
                }
                if let Frame::Settings { params, .. } = frame {
                    assert_eq!(parse_settings(params).count() * 6, params.len());
                }
                if let Frame::Data { data, flow_len, .. } = frame {
                    assert!(data.len() <= flow_len as usize);
                }
                pos += used;
                outcome = Outcome::Complete;
            }
            Ok(None) => {
                assert!(rest.len() < 9 + max_frame as usize);
                break;
            }
            Err(e) => {
                assert!(e.code <= 0xd, "an RFC 9113 error code: {e}");
                // Final: the whole remaining input gives the same error.
                let mut longer = rest.to_vec();
                longer.extend_from_slice(&[0; 16]);
                assert_eq!(parse_frame(&longer, max_frame).unwrap_err(), e);
                outcome = Outcome::Error(e.code as u16);
                break;
            }
        }
    }
    let mut reader = ResponseReader::default();
    let mut ended = false;
    for piece in buf.chunks(cut.max(1)) {
        let fed = reader.feed(piece, |part| {
            assert!(!ended, "nothing after the end");
            if part == wire::h2::Part::End {
                ended = true;
            }
        });
        if fed.is_err() {
            break;
        }
    }
    outcome
}

/// One HPACK block: never a panic; fields are handed out only within the caps, and
/// what was handed out is what `Decoded` counts up to the cap; the dynamic table holds
/// at most what 4,096 bytes allow. False on a decoding error (the connection ends).
pub fn check_hpack_block(
    decoder: &mut wire::h2::hpack::Decoder,
    block: &[u8],
    caps: wire::h2::hpack::Caps,
) -> bool {
    let (mut handed, mut size) = (0usize, 0usize);
    let result = decoder.decode(block, caps, |name, value| {
        handed += 1;
        size += name.len() + value.len() + 32;
    });
    assert!(decoder.table_len() <= wire::h2::hpack::DEFAULT_TABLE / 32);
    match result {
        Ok(done) => {
            assert!(handed <= caps.fields && size <= caps.list_size);
            assert!(handed <= done.fields);
            if !done.capped {
                assert_eq!((handed, size), (done.fields, done.list_size));
            }
            true
        }
        Err(_) => false,
    }
}
