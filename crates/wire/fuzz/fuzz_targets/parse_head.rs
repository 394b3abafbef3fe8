//! `parse_head` on arbitrary bytes. The first byte picks the limits, the next
//! four the prefix cut points checked; the rest is the request.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;
use wire::Limits;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let (cuts, input) = rest.split_at(rest.len().min(4));
    let limits = if sel & 1 == 0 {
        Limits::default()
    } else {
        Limits {
            max_head: 64 + usize::from(sel >> 1),
            max_headers: usize::from(sel >> 5),
        }
    };
    let cuts: Vec<usize> = cuts.iter().map(|&c| usize::from(c)).collect();
    invariants::check_head(input, &limits, &cuts);
});
