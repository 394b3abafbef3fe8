//! The router's publish port on arbitrary scripts of client bytes, cuts and drains
//! (the properties are in `cluster::publish_port::exchange_script`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cluster::publish_port::exchange_script(data);
});
