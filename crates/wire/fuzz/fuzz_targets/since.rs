//! `Since::parse` and `parse_positions` (`Last-Event-ID`, `?since=`, composite with
//! channels): accept exactly the canonical forms.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    invariants::targets::since(data);
});
