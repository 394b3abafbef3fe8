//! Request heads through `route`: absolute-form targets route like their origin
//! form; `since` and `token` queries never panic and map to the failure table.
#![no_main]

#[path = "../../tests/invariants/mod.rs"]
mod invariants;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    invariants::targets::route(data);
});
