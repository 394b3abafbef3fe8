//! `wire::h2::hpack::Decoder` on arbitrary header blocks, one decoder across blocks.
//! Byte 0 picks the caps and when our SETTINGS is acknowledged.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    invariants::targets::hpack(data);
});
