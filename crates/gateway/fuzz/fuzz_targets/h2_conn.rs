//! One HTTP/2 connection's frame handling (frames, HPACK, budgets, flow control,
//! stream states) on arbitrary scripts of client bytes and time; the properties are
//! in `gateway::pump::h2::script`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gateway::pump::h2_script(data);
});
