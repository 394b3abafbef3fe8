//! The connection core on arbitrary scripts of bytes, replies, deliveries and time
//! (the properties are in `tests/core_script`).
#![no_main]

#[path = "../../../connection/tests/core_script/mod.rs"]
mod core_script;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = core_script::run(data);
});
