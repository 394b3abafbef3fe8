//! The seed corpus of every fuzz target (`fuzz/seeds/<target>/`, kept in the
//! repository) replayed through the targets' own entry points, and seeded
//! mutation fuzzing of the decoders added with issue 10: `route` (absolute-form
//! targets, `since` and `token`), `Since`, and typed, bounded batch lines.
//! Coverage-guided runs of the same targets: `scripts/fuzz.sh` (libFuzzer).

mod invariants;
mod mutate;

use std::path::PathBuf;

use mutate::{iterations, mutate, random_bytes, rng};
use rand::Rng;
use wire::BatchLimits;

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| std::fs::read(e.expect("entry").path()).expect("seed"))
        .collect();
    out.sort();
    out
}

#[test]
fn every_target_has_seeds_and_they_replay() {
    for (name, run) in invariants::targets::TARGETS {
        let s = seeds(name);
        assert!(s.len() >= 2, "{name}: seed corpus missing");
        for input in &s {
            run(input);
        }
    }
}

#[test]
fn fuzz_routes() {
    let mut rng = rng(11);
    let heads = seeds("route");
    let extra: &[&[u8]] = &[
        b"http://",
        b"HTTPS://",
        b"?since=",
        b"&token=",
        b"%",
        b"%2",
        b"-",
        b"@",
        b"Host: ",
        b"Origin: ",
        b"/sub/",
        b"/ws/",
        b"/poll/",
        b"/sse/",
    ];
    for _ in 0..iterations(30_000) {
        let a = &heads[rng.gen_range(0..heads.len())];
        let b = extra[rng.gen_range(0..extra.len())];
        let mut m = mutate(&mut rng, a, b);
        if rng.gen_bool(0.3) {
            let at = rng.gen_range(0..=m.len().min(20));
            m.splice(at..at, b.iter().copied());
        }
        invariants::check_route(&m);
        invariants::targets::parse_head(&[[0u8].as_slice(), &[3, 9, 27, 81], &m].concat());
    }
}

#[test]
fn fuzz_since() {
    let mut rng = rng(12);
    let seeds = seeds("since");
    for _ in 0..iterations(30_000) {
        let input = if rng.gen_bool(0.2) {
            random_bytes(&mut rng, 24)
        } else {
            let a = &seeds[rng.gen_range(0..seeds.len())];
            mutate(&mut rng, a, b"-0123456789")
        };
        invariants::check_since(&input);
    }
    // Generated valid positions round-trip.
    for _ in 0..iterations(5_000) {
        let s = wire::Since {
            epoch: rng.gen_bool(0.5).then(|| rng.gen()),
            seq: rng.gen(),
        };
        assert_eq!(wire::Since::parse(s.to_string().as_bytes()), Some(s));
    }
}

#[test]
fn fuzz_typed_batches() {
    let mut rng = rng(13);
    let seeds = seeds("batch");
    let mut statuses = std::collections::BTreeSet::new();
    for _ in 0..iterations(20_000) {
        let a = &seeds[rng.gen_range(0..seeds.len())];
        let b = &seeds[rng.gen_range(0..seeds.len())];
        let body = mutate(&mut rng, &a[1..], &b[1..]);
        let limits = BatchLimits {
            max_item: rng.gen_range(0..40),
            max_items: rng.gen_range(1..5),
        };
        invariants::check_batch_with(&body, &limits);
        statuses
            .insert(wire::parse_batch_with(&body, &limits).map_or_else(|e| e.status(), |_| 200));
    }
    assert_eq!(
        statuses.into_iter().collect::<Vec<_>>(),
        vec![200, 400, 413],
        "the fuzzer reaches every outcome"
    );
}

/// HTTP/2 frames (issue 13): mutated client frame sequences, and random bytes, through
/// the frame parser and the response reader; every outcome is reached.
#[test]
fn fuzz_h2_frames() {
    let mut rng = rng(14);
    let seeds = seeds("h2_frames");
    let mut seen = std::collections::HashSet::new();
    for _ in 0..iterations(30_000) {
        let input = if rng.gen_bool(0.1) {
            random_bytes(&mut rng, 64)
        } else {
            let a = &seeds[rng.gen_range(0..seeds.len())];
            let b = &seeds[rng.gen_range(0..seeds.len())];
            mutate(&mut rng, a, b)
        };
        let Some((&sel, rest)) = input.split_first() else {
            continue;
        };
        let max = if sel & 1 == 0 { 16_384 } else { (1 << 24) - 1 };
        seen.insert(std::mem::discriminant(&invariants::check_h2_frames(
            rest,
            max,
            usize::from(sel >> 1),
        )));
    }
    assert_eq!(
        seen.len(),
        3,
        "complete, partial and error were all reached"
    );
}
