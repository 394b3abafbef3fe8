//! RFC 9113 cases that h2spec checks (it is not installable here: a Go tool in none of
//! Debian, PyPI or npm), each with a raw frame client over TLS against `myriad serve`:
//! SETTINGS acknowledged, unknown frame types, flags and settings ignored, PING
//! answered, header blocks in CONTINUATION frames, padding and priority, frames inside
//! a header block, stream states (idle, half-closed, closed), stream ids going
//! backwards, flow-control overflow, trailers, content-length, the client's GOAWAY.
//! Malformed frames (sizes, stream 0, HPACK) are in `h2.rs`.

mod common;
mod h2_common;
mod tls_common;

use h2_common::*;
use tls_common::*;

// RFC 9113 numbers, independent of the server's.
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const PRIORITY: u8 = 2;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

const NO_ERROR: u32 = 0x0;
const PROTOCOL_ERROR: u32 = 0x1;
const FLOW_CONTROL_ERROR: u32 = 0x3;
const STREAM_CLOSED: u32 = 0x5;
const REFUSED_STREAM: u32 = 0x7;

fn code_of(f: &RawFrame) -> u32 {
    let at = if f.kind == GOAWAY { 4 } else { 0 };
    u32::from_be_bytes(f.payload[at..at + 4].try_into().unwrap())
}

fn sse(path: &str) -> Vec<u8> {
    get_block(path, "text/event-stream")
}

/// HEADERS for `GET path` (SSE), END_STREAM: a subscription on `stream`.
fn subscribe(raw: &mut RawH2, stream: u32, path: &str) {
    raw.send(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        stream,
        &sse(path),
    ));
    let head = raw.until("the response HEADERS", |f| f.stream == stream);
    assert_eq!((head.kind, head.payload[0]), (HEADERS, 0x88), "{head:?}");
}

/// Reads until a RST_STREAM on `stream`: its code.
fn reset_code(raw: &mut RawH2, stream: u32) -> u32 {
    let f = raw.until("RST_STREAM", |f| {
        assert_ne!(f.kind, GOAWAY, "GOAWAY instead of RST_STREAM: {f:?}");
        f.kind == RST_STREAM && f.stream == stream
    });
    code_of(&f)
}

#[test]
fn settings_acked_unknown_frames_flags_and_settings_ignored_pings_answered() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    // An unknown setting (0x99) is ignored; the SETTINGS is acknowledged.
    let mut raw = RawH2::start(&server, &pki.ca_file, &[(0x99, 7)]);
    let ack = raw.until("SETTINGS ACK", |f| f.kind == SETTINGS && f.flags & 1 == 1);
    assert!(ack.payload.is_empty());
    // Unknown frame types (on stream 0 and on an idle stream) are ignored, as are
    // unknown flags on a PING.
    raw.send(&frame(0xfa, 0xff, 0, b"extension"));
    raw.send(&frame(0x20, 0, 9, b"extension"));
    raw.send(&frame(PING, 0xfe, 0, b"unknown!"));
    let f = raw.until("PING ACK", |f| f.kind == PING);
    assert_eq!((f.flags, &f.payload[..]), (1, &b"unknown!"[..]));
    // A PING ACK is not answered: the next PING's ACK is the first PING to come.
    raw.send(&frame(PING, 1, 0, b"an ack!!"));
    let before = raw.ping(*b"answered");
    assert!(before.iter().all(|f| f.kind != PING), "{before:?}");
    // The reserved bit of a stream id is ignored.
    raw.send(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        0x8000_0001,
        &sse("/sse/1"),
    ));
    let head = raw.until("HEADERS on 1", |f| f.stream == 1);
    assert_eq!(head.kind, HEADERS, "{head:?}");
}

#[test]
fn header_blocks_in_continuation_frames_with_padding_and_priority() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let mut raw = RawH2::start(&server, &pki.ca_file, &[]);
    // One block in three pieces: padded HEADERS with priority, two CONTINUATIONs.
    let block = sse("/sse/1");
    let (a, rest) = block.split_at(5);
    let (b, c) = rest.split_at(7);
    let mut first = vec![4u8]; // pad length
    first.extend_from_slice(&[0, 0, 0, 0, 200]); // depends on stream 0, weight 201
    first.extend_from_slice(a);
    first.extend_from_slice(&[0; 4]);
    let mut bytes = frame(HEADERS, END_STREAM | PADDED | PRIORITY_FLAG, 1, &first);
    bytes.extend(frame(CONTINUATION, 0, 1, b));
    bytes.extend(frame(CONTINUATION, END_HEADERS, 1, c));
    raw.send(&bytes);
    let head = raw.until("HEADERS on 1", |f| f.stream == 1);
    assert_eq!((head.kind, head.payload[0]), (HEADERS, 0x88), "{head:?}");
    // PRIORITY frames on an open and on an idle stream are accepted and change
    // nothing; a stream after the idle one still opens.
    raw.send(&frame(PRIORITY, 0, 1, &[0, 0, 0, 0, 16]));
    raw.send(&frame(PRIORITY, 0, 7, &[0, 0, 0, 1, 16]));
    raw.ping(*b"priority");
    subscribe(&mut raw, 9, "/sse/9");

    // What breaks a header block is a connection error PROTOCOL_ERROR.
    let open = |rest: Vec<u8>| {
        let mut bytes = frame(HEADERS, END_STREAM, 1, &sse("/sse/1")[..4]);
        bytes.extend(rest);
        bytes
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "PRIORITY inside a block",
            open(frame(PRIORITY, 0, 1, &[0, 0, 0, 0, 16])),
        ),
        ("PING inside a block", open(frame(PING, 0, 0, &[0; 8]))),
        (
            "CONTINUATION on another stream",
            open(frame(CONTINUATION, END_HEADERS, 3, &[])),
        ),
        (
            "HEADERS of another stream inside a block",
            open(frame(HEADERS, END_HEADERS, 3, &sse("/sse/3"))),
        ),
        ("CONTINUATION after END_HEADERS", {
            let mut b = frame(HEADERS, END_HEADERS | END_STREAM, 1, &sse("/sse/1"));
            b.extend(frame(CONTINUATION, END_HEADERS, 1, &[]));
            b
        }),
        (
            "padding longer than the HEADERS",
            frame(HEADERS, END_HEADERS | PADDED, 1, &[9, 0x82]),
        ),
        (
            "PRIORITY depending on its own stream",
            frame(PRIORITY, 0, 3, &[0, 0, 0, 3, 16]),
        ),
        ("HEADERS depending on its own stream", {
            let mut p = vec![0, 0, 0, 1, 16];
            p.extend(sse("/sse/1"));
            frame(HEADERS, END_HEADERS | END_STREAM | PRIORITY_FLAG, 1, &p)
        }),
    ];
    for (what, bytes) in cases {
        let mut raw = RawH2::start(&server, &pki.ca_file, &[]);
        raw.send(&bytes);
        assert_eq!(raw.goaway_code(), PROTOCOL_ERROR, "{what}");
        raw.until_eof();
    }
}

#[test]
fn stream_states_idle_half_closed_and_closed() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let client = pki.client();
    // Frames on an idle stream: PROTOCOL_ERROR.
    for (what, bytes) in [
        ("DATA", frame(DATA, 0, 1, b"x")),
        ("RST_STREAM", frame(RST_STREAM, 0, 1, &8u32.to_be_bytes())),
        (
            "WINDOW_UPDATE",
            frame(WINDOW_UPDATE, 0, 1, &1u32.to_be_bytes()),
        ),
        ("CONTINUATION", frame(CONTINUATION, END_HEADERS, 1, &[])),
    ] {
        let mut raw = RawH2::start(&server, &pki.ca_file, &[]);
        raw.send(&bytes);
        assert_eq!(
            raw.goaway_code(),
            PROTOCOL_ERROR,
            "{what} on an idle stream"
        );
        raw.until_eof();
    }

    // Half-closed (remote): the request ended, the response goes on. DATA there is a
    // stream error STREAM_CLOSED, and the stream ends (its subscription logs out).
    let mut raw = RawH2::start(&server, &pki.ca_file, &[]);
    subscribe(&mut raw, 1, "/sse/1");
    subscribe(&mut raw, 3, "/sse/3");
    wait_stats(&server, &client, "two logins", |s| {
        s["connections_logged_in"] == 2
    });
    raw.send(&frame(DATA, 0, 1, b"late"));
    assert_eq!(reset_code(&mut raw, 1), STREAM_CLOSED);
    wait_stats(&server, &client, "stream 1 logged out", |s| {
        s["connections_logged_in"] == 1
    });
    // A second HEADERS on a half-closed stream: STREAM_CLOSED too.
    raw.send(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        3,
        &literal("x-late", "1"),
    ));
    assert_eq!(reset_code(&mut raw, 3), STREAM_CLOSED);
    // DATA on a stream the client reset: STREAM_CLOSED, the connection goes on.
    subscribe(&mut raw, 5, "/sse/5");
    raw.send(&frame(RST_STREAM, 0, 5, &8u32.to_be_bytes()));
    raw.send(&frame(DATA, 0, 5, b"after the reset"));
    assert_eq!(reset_code(&mut raw, 5), STREAM_CLOSED);
    raw.ping(*b"stillok!");
    // HEADERS again on the stream it reset: STREAM_CLOSED (a connection error here).
    raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 5, &sse("/sse/5")));
    assert_eq!(raw.goaway_code(), STREAM_CLOSED);
    raw.until_eof();

    // Stream ids only go up: 5, then 3, is PROTOCOL_ERROR.
    let mut raw = RawH2::start(&server, &pki.ca_file, &[]);
    subscribe(&mut raw, 5, "/sse/5");
    raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 3, &sse("/sse/3")));
    let goaway = raw.until("GOAWAY", |f| f.kind == GOAWAY);
    assert_eq!(code_of(&goaway), PROTOCOL_ERROR);
    let last = u32::from_be_bytes(goaway.payload[..4].try_into().unwrap());
    assert_eq!(last, 5, "GOAWAY names the last stream processed");
    raw.until_eof();
}

#[test]
fn flow_control_overflow_on_a_stream_resets_it_and_through_settings_closes() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let mut raw = RawH2::start(&server, &pki.ca_file, &[]);
    subscribe(&mut raw, 1, "/sse/1");
    subscribe(&mut raw, 3, "/sse/3");
    // Stream 1's window (65,535) + 2^31-1: over the limit, a stream error.
    raw.send(&frame(WINDOW_UPDATE, 0, 1, &0x7fff_ffffu32.to_be_bytes()));
    assert_eq!(reset_code(&mut raw, 1), FLOW_CONTROL_ERROR);
    raw.ping(*b"streamok");
    // Stream 3's window to 2^31-1 less what the server sent on it (its SSE
    // preamble), then SETTINGS_INITIAL_WINDOW_SIZE raised by 100,000 moves it over:
    // a connection error (RFC 9113 6.9.2).
    raw.send(&frame(
        WINDOW_UPDATE,
        0,
        3,
        &(0x7fff_ffffu32 - 65_535).to_be_bytes(),
    ));
    raw.ping(*b"at limit");
    let mut setting = 4u16.to_be_bytes().to_vec();
    setting.extend_from_slice(&165_535u32.to_be_bytes());
    raw.send(&frame(SETTINGS, 0, 0, &setting));
    assert_eq!(raw.goaway_code(), FLOW_CONTROL_ERROR);
    raw.until_eof();
}

#[test]
fn trailers_end_a_request_and_a_wrong_content_length_is_refused() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let mut raw = RawH2::start(&server, &pki.ca_file, &[]);
    // POST with a body in DATA and trailers (HEADERS with END_STREAM) after it.
    raw.send(&frame(
        HEADERS,
        END_HEADERS,
        1,
        &request_block("POST", "/pub/1", &[]),
    ));
    raw.send(&frame(DATA, 0, 1, b"with trailers"));
    raw.send(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &literal("x-checksum", "1"),
    ));
    let head = raw.until("HEADERS on 1", |f| f.stream == 1 && f.kind == HEADERS);
    assert_eq!((head.kind, head.payload[0]), (HEADERS, 0x88), "{head:?}");
    let body = raw.until("DATA on 1", |f| f.stream == 1 && f.kind == DATA);
    let text = String::from_utf8_lossy(&body.payload);
    assert!(text.contains(r#""connections":0"#), "{text}");
    // A second header block without END_STREAM: a stream error PROTOCOL_ERROR.
    raw.send(&frame(
        HEADERS,
        END_HEADERS,
        3,
        &request_block("POST", "/pub/1", &[]),
    ));
    raw.send(&frame(HEADERS, END_HEADERS, 3, &literal("x-more", "1")));
    assert_eq!(reset_code(&mut raw, 3), PROTOCOL_ERROR);
    // content-length that differs from the DATA: a stream error PROTOCOL_ERROR.
    let stated = request_block("POST", "/pub/1", &[("content-length", "10")]);
    raw.send(&frame(HEADERS, END_HEADERS, 5, &stated));
    raw.send(&frame(DATA, END_STREAM, 5, b"four"));
    assert_eq!(reset_code(&mut raw, 5), PROTOCOL_ERROR);
    raw.ping(*b"all good");
}

#[test]
fn the_clients_goaway_lets_open_streams_finish_then_the_connection_closes() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let client = pki.client();
    let mut raw = RawH2::start(&server, &pki.ca_file, &[]);
    // A long-poll waits on stream 1.
    raw.send(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &request_block("GET", "/poll/4", &[]),
    ));
    wait_stats(&server, &client, "the poll's login", |s| {
        s["connections_logged_in"] == 1
    });
    let mut goaway = 1u32.to_be_bytes().to_vec();
    goaway.extend_from_slice(&NO_ERROR.to_be_bytes());
    raw.send(&frame(GOAWAY, 0, 0, &goaway));
    // No new stream after our GOAWAY.
    raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 3, &sse("/sse/3")));
    assert_eq!(reset_code(&mut raw, 3), REFUSED_STREAM);
    // The poll still gets its answer, then the server closes the connection.
    assert_eq!(publish(&server, &client, 4, "after goaway"), 1);
    let rest = raw.until_eof();
    let answer: Vec<u8> = rest
        .iter()
        .filter(|f| f.kind == DATA && f.stream == 1)
        .flat_map(|f| f.payload.clone())
        .collect();
    assert!(
        String::from_utf8_lossy(&answer).contains("after goaway"),
        "{rest:?}"
    );
    let end = rest.iter().find(|f| f.kind == GOAWAY).expect("our GOAWAY");
    assert_eq!(code_of(end), NO_ERROR);
    // With an error code, the client's GOAWAY closes at once.
    let mut raw = RawH2::start(&server, &pki.ca_file, &[]);
    subscribe(&mut raw, 1, "/sse/1");
    let mut goaway = 1u32.to_be_bytes().to_vec();
    goaway.extend_from_slice(&PROTOCOL_ERROR.to_be_bytes());
    raw.send(&frame(GOAWAY, 0, 0, &goaway));
    raw.until_eof();
}

/// Once a known gap (docs/decisions/tls-and-http2-in-process.md): HEADERS for streams 3 and 5 right after a lone stream 1,
/// with `--max-streams-per-connection 2`, each in a write (a TLS record) of its own.
#[test]
fn a_stream_over_the_limit_is_refused_whatever_the_writes() {
    let pki = Pki::new();
    let server = pki.serve(&["--max-streams-per-connection", "2"]);
    for round in 0..20 {
        let mut raw = RawH2::start(&server, &pki.ca_file, &[]);
        subscribe(&mut raw, 1, "/sse/1");
        raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 3, &sse("/sse/3")));
        raw.send(&frame(HEADERS, END_HEADERS | END_STREAM, 5, &sse("/sse/5")));
        let mut seen = Vec::new();
        let (mut head3, mut reset5) = (false, false);
        while !(head3 && reset5) {
            let f = raw
                .read_frame()
                .unwrap_or_else(|| panic!("round {round}: EOF; frames {seen:?}"));
            head3 |= f.kind == HEADERS && f.stream == 3;
            if f.kind == RST_STREAM && f.stream == 5 {
                assert_eq!(code_of(&f), REFUSED_STREAM, "round {round}");
                reset5 = true;
            }
            assert_ne!(f.kind, GOAWAY, "round {round}: {f:?}");
            seen.push((f.kind, f.stream, f.flags, f.payload.len()));
        }
    }
}
