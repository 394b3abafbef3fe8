//! `wire::h2::parse_frame` (and the response reader) on arbitrary bytes. Byte 0 picks
//! the frame size limit and the reader's split; the rest is the client's frames.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    invariants::targets::h2_frames(data);
});
