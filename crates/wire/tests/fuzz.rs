//! Deterministic mutation fuzzing of every `wire` parser, on stable Rust.
//!
//! Inputs are random bytes, valid seeds, and seeds mutated by a seeded RNG
//! (bit flips, interesting bytes and tokens, splices, truncation); the properties
//! checked are in `invariants/`. Bounded by iteration count, not by time, so a run
//! is reproducible: `WIRE_FUZZ_SEED=<n>` picks another seed and
//! `WIRE_FUZZ_SCALE=<k>` multiplies the iterations for a longer soak.
//! Coverage-guided fuzzing is in `fuzz/` (cargo fuzz, nightly).

mod invariants;
mod mutate;

use std::collections::BTreeSet;

use invariants::Outcome;
use mutate::{cuts, iterations, mutate, random_bytes, rng};
use rand::rngs::StdRng;
use rand::Rng;
use wire::{ws_client_frame, BodyKind, Limits, Opcode};

const HEAD_SEEDS: &[&[u8]] = &[
    b"GET /sub/42 HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /test/1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"GET /sse/7 HTTP/1.1\r\nAccept: text/event-stream\r\nLast-Event-ID: 12\r\n\r\n",
    b"GET /poll/3?since=9 HTTP/1.1\r\nConnection: close\r\n\r\n",
    b"GET /ws/5 HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    b"POST /pub/1 HTTP/1.1\r\nContent-Length: 5\r\nAuthorization: Bearer x\r\n\r\nhello",
    b"POST /pub HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"PUT /subscriptions/1/2 HTTP/1.1\r\n\r\nDELETE /subscriptions/1/2 HTTP/1.1\r\n\r\n",
    b"GET http://h/stats HTTP/1.1\r\nX-A: b\r\nX-C: d\r\n\r\n",
];

#[test]
fn fuzz_parse_head() {
    let mut rng = rng(1);
    let small = Limits {
        max_head: 64,
        max_headers: 3,
    };
    let mut seen = BTreeSet::new();
    for i in 0..iterations(50_000) {
        let limits = if i % 4 == 0 { small } else { Limits::default() };
        let input = match i % 8 {
            0 => random_bytes(&mut rng, 200),
            _ => {
                let a = HEAD_SEEDS[rng.gen_range(0..HEAD_SEEDS.len())];
                let b = HEAD_SEEDS[rng.gen_range(0..HEAD_SEEDS.len())];
                mutate(&mut rng, a, b)
            }
        };
        let c = cuts(&mut rng);
        seen.insert(invariants::check_head(&input, &limits, &c));
    }
    let want = [
        Outcome::Complete,
        Outcome::Partial,
        Outcome::Error(400),
        Outcome::Error(417),
        Outcome::Error(431),
        Outcome::Error(501),
        Outcome::Error(505),
    ];
    assert_reached(&seen, &want);
}

/// The fuzzer must reach every outcome, or it is not testing what it claims.
fn assert_reached(seen: &BTreeSet<Outcome>, want: &[Outcome]) {
    for w in want {
        assert!(seen.contains(w), "never reached {w:?}; saw {seen:?}");
    }
}

#[test]
fn valid_seed_heads_parse() {
    for seed in HEAD_SEEDS {
        let r = wire::parse_head(seed, &Limits::default());
        assert!(
            matches!(r, Ok(Some(_))),
            "{:?}: {r:?}",
            String::from_utf8_lossy(seed)
        );
    }
}

/// A valid chunked encoding of `payload` with random chunk sizes, extensions,
/// leading zeros and trailers; returns the encoding.
fn chunked_encoding(rng: &mut StdRng, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = payload;
    while !rest.is_empty() {
        let n = rng.gen_range(1..=rest.len().min(40));
        let zeros = "0".repeat(rng.gen_range(0..3));
        if rng.gen_bool(0.5) {
            out.extend_from_slice(format!("{zeros}{n:x}").as_bytes());
        } else {
            out.extend_from_slice(format!("{zeros}{n:X}").as_bytes());
        }
        if rng.gen_bool(0.2) {
            out.extend_from_slice(b" ;a=b");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    out.extend_from_slice(b"0\r\n");
    if rng.gen_bool(0.3) {
        out.extend_from_slice(b"X-Trailer: v\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

#[test]
fn fuzz_body_decoder() {
    let mut rng = rng(2);
    let mut seen = BTreeSet::new();
    for i in 0..iterations(40_000) {
        let payload = random_bytes(&mut rng, 120);
        let limit = if rng.gen_bool(0.2) {
            rng.gen_range(0..150)
        } else {
            1 << 16
        };
        let c = cuts(&mut rng);
        if i % 2 == 0 {
            // Chunked: valid encodings round-trip; mutated ones keep the properties.
            let enc = chunked_encoding(&mut rng, &payload);
            if i % 4 == 0 {
                let mut d = wire::BodyDecoder::new(BodyKind::Chunked, 1 << 16);
                let mut out = Vec::new();
                let mut with_next = enc.clone();
                with_next.extend_from_slice(b"GET");
                assert_eq!(d.handle_bytes(&with_next, &mut out), Ok((enc.len(), true)));
                assert_eq!(out, payload);
                seen.insert(invariants::check_body(BodyKind::Chunked, limit, &enc, &c));
            } else {
                let other = random_bytes(&mut rng, 16);
                let m = mutate(&mut rng, &enc, &other);
                seen.insert(invariants::check_body(BodyKind::Chunked, limit, &m, &c));
            }
        } else {
            let len = rng.gen_range(0..200u64);
            let kind = if i % 3 == 0 {
                BodyKind::None
            } else {
                BodyKind::Length(len)
            };
            seen.insert(invariants::check_body(kind, limit, &payload, &c));
        }
    }
    assert_reached(
        &seen,
        &[
            Outcome::Complete,
            Outcome::Partial,
            Outcome::Error(400),
            Outcome::Error(413),
        ],
    );
}

#[test]
fn fuzz_ws_frames() {
    let mut rng = rng(3);
    let mut seen = BTreeSet::new();
    let opcodes = [
        Opcode::Continuation,
        Opcode::Text,
        Opcode::Binary,
        Opcode::Close,
        Opcode::Ping,
        Opcode::Pong,
    ];
    for i in 0..iterations(40_000) {
        let max = if rng.gen_bool(0.2) {
            rng.gen_range(0..200)
        } else {
            1 << 17
        };
        let c = cuts(&mut rng);
        // Mostly short frames; some 16-bit lengths; rarely a 64-bit length.
        let len = match rng.gen_range(0..100) {
            0 => rng.gen_range(65_530..66_000),
            1..=10 => rng.gen_range(126..1_000),
            _ => rng.gen_range(0..130),
        };
        let payload: Vec<u8> = if rng.gen_bool(0.5) {
            (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect()
        } else {
            (0..len).map(|_| rng.gen()).collect()
        };
        let op = opcodes[rng.gen_range(0..opcodes.len())];
        let mut frame = ws_client_frame(op, rng.gen_bool(0.8), rng.gen(), &payload);
        if i % 3 != 0 {
            let other = random_bytes(&mut rng, 16);
            let keep = frame.len().min(40);
            let head = mutate(&mut rng, &frame[..keep], &other);
            frame.splice(..keep, head);
        }
        if i % 5 == 0 {
            frame = random_bytes(&mut rng, 40);
        }
        seen.insert(invariants::check_ws_frame(&frame, max, &c));
    }
    let want = [
        Outcome::Complete,
        Outcome::Partial,
        Outcome::Error(1002),
        Outcome::Error(1007),
        Outcome::Error(1009),
    ];
    assert_reached(&seen, &want);
}

#[test]
fn fuzz_ws_message_streams() {
    let mut rng = rng(4);
    let texts = ["hello", "héllo wörld", "€€€", "😀 emoji", "a"];
    for _ in 0..iterations(5_000) {
        let mut stream = Vec::new();
        for _ in 0..rng.gen_range(1..6) {
            let t = texts[rng.gen_range(0..texts.len())].as_bytes();
            let mut body = t.to_vec();
            if rng.gen_bool(0.3) {
                let other = random_bytes(&mut rng, 4);
                body = mutate(&mut rng, &body, &other);
            }
            // Split into 1..=3 fragments at random points, maybe with a ping between.
            let a = rng.gen_range(0..=body.len());
            let b = rng.gen_range(a..=body.len());
            let parts: Vec<&[u8]> = match rng.gen_range(1..=3) {
                1 => vec![&body[..]],
                2 => vec![&body[..a], &body[a..]],
                _ => vec![&body[..a], &body[a..b], &body[b..]],
            };
            for (k, part) in parts.iter().enumerate() {
                let last = k + 1 == parts.len();
                let op = if k == 0 {
                    Opcode::Text
                } else {
                    Opcode::Continuation
                };
                stream.extend(ws_client_frame(op, last, rng.gen(), part));
                if rng.gen_bool(0.2) {
                    stream.extend(ws_client_frame(Opcode::Ping, true, rng.gen(), b"p"));
                }
            }
            if rng.gen_bool(0.1) {
                let op = [Opcode::Continuation, Opcode::Binary][rng.gen_range(0..2)];
                stream.extend(ws_client_frame(op, rng.gen(), rng.gen(), b"x"));
            }
        }
        invariants::check_ws_stream(&stream, 1 << 16);
    }
}

#[test]
fn fuzz_batch_and_edges() {
    let mut rng = rng(5);
    for i in 0..iterations(10_000) {
        // Batch: a valid body round-trips; mutations keep the properties.
        let n = rng.gen_range(0..5);
        let items: Vec<(u64, String)> = (0..n)
            .map(|_| {
                let len = rng.gen_range(0..12);
                let s: String = (0..len)
                    .map(|_| char::from_u32(rng.gen_range(1..0x3000)).unwrap_or('x'))
                    .collect();
                (rng.gen(), s)
            })
            .collect();
        let body: Vec<u8> = items
            .iter()
            .map(|(s, d)| serde_json::json!({"subject": s, "data": d}).to_string() + "\n")
            .collect::<String>()
            .into_bytes();
        let parsed = wire::parse_batch(&body).expect("valid batch");
        assert_eq!(parsed.len(), items.len());
        for (p, (s, d)) in parsed.iter().zip(&items) {
            assert_eq!((p.subject, p.data.as_slice()), (*s, d.as_bytes()));
        }
        let other = random_bytes(&mut rng, 8);
        invariants::check_batch(&mutate(&mut rng, &body, &other));

        // Edges: likewise, with comments, blank lines, tabs and CRLF.
        let edges: Vec<(u64, u64)> = (0..rng.gen_range(0..6))
            .map(|_| (rng.gen_range(0..1000), rng.gen()))
            .collect();
        let mut text = String::from("# generated\n");
        for (a, b) in &edges {
            let sep = if rng.gen_bool(0.5) { " " } else { "\t" };
            let end = if rng.gen_bool(0.5) { "\n" } else { "\r\n\n" };
            text.push_str(&format!("{a}{sep}{b}{end}"));
        }
        assert_eq!(
            wire::parse_edges(text.as_bytes()).expect("valid edges"),
            edges
        );
        let m = mutate(&mut rng, text.as_bytes(), &other);
        invariants::check_edges(&m);
        assert_eq!(
            wire::parse_edges(&m).map_err(|e| e.line),
            reference_edges(&m),
            "{:?}",
            String::from_utf8_lossy(&m)
        );
        if i % 4 == 0 {
            invariants::check_batch(&random_bytes(&mut rng, 64));
            let r = random_bytes(&mut rng, 64);
            invariants::check_edges(&r);
            assert_eq!(
                wire::parse_edges(&r).map_err(|e| e.line),
                reference_edges(&r)
            );
        }
    }
}

/// The edge-list format written the obvious way (split lines, split tokens,
/// `str::parse`), to check the hand-rolled scanner against: same edges, or an
/// error on the same line.
fn reference_edges(body: &[u8]) -> Result<Vec<(u64, u64)>, usize> {
    let mut edges = Vec::new();
    for (i, raw) in body.split(|&b| b == b'\n').enumerate() {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        let tokens: Vec<&[u8]> = line
            .split(|&b| b == b' ' || b == b'\t')
            .filter(|t| !t.is_empty())
            .collect();
        if tokens.is_empty() || tokens[0][0] == b'#' {
            continue;
        }
        let id = |t: &[u8]| -> Option<u64> {
            if t.iter().all(u8::is_ascii_digit) {
                std::str::from_utf8(t).ok()?.parse().ok()
            } else {
                None
            }
        };
        match tokens.as_slice() {
            [a, b] => match (id(a), id(b)) {
                (Some(a), Some(b)) => edges.push((a, b)),
                _ => return Err(i + 1),
            },
            _ => return Err(i + 1),
        }
    }
    Ok(edges)
}
