//! `parse_batch_with` (NDJSON batch publish, typed and bounded): byte 0 picks the
//! limits, the rest is the body.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    invariants::targets::batch(data);
});
