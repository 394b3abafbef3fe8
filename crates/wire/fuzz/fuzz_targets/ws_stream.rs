//! A stream of client frames through `WsMessageState`: fragmentation rules and
//! incremental UTF-8 validation must agree with validating the whole message.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    invariants::targets::ws_stream(data);
});
