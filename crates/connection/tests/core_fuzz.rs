//! Deterministic fuzzing of the connection core on stable Rust: random scripts and
//! mutated well-formed ones (see `core_script`), bounded by count so a run is
//! reproducible. `CORE_FUZZ_SEED=<n>` picks another seed, `CORE_FUZZ_SCALE=<k>`
//! multiplies the iterations. Coverage-guided fuzzing: `fuzz/` (cargo fuzz).

mod core_script;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A script that walks through well-formed fragments with replies and events
/// between them, then mutated here and there.
fn structured(rng: &mut StdRng) -> Vec<u8> {
    let mut script = vec![rng.gen(), rng.gen()];
    for _ in 0..rng.gen_range(1..40) {
        match rng.gen_range(0..7) {
            0 => script.extend([2, rng.gen(), rng.gen()]),
            6 => script.extend([0x47, rng.gen()]),
            1 => script.extend([3, rng.gen()]),
            2 => script.extend([4, rng.gen()]),
            3 => script.push(5 | (rng.gen::<u8>() & 0x70)),
            4 => script.extend([6, rng.gen()]),
            _ => {
                let n: u8 = rng.gen_range(0..40);
                script.extend([0, n]);
                script.extend((0..n).map(|_| rng.gen::<u8>()));
            }
        }
    }
    for _ in 0..rng.gen_range(0..3) {
        let i = rng.gen_range(0..script.len());
        script[i] = rng.gen();
    }
    script
}

#[test]
fn the_core_never_panics_and_never_speaks_after_closing() {
    let mut rng = StdRng::seed_from_u64(env("CORE_FUZZ_SEED", 0x636f_7265));
    let runs = 20_000 * env("CORE_FUZZ_SCALE", 1);
    let mut seen = 0;
    for i in 0..runs {
        let script: Vec<u8> = if i % 4 == 0 {
            (0..rng.gen_range(0..200)).map(|_| rng.gen()).collect()
        } else {
            structured(&mut rng)
        };
        let result = std::panic::catch_unwind(|| core_script::run(&script));
        match result {
            Ok(states) => seen |= states,
            Err(_) => panic!("script {i} failed: {script:?}"),
        }
    }
    // The scripts must reach every state, or the fuzzer tests little.
    assert_eq!(seen, (1 << 12) - 1, "states reached: {seen:#b}");
}

#[test]
fn every_fragment_alone_and_split_everywhere() {
    for (i, fragment) in core_script::FRAGMENTS.iter().enumerate() {
        for cut in 0..=fragment.len() {
            // Open, the fragment split at `cut`, answer twice, deliver, fire twice.
            let script = [0, 0, 2, i as u8, cut as u8, 3, 1, 3, 2, 4, 5, 5, 5, 5];
            let _ = core_script::run(&script);
        }
    }
}
