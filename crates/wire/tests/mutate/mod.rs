//! Input generation for the stable-Rust fuzzers (`fuzz.rs`, `fuzz_strict.rs`):
//! a seeded RNG (`WIRE_FUZZ_SEED`), iteration scaling (`WIRE_FUZZ_SCALE`), and a
//! byte mutator that favours parser decision points.

#![allow(dead_code)] // each user calls a subset

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub fn rng(stream: u64) -> StdRng {
    let seed: u64 = std::env::var("WIRE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6d79_7269_6164);
    StdRng::seed_from_u64(seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

pub fn iterations(base: usize) -> usize {
    let scale: usize = std::env::var("WIRE_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    base * scale
}

/// Bytes and tokens that sit on parser decision points.
pub const INTERESTING_BYTES: &[u8] =
    b"\0\t\n\r :;,=?/#\"\\0179aAfFxX-+\x7f\x80\xbf\xc0\xed\xf4\xff";
pub const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\r\n\r\n",
    b"\n",
    b"Content-Length: ",
    b"Transfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: gzip\r\n",
    b"Connection: close\r\n",
    b"Upgrade: websocket\r\n",
    b"Expect: 100-continue\r\n",
    b"Last-Event-ID: ",
    b"18446744073709551616",
    b"18446744073709551615",
    b"ffffffffffffffff",
    b"-1",
    b"HTTP/1.0",
    b"HTTP/2.0",
    b";ext=val",
    b"0\r\n\r\n",
    b"{\"subject\":",
    b"\"data\":\"",
    b"# ",
    b"\xe2\x82\xac",
    b"\xf0\x9f\x98",
];

/// Applies 1..=4 random mutations to `input`, sometimes splicing from `other`.
pub fn mutate(rng: &mut StdRng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..rng.gen_range(1..=4) {
        let len = v.len();
        let pos = rng.gen_range(0..=len);
        match rng.gen_range(0..9) {
            0 if len > 0 => {
                let i = pos.min(len - 1);
                v[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if len > 0 => {
                let i = pos.min(len - 1);
                v[i] = INTERESTING_BYTES[rng.gen_range(0..INTERESTING_BYTES.len())];
            }
            2 => v.insert(
                pos,
                INTERESTING_BYTES[rng.gen_range(0..INTERESTING_BYTES.len())],
            ),
            3 if len > 0 => {
                let end = (pos + rng.gen_range(1..=8)).min(len);
                v.drain(pos.min(len - 1)..end.max(pos.min(len - 1) + 1).min(len));
            }
            4 => {
                let t = TOKENS[rng.gen_range(0..TOKENS.len())];
                v.splice(pos..pos, t.iter().copied());
            }
            5 if len > 0 => {
                let start = rng.gen_range(0..len);
                let end = (start + rng.gen_range(1..=32)).min(len);
                let piece = v[start..end].to_vec();
                v.splice(pos..pos, piece);
            }
            6 => v.truncate(pos),
            7 if !other.is_empty() => {
                let start = rng.gen_range(0..other.len());
                let end = rng.gen_range(start..=other.len());
                v.splice(pos..pos, other[start..end].iter().copied());
            }
            _ => {
                let n = rng.gen_range(0..8);
                v.extend((0..n).map(|_| rng.gen::<u8>()));
            }
        }
    }
    v
}

pub fn random_bytes(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let n = rng.gen_range(0..=max);
    (0..n).map(|_| rng.gen()).collect()
}

pub fn cuts(rng: &mut StdRng) -> Vec<usize> {
    (0..rng.gen_range(1..=4)).map(|_| rng.gen()).collect()
}
