//! `parse_ws_frame` on arbitrary bytes. Bytes 0–1 are the payload limit, bytes
//! 2–5 the prefix cut points; the rest is the frame.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    invariants::targets::ws_frame(data);
});
