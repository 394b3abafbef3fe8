//! Deterministic mutation fuzzing of token handling on stable Rust: the seed
//! tokens of `crates/wire/fuzz/seeds/jwt` (replayed as they are, then mutated),
//! plus random bytes. Properties in `jwt_invariants/`. `AUTH_FUZZ_SCALE=<k>`
//! multiplies the iterations. Coverage-guided runs: the `jwt` target in
//! `crates/wire/fuzz` (see `scripts/fuzz.sh`).

mod jwt_invariants;

use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn seeds() -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../wire/fuzz/seeds/jwt");
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| std::fs::read(e.expect("entry").path()).expect("seed"))
        .collect();
    out.sort();
    assert!(out.len() >= 5, "seed corpus missing");
    out
}

const PIECES: &[&[u8]] = &[
    b".",
    b"eyJ",
    b"e30",
    b"=",
    b"-",
    b"_",
    b"+",
    b"/",
    b"\"alg\":\"none\"",
    b"\xff",
];

fn mutate(rng: &mut StdRng, v: &[u8]) -> Vec<u8> {
    let mut v = v.to_vec();
    for _ in 0..rng.gen_range(1..=3) {
        let pos = rng.gen_range(0..=v.len());
        match rng.gen_range(0..5) {
            0 if !v.is_empty() => {
                let i = pos.min(v.len() - 1);
                v[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if !v.is_empty() => {
                let i = pos.min(v.len() - 1);
                v[i] = b"AZaz09-_."[rng.gen_range(0..9)];
            }
            2 => {
                let p = PIECES[rng.gen_range(0..PIECES.len())];
                v.splice(pos..pos, p.iter().copied());
            }
            3 => v.truncate(pos),
            _ if !v.is_empty() => {
                let end = (pos + rng.gen_range(1..8)).min(v.len());
                v.drain(pos.min(v.len())..end);
            }
            _ => {}
        }
    }
    v
}

#[test]
fn seed_tokens_keep_their_verdicts() {
    let mut verdicts = Vec::new();
    for s in seeds() {
        jwt_invariants::check_token(&s);
        let token = std::str::from_utf8(&s).expect("seeds are text");
        let v = jwt_invariants::hs();
        verdicts.push((
            v.verify(token, jwt_invariants::NOW).is_ok(),
            v.authorize_subscribe(Some(token), 1, jwt_invariants::NOW)
                .map_err(|e| e.status()),
        ));
    }
    // Seeds sorted by content: three valid for user 1 (one with `aud` and `iss`, for
    // the scoped verifier), one valid for user 2 (403), five refused (alg none, RS256
    // header, crit, expired, bad signature).
    let accepted = verdicts.iter().filter(|(ok, _)| *ok).count();
    assert_eq!(accepted, 4, "{verdicts:?}");
    assert_eq!(verdicts.iter().filter(|(_, r)| r.is_ok()).count(), 3);
    assert_eq!(verdicts.iter().filter(|(_, r)| *r == Err(403)).count(), 1);
}

#[test]
fn mutated_tokens_never_panic_or_pass() {
    let scale: usize = std::env::var("AUTH_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let seeds = seeds();
    let mut rng = StdRng::seed_from_u64(0x006a_7774);
    for i in 0..20_000 * scale {
        let input = if i % 10 == 0 {
            (0..rng.gen_range(0..120)).map(|_| rng.gen()).collect()
        } else {
            let seed = &seeds[rng.gen_range(0..seeds.len())];
            mutate(&mut rng, seed)
        };
        jwt_invariants::check_token(&input);
    }
}
