//! Tokens (`auth`): the JOSE header and claims parsers, verification against an
//! HS256 secret and an RS256 key, and the JWKS reader, on arbitrary bytes.
#![no_main]

#[path = "../../../auth/tests/jwt_invariants/mod.rs"]
mod jwt_invariants;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    jwt_invariants::check_token(data);
});
