//! `parse_head` on arbitrary bytes. The first byte picks the limits, the next
//! four the prefix cut points checked; the rest is the request.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    invariants::targets::parse_head(data);
});
