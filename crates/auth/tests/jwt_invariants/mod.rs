//! Properties of token handling on any input, shared by `tests/fuzz.rs` (stable,
//! seeded mutations) and the libFuzzer target `crates/wire/fuzz/fuzz_targets/jwt.rs`.
//!
//! Never a panic; never accepted unless genuinely signed with the verifier's key
//! (the fuzzer cannot forge, so an accepted token must be a seed left intact); an
//! accepted token's claims equal what the unverified reader sees; every refusal
//! is a 401/403 with a short one-line message.

#![allow(dead_code)]

use std::sync::OnceLock;

use auth::{inspect_unverified, parse_claims, JwtKeys, JwtVerifier};

/// The HS256 secret the seed tokens are signed with (test-only).
pub const SECRET: &[u8] = b"fuzz-secret-fuzz-secret-fuzz-secret!";
/// The instant tokens are checked at.
pub const NOW: u64 = 1_700_000_000;

/// The HS256 verifier the seeds are checked against.
pub fn hs() -> &'static JwtVerifier {
    static V: OnceLock<JwtVerifier> = OnceLock::new();
    V.get_or_init(|| JwtVerifier::new(JwtKeys::hs256(SECRET).expect("secret")))
}

/// The HS256 verifier with `--jwt-audience` and `--jwt-issuer` set (issue 39).
fn hs_scoped() -> &'static JwtVerifier {
    static V: OnceLock<JwtVerifier> = OnceLock::new();
    V.get_or_init(|| {
        JwtVerifier::new(JwtKeys::hs256(SECRET).expect("secret"))
            .with_audiences(vec!["push".into()])
            .with_issuers(vec!["idp".into()])
    })
}

fn rs() -> &'static JwtVerifier {
    static V: OnceLock<JwtVerifier> = OnceLock::new();
    V.get_or_init(|| {
        let pem = include_bytes!("../keys/rsa_a.pub.pem");
        JwtVerifier::new(JwtKeys::from_pem(pem).expect("test key"))
    })
}

pub fn check_token(data: &[u8]) {
    // Claims and key material parsers on raw bytes.
    // A token's `info` is kept as compact JSON text of an object: it reads back.
    if let Ok(Some(info)) = parse_claims(data).map(|c| c.info) {
        let back: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&info).expect("info reads back as a JSON object");
        assert_eq!(serde_json::Value::Object(back).to_string(), *info);
    }
    let _ = JwtKeys::from_jwks(data);
    let Ok(token) = std::str::from_utf8(data) else {
        return;
    };
    let unverified = inspect_unverified(token);
    for v in [hs(), rs()] {
        match v.verify(token, NOW) {
            Ok(claims) => {
                let (_, _, seen) = unverified.clone().expect("accepted but unreadable");
                assert_eq!(seen, claims);
            }
            Err(e) => {
                assert_eq!(e.status(), 401, "{e:?}");
                let msg = e.to_string();
                assert!(msg.len() < 100 && !msg.contains('\n'), "{msg:?}");
            }
        }
        match v.authorize_subscribe(Some(token), 1, NOW) {
            Ok(grant) => assert_eq!(grant.user, 1),
            Err(e) => assert!(matches!(e.status(), 401 | 403)),
        }
    }
    // Audience and issuer only narrow what is accepted.
    if hs_scoped().verify(token, NOW).is_ok() {
        assert!(
            hs().verify(token, NOW).is_ok(),
            "scoped accepted what plain refused"
        );
    }
    // The RSA verifier accepts nothing the fuzzer can make: it has no seed signed
    // with the private key, and HS256 tokens (even keyed with the public PEM) are
    // refused by algorithm.
    assert!(rs().verify(token, NOW).is_err());
}
