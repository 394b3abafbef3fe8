//! Deterministic mutation fuzzing of server sessions, on stable Rust, in the style of
//! `wire`'s: seeds are real client bytes (rustls's ClientHello flight; an established
//! session's records: data, KeyUpdate, close_notify), mutated by a seeded RNG (bit
//! flips, interesting bytes, length fields, truncation, splices, random bytes) and fed
//! in random splits. Properties:
//! - nothing panics;
//! - an error closes the session, and a closed session takes anything silently;
//! - plaintext handed out is always a prefix of what the client really sent (AEAD:
//!   a mutated record never yields data).
//!
//! `TLS_FUZZ_SEED=<n>` picks another seed, `TLS_FUZZ_SCALE=<k>` runs k times longer.

mod common;

use common::{client, client_config, opts, pki, server_config, Pair};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tls::{Alpn, Phase, ServerSession};

fn rng(stream: u64) -> StdRng {
    let seed: u64 = std::env::var("TLS_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x746c_7366);
    StdRng::seed_from_u64(seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

fn iterations(base: usize) -> usize {
    let scale: usize = std::env::var("TLS_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    base * scale
}

/// Record types, versions and lengths: the bytes the parsers decide on.
const INTERESTING: &[u8] = &[
    0, 1, 2, 3, 4, 0x14, 0x15, 0x16, 0x17, 0x18, 0x40, 0x41, 0x48, 0x7f, 0x80, 0xff,
];

fn mutate(r: &mut StdRng, seed: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..r.gen_range(1..4) {
        if v.is_empty() {
            v.push(r.gen());
            continue;
        }
        let at = r.gen_range(0..v.len());
        match r.gen_range(0..7) {
            0 => v[at] ^= 1 << r.gen_range(0..8),
            1 => v[at] = INTERESTING[r.gen_range(0..INTERESTING.len())],
            // A record length field: every record header is 5 bytes, lengths at 3..5.
            2 => {
                let h = at - at % 5;
                if h + 4 < v.len() {
                    v[h + 3] = r.gen();
                    v[h + 4] = r.gen();
                }
            }
            3 => v.truncate(at),
            4 => {
                let end = (at + r.gen_range(1..64)).min(v.len());
                let piece = v[at..end].to_vec();
                let to = r.gen_range(0..=v.len());
                v.splice(to..to, piece);
            }
            5 => {
                let n = r.gen_range(1..32);
                v.splice(at..at, (0..n).map(|_| r.gen::<u8>()));
            }
            _ => v
                .drain(at..(at + r.gen_range(1..16)).min(v.len()))
                .for_each(drop),
        }
    }
    v
}

/// Feed `input` to `s` in random splits; returns the plaintext and whether the
/// session refused something, and checks the error/closed properties.
fn feed(r: &mut StdRng, s: &mut ServerSession, input: &[u8]) -> (Vec<u8>, bool) {
    let (mut out, mut plain) = (Vec::new(), Vec::new());
    let mut at = 0;
    let mut failed = false;
    while at < input.len() {
        let n = r.gen_range(1..=(input.len() - at).min(700));
        let mut piece = input[at..at + n].to_vec();
        let before = plain.len();
        match s.handle_input(&mut piece, &mut out, &mut plain) {
            Ok(_) if failed => assert_eq!(plain.len(), before, "a closed session gives nothing"),
            Ok(_) => {}
            Err(_) => {
                assert_eq!(s.phase(), Phase::Closed, "an error closes the session");
                failed = true;
            }
        }
        at += n;
    }
    (plain, failed)
}

#[test]
fn fuzz_client_hello_flights() {
    let pki = pki();
    let sc = server_config(&pki, &opts(&[Alpn::H2, Alpn::Http11]));
    let mut seeds = Vec::new();
    for (alpn, tls12) in [(&[&b"h2"[..]][..], false), (&[][..], true)] {
        let mut c = client(client_config(&pki, alpn, tls12, None));
        let mut hello = Vec::new();
        c.write_tls(&mut hello).unwrap();
        seeds.push(hello);
    }
    let mut r = rng(1);
    let mut refused = 0;
    for i in 0..iterations(3000) {
        let input = if i % 10 == 0 {
            (0..r.gen_range(0..600)).map(|_| r.gen()).collect()
        } else {
            mutate(&mut r, &seeds[i % seeds.len()])
        };
        let mut s = ServerSession::new(sc.clone()).unwrap();
        let (plain, failed) = feed(&mut r, &mut s, &input);
        assert!(plain.is_empty(), "no plaintext before a handshake");
        refused += usize::from(failed);
    }
    // The mutations reach the parsers: most are refused, some still parse.
    assert!(refused > iterations(3000) / 2, "{refused} refused");
}

#[test]
fn fuzz_established_records() {
    let pki = pki();
    let sc = server_config(&pki, &opts(&[Alpn::Http11]));
    let cc = client_config(&pki, &[], false, None);
    let mut r = rng(2);
    let (mut refused, mut whole) = (0, 0);
    for i in 0..iterations(400) {
        let mut p = Pair::new(client(cc.clone()), ServerSession::new(sc.clone()).unwrap());
        p.handshake();
        // The seed: data, a KeyUpdate, more data, maybe close_notify.
        let mut sent = Vec::new();
        let mut wire = Vec::new();
        for k in 0..3 {
            let data: Vec<u8> = (0..r.gen_range(1..300)).map(|j| (j + k) as u8).collect();
            p.client_writes(&data);
            sent.extend_from_slice(&data);
            if k == 1 {
                p.client.refresh_traffic_keys().unwrap();
            }
        }
        if i % 3 == 0 {
            p.client.send_close_notify();
        }
        while p.client.wants_write() {
            p.client.write_tls(&mut wire).unwrap();
        }
        let input = mutate(&mut r, &wire);
        let (plain, failed) = feed(&mut r, &mut p.server, &input);
        assert!(
            sent.starts_with(&plain),
            "iteration {i}: plaintext that the client never sent ({} bytes)",
            plain.len()
        );
        refused += usize::from(failed);
        whole += usize::from(plain == sent);
    }
    // Both outcomes happen: refusals (alerts) and mutations that spare every record
    // (cuts after the last one, changes in bytes past it).
    assert!(refused > 0 && whole > 0, "{refused} refused, {whole} whole");
}
