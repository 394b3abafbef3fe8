//! `BodyDecoder` on arbitrary bytes, whole and split. Byte 0 picks the framing,
//! bytes 1–2 the limit, bytes 3–6 the split points; the rest is the body.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;
use wire::BodyKind;

fuzz_target!(|data: &[u8]| {
    if data.len() < 7 {
        return;
    }
    let (params, input) = data.split_at(7);
    let limit = usize::from(u16::from_le_bytes([params[1], params[2]]));
    let kind = match params[0] % 3 {
        0 => BodyKind::Chunked,
        1 => BodyKind::Length(u64::from(params[0])),
        _ => BodyKind::None,
    };
    let cuts: Vec<usize> = params[3..].iter().map(|&c| usize::from(c)).collect();
    invariants::check_body(kind, limit, input, &cuts);
});
