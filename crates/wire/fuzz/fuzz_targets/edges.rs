//! `parse_edges` (bulk subscription edge lists) on arbitrary bytes.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    invariants::targets::edges(data);
});
