//! `parse_ws_frame` on arbitrary bytes. Bytes 0–1 are the payload limit, bytes
//! 2–5 the prefix cut points; the rest is the frame.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 6 {
        return;
    }
    let (params, input) = data.split_at(6);
    let max = usize::from(u16::from_le_bytes([params[0], params[1]]));
    let cuts: Vec<usize> = params[2..].iter().map(|&c| usize::from(c)).collect();
    invariants::check_ws_frame(input, max, &cuts);
});
