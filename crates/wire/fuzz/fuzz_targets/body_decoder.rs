//! `BodyDecoder` on arbitrary bytes, whole and split. Byte 0 picks the framing,
//! bytes 1–2 the limit, bytes 3–6 the split points; the rest is the body.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    invariants::targets::body_decoder(data);
});
