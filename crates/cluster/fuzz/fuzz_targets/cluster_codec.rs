//! The cluster codec on arbitrary scripts of NATS messages (the properties are in
//! `tests/codec_script`).
#![no_main]

#[path = "../../tests/codec_script/mod.rs"]
mod codec_script;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = codec_script::run(data);
});
