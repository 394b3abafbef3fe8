//! Token verification against real keys (tests/keys, test-only PEMs): the good
//! token, and every way a hostile client could try to get in.

use std::path::PathBuf;

use auth::{AuthError, JwtKeys, JwtVerifier, KeyError, PublishGrant};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::json;

const NOW: u64 = 1_700_000_000;
const SECRET: &[u8] = b"a-test-secret-of-at-least-32-bytes!!";

fn key_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/keys")
        .join(name)
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(key_path(name)).expect("test key")
}

fn hs(claims: &serde_json::Value) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(SECRET),
    )
    .unwrap()
}

fn rs(private: &str, kid: Option<&str>, claims: &serde_json::Value) -> String {
    let mut h = Header::new(Algorithm::RS256);
    h.kid = kid.map(str::to_owned);
    let key = EncodingKey::from_rsa_pem(&read(private)).unwrap();
    encode(&h, claims, &key).unwrap()
}

fn es(claims: &serde_json::Value) -> String {
    let key = EncodingKey::from_ec_pem(&read("ec_a.key.pem")).unwrap();
    encode(&Header::new(Algorithm::ES256), claims, &key).unwrap()
}

fn hs_verifier() -> JwtVerifier {
    JwtVerifier::new(JwtKeys::hs256(SECRET).unwrap())
}

fn rs_verifier() -> JwtVerifier {
    JwtVerifier::new(JwtKeys::from_file(&key_path("rsa_a.pub.pem")).unwrap())
}

/// A token with its header and payload replaced (signature kept).
fn with_parts(token: &str, header: Option<&str>, payload: Option<&str>) -> String {
    let p: Vec<&str> = token.split('.').collect();
    let h = header.map_or(p[0].to_owned(), |h| URL_SAFE_NO_PAD.encode(h));
    let b = payload.map_or(p[1].to_owned(), |b| URL_SAFE_NO_PAD.encode(b));
    format!("{h}.{b}.{}", p[2])
}

fn jwks(keys: &[(&str, &str, Algorithm)]) -> Vec<u8> {
    let keys = keys
        .iter()
        .map(|(file, kid, alg)| {
            let pem = read(file);
            let enc = match alg {
                Algorithm::ES256 => EncodingKey::from_ec_pem(&pem).unwrap(),
                _ => EncodingKey::from_rsa_pem(&pem).unwrap(),
            };
            let mut jwk = Jwk::from_encoding_key(&enc, *alg).unwrap();
            jwk.common.key_id = Some((*kid).to_owned());
            jwk
        })
        .collect();
    serde_json::to_vec(&JwkSet { keys }).unwrap()
}

#[test]
fn good_tokens_for_every_key_kind() {
    let claims = json!({"sub": "42", "exp": NOW + 60, "pub": [42, "100-199"]});
    let g = hs_verifier()
        .authorize_subscribe(Some(&hs(&claims)), 42, NOW)
        .unwrap();
    assert_eq!(g.user, 42);
    assert_eq!(g.valid_until, Some(NOW + 60 + auth::DEFAULT_LEEWAY));
    assert_eq!(
        g.publish,
        PublishGrant::Ranges(vec![(42, 42), (100, 199)].into())
    );
    assert_eq!(g.authorize_publish(150), Ok(()));
    assert_eq!(g.authorize_publish(7), Err(AuthError::PublishDenied(7)));
    assert_eq!(AuthError::PublishDenied(7).status(), 403);

    let rs_token = rs("rsa_a.key.pem", None, &claims);
    assert_eq!(
        rs_verifier()
            .authorize_subscribe(Some(&rs_token), 42, NOW)
            .unwrap()
            .user,
        42
    );
    let ec = JwtVerifier::new(JwtKeys::from_file(&key_path("ec_a.pub.pem")).unwrap());
    assert_eq!(ec.keys().describe(), vec![(None, "ES256")]);
    assert_eq!(
        ec.authorize_subscribe(Some(&es(&claims)), 42, NOW)
            .unwrap()
            .user,
        42
    );
}

#[test]
fn sub_as_number_or_string_and_wrong_user() {
    let v = hs_verifier();
    for sub in [json!(42), json!("42")] {
        let t = hs(&json!({ "sub": sub }));
        assert_eq!(v.authorize_subscribe(Some(&t), 42, NOW).unwrap().user, 42);
        let e = v.authorize_subscribe(Some(&t), 43, NOW).unwrap_err();
        assert_eq!(
            e,
            AuthError::WrongUser {
                token: 42,
                path: 43
            }
        );
        assert_eq!(e.status(), 403);
        assert_eq!(e.challenge(), None);
    }
    for bad in [json!({}), json!({"sub": "x"}), json!({"sub": "042"})] {
        let e = v.authorize_subscribe(Some(&hs(&bad)), 42, NOW).unwrap_err();
        assert_eq!(e, AuthError::NoSubject, "{bad}");
        assert_eq!(e.status(), 401);
    }
    let e = v.authorize_subscribe(None, 42, NOW).unwrap_err();
    assert_eq!((e.status(), e.challenge()), (401, Some("Bearer")));
}

#[test]
fn wrong_secret_and_wrong_public_key() {
    let other = JwtVerifier::new(JwtKeys::hs256(b"another-secret-of-at-least-32-bytes").unwrap());
    let t = hs(&json!({"sub": 1}));
    assert_eq!(other.verify(&t, NOW), Err(AuthError::Signature));
    let b = JwtVerifier::new(JwtKeys::from_file(&key_path("rsa_b.pub.pem")).unwrap());
    let t = rs("rsa_a.key.pem", None, &json!({"sub": 1}));
    assert_eq!(b.verify(&t, NOW), Err(AuthError::Signature));
}

#[test]
fn expiry_and_not_before_with_leeway() {
    let v = hs_verifier().with_leeway(5);
    let exp = hs(&json!({"sub": 1, "exp": NOW}));
    assert!(v.verify(&exp, NOW - 1).is_ok());
    assert!(v.verify(&exp, NOW + 4).is_ok(), "inside the leeway");
    assert_eq!(v.verify(&exp, NOW + 5), Err(AuthError::Expired));
    let e = v.verify(&exp, NOW + 3600).unwrap_err();
    assert_eq!(
        (e.status(), e.challenge()),
        (401, Some("Bearer error=\"invalid_token\""))
    );
    let frac = hs(&json!({"sub": 1, "exp": NOW as f64 + 0.5}));
    assert!(v.verify(&frac, NOW + 5).is_ok());
    assert_eq!(v.verify(&frac, NOW + 6), Err(AuthError::Expired));

    let nbf = hs(&json!({"sub": 1, "nbf": NOW + 100}));
    assert_eq!(v.verify(&nbf, NOW), Err(AuthError::NotYetValid));
    assert_eq!(v.verify(&nbf, NOW + 94), Err(AuthError::NotYetValid));
    assert!(v.verify(&nbf, NOW + 95).is_ok(), "inside the leeway");
    // No exp at all: valid forever (documented).
    assert!(v.verify(&hs(&json!({"sub": 1})), u64::MAX / 2).is_ok());
}

#[test]
fn valid_until_is_the_first_second_the_token_is_refused() {
    let v = hs_verifier().with_leeway(5);
    for exp in [NOW as f64, NOW as f64 + 0.5, NOW as f64 - 0.25] {
        let token = hs(&json!({"sub": 1, "exp": exp}));
        let until = v
            .authorize_subscribe(Some(&token), 1, NOW - 10)
            .unwrap()
            .valid_until
            .unwrap();
        assert!(
            v.verify(&token, until - 1).is_ok(),
            "{exp}: one second before"
        );
        assert_eq!(v.verify(&token, until), Err(AuthError::Expired), "{exp}");
    }
    let forever = hs(&json!({"sub": 1}));
    assert_eq!(
        v.authorize_subscribe(Some(&forever), 1, NOW)
            .unwrap()
            .valid_until,
        None
    );
}

#[test]
fn issuer_and_audience_when_configured() {
    let v = hs_verifier()
        .with_issuers(vec!["https://id.example".into(), "other-idp".into()])
        .with_audiences(vec!["push".into()]);
    let ok = |claims| v.verify(&hs(&claims), NOW).map(|_| ());
    assert_eq!(
        ok(json!({"sub": 1, "iss": "other-idp", "aud": "push"})),
        Ok(())
    );
    assert_eq!(
        ok(json!({"sub": 1, "iss": "https://id.example", "aud": ["billing", "push"]})),
        Ok(()),
        "an array naming us among others"
    );
    for (claims, want) in [
        (json!({"sub": 1, "aud": "push"}), AuthError::Issuer),
        (
            json!({"sub": 1, "iss": "evil", "aud": "push"}),
            AuthError::Issuer,
        ),
        (json!({"sub": 1, "iss": "other-idp"}), AuthError::Audience),
        (
            json!({"sub": 1, "iss": "other-idp", "aud": "billing"}),
            AuthError::Audience,
        ),
        (
            json!({"sub": 1, "iss": "other-idp", "aud": []}),
            AuthError::Audience,
        ),
        (
            json!({"sub": 1, "iss": "other-idp", "aud": ["Push"]}),
            AuthError::Audience,
        ),
    ] {
        assert_eq!(ok(claims.clone()), Err(want.clone()), "{claims}");
        assert_eq!(
            (want.status(), want.challenge()),
            (401, Some("Bearer error=\"invalid_token\""))
        );
    }
    // Not configured: the claims are not read (the RS256 verifier has neither).
    let rs_token = rs(
        "rsa_a.key.pem",
        None,
        &json!({"sub": 1, "iss": "x", "aud": "y"}),
    );
    assert!(rs_verifier().verify(&rs_token, NOW).is_ok());
    // The signature is checked first: a forged aud is a bad signature, not an audience.
    let forged = with_parts(
        &hs(&json!({"sub": 1, "iss": "other-idp", "aud": "billing"})),
        None,
        Some(r#"{"sub":1,"iss":"other-idp","aud":"push"}"#),
    );
    assert_eq!(v.verify(&forged, NOW), Err(AuthError::Signature));
}

#[test]
fn tampered_payload_and_signature() {
    let v = hs_verifier();
    let t = hs(&json!({"sub": 1}));
    let forged = with_parts(&t, None, Some(r#"{"sub":2}"#));
    assert_eq!(v.verify(&forged, NOW), Err(AuthError::Signature));
    // Flip one character of the signature (not the last one, whose low bits are padding).
    let mut sig: Vec<u8> = t.clone().into_bytes();
    let i = t.rfind('.').unwrap() + 3;
    sig[i] = if sig[i] == b'A' { b'B' } else { b'A' };
    assert_eq!(
        v.verify(std::str::from_utf8(&sig).unwrap(), NOW),
        Err(AuthError::Signature)
    );
    let rs_t = rs("rsa_a.key.pem", None, &json!({"sub": 1}));
    let forged = with_parts(&rs_t, None, Some(r#"{"sub":1,"pub":["*"]}"#));
    assert_eq!(
        rs_verifier().verify(&forged, NOW),
        Err(AuthError::Signature)
    );
}

#[test]
fn alg_none_is_refused() {
    let t = hs(&json!({"sub": 1}));
    for header in [
        r#"{"alg":"none","typ":"JWT"}"#,
        r#"{"alg":"None"}"#,
        r#"{"alg":"HS384"}"#,
        r#"{"alg":"RS256"}"#,
    ] {
        let forged = with_parts(&t, Some(header), None);
        assert_eq!(
            hs_verifier().verify(&forged, NOW),
            Err(AuthError::Algorithm),
            "{header}"
        );
        // The classic unsigned token: empty signature.
        let unsigned = format!("{}.", &forged[..forged.rfind('.').unwrap()]);
        assert_eq!(
            hs_verifier().verify(&unsigned, NOW),
            Err(AuthError::Algorithm)
        );
        assert_eq!(
            rs_verifier().verify(&unsigned, NOW).unwrap_err().status(),
            401
        );
    }
}

#[test]
fn hs256_signed_with_the_public_key_is_refused() {
    // The confusion attack: an attacker who knows the RSA public key signs HS256
    // with the PEM bytes as the HMAC secret, hoping the server uses its "key" for
    // whatever algorithm the header names.
    let public_pem = read("rsa_a.pub.pem");
    let claims = json!({"sub": 1, "pub": ["*"]});
    let forged = encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(&public_pem),
    )
    .unwrap();
    assert_eq!(
        rs_verifier().verify(&forged, NOW),
        Err(AuthError::Algorithm)
    );
    // Same against a JWKS-configured verifier.
    let set = JwtKeys::from_jwks(&jwks(&[("rsa_a.key.pem", "a", Algorithm::RS256)])).unwrap();
    let mut h = Header::new(Algorithm::HS256);
    h.kid = Some("a".into());
    let forged = encode(&h, &claims, &EncodingKey::from_secret(&public_pem)).unwrap();
    assert_eq!(
        JwtVerifier::new(set).verify(&forged, NOW),
        Err(AuthError::Algorithm)
    );
    // And an RS256 header against an HS256 secret verifier.
    let rs_t = rs("rsa_a.key.pem", None, &claims);
    assert_eq!(hs_verifier().verify(&rs_t, NOW), Err(AuthError::Algorithm));
}

#[test]
fn jwks_kid_selection_and_rotation() {
    let claims = json!({"sub": 9});
    let ta = rs("rsa_a.key.pem", Some("a"), &claims);
    let tb = rs("rsa_b.key.pem", Some("b"), &claims);
    let untagged = rs("rsa_a.key.pem", None, &claims);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    let load = |set: &[(&str, &str, Algorithm)]| {
        std::fs::write(&path, jwks(set)).unwrap();
        JwtVerifier::new(JwtKeys::from_file(&path).unwrap())
    };
    // Before rotation: only a.
    let v = load(&[("rsa_a.key.pem", "a", Algorithm::RS256)]);
    assert!(v.verify(&ta, NOW).is_ok());
    assert!(
        v.verify(&untagged, NOW).is_ok(),
        "a lone key serves kid-less tokens"
    );
    assert_eq!(v.verify(&tb, NOW), Err(AuthError::UnknownKey));
    // During: both (plus an EC key).
    let v = load(&[
        ("rsa_a.key.pem", "a", Algorithm::RS256),
        ("rsa_b.key.pem", "b", Algorithm::RS256),
        ("ec_a.key.pem", "e", Algorithm::ES256),
    ]);
    assert!(v.verify(&ta, NOW).is_ok());
    assert!(v.verify(&tb, NOW).is_ok());
    assert_eq!(
        v.verify(&untagged, NOW),
        Err(AuthError::UnknownKey),
        "several keys: a token must name one"
    );
    // A token naming b but signed by a.
    let lying = rs("rsa_a.key.pem", Some("b"), &claims);
    assert_eq!(v.verify(&lying, NOW), Err(AuthError::Signature));
    // ES256 by kid; the same EC token naming an RSA kid is refused by algorithm.
    let key = EncodingKey::from_ec_pem(&read("ec_a.key.pem")).unwrap();
    let mut h = Header::new(Algorithm::ES256);
    h.kid = Some("e".into());
    assert!(v.verify(&encode(&h, &claims, &key).unwrap(), NOW).is_ok());
    h.kid = Some("a".into());
    assert_eq!(
        v.verify(&encode(&h, &claims, &key).unwrap(), NOW),
        Err(AuthError::Algorithm)
    );
    // After: only b. Tokens signed by a stop working.
    let v = load(&[("rsa_b.key.pem", "b", Algorithm::RS256)]);
    assert_eq!(v.verify(&ta, NOW), Err(AuthError::UnknownKey));
    assert!(v.verify(&tb, NOW).is_ok());
}

#[test]
fn malformed_tokens() {
    let v = hs_verifier();
    let t = hs(&json!({"sub": 1}));
    let cases: Vec<String> = vec![
        "".into(),
        "abc".into(),
        "a.b".into(),
        format!("{t}.x"),
        "!!!.e30.".into(),
        format!("{}.e30.x", URL_SAFE_NO_PAD.encode("not json")),
        format!("{}.e30.x", URL_SAFE_NO_PAD.encode("[]")),
        format!(
            "{}.e30.x",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","crit":["b64"]}"#)
        ),
        format!("{}.e30.x", URL_SAFE_NO_PAD.encode(r#"{"kid":"x"}"#)),
        "x".repeat(9000),
    ];
    for c in &cases {
        let e = v.verify(c, NOW).unwrap_err();
        assert_eq!(e.status(), 401, "{c:?}: {e}");
        assert!(
            matches!(e, AuthError::Malformed(_) | AuthError::Missing),
            "{c:?}: {e:?}"
        );
    }
    // A validly signed payload that is not a claims object.
    let key = jsonwebtoken::EncodingKey::from_secret(SECRET);
    let signed_array = {
        let h = URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256"}"#);
        let p = URL_SAFE_NO_PAD.encode("[1,2]");
        let msg = format!("{h}.{p}");
        let sig = jsonwebtoken::crypto::sign(msg.as_bytes(), &key, Algorithm::HS256).unwrap();
        format!("{msg}.{sig}")
    };
    assert!(matches!(
        v.verify(&signed_array, NOW),
        Err(AuthError::Malformed(_))
    ));
    // Bad claim types in a signed token.
    assert!(matches!(
        v.verify(&hs(&json!({"sub": 1, "exp": "soon"})), NOW),
        Err(AuthError::Malformed(_))
    ));
    assert!(matches!(
        v.verify(&hs(&json!({"sub": 1, "pub": ["1-x"]})), NOW),
        Err(AuthError::Malformed(_))
    ));
}

#[test]
fn key_loading_errors() {
    assert!(matches!(
        JwtKeys::hs256(b"short"),
        Err(KeyError::ShortSecret(5))
    ));
    assert!(matches!(
        JwtKeys::from_file(&key_path("rsa_a.key.pem")),
        Err(KeyError::PrivateKey)
    ));
    assert!(matches!(
        JwtKeys::from_file(&key_path("missing.pem")),
        Err(KeyError::Io { .. })
    ));
    assert!(matches!(
        JwtKeys::from_pem(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"),
        Err(KeyError::BadPem)
    ));
    assert!(matches!(
        JwtKeys::from_jwks(b"{\"keys\":[]}"),
        Err(KeyError::NoKeys)
    ));
    assert!(matches!(
        JwtKeys::from_jwks(b"{"),
        Err(KeyError::BadJwks(_))
    ));
    let dup = jwks(&[
        ("rsa_a.key.pem", "a", Algorithm::RS256),
        ("rsa_b.key.pem", "a", Algorithm::RS256),
    ]);
    assert!(matches!(
        JwtKeys::from_jwks(&dup),
        Err(KeyError::DuplicateKid(_))
    ));
    let mut set: serde_json::Value = serde_json::from_slice(&jwks(&[
        ("rsa_a.key.pem", "a", Algorithm::RS256),
        ("rsa_b.key.pem", "b", Algorithm::RS256),
    ]))
    .unwrap();
    set["keys"][1].as_object_mut().unwrap().remove("kid");
    assert!(matches!(
        JwtKeys::from_jwks(&serde_json::to_vec(&set).unwrap()),
        Err(KeyError::MissingKid)
    ));
    let oct = br#"{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"s"}]}"#;
    assert!(matches!(
        JwtKeys::from_jwks(oct),
        Err(KeyError::BadJwk { index: 0, .. })
    ));
    // An "enc" key is skipped; nothing usable is left.
    let mut enc: serde_json::Value =
        serde_json::from_slice(&jwks(&[("rsa_a.key.pem", "a", Algorithm::RS256)])).unwrap();
    enc["keys"][0]["use"] = json!("enc");
    assert!(matches!(
        JwtKeys::from_jwks(&serde_json::to_vec(&enc).unwrap()),
        Err(KeyError::NoKeys)
    ));
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("k");
    std::fs::write(&p, "hello").unwrap();
    assert!(matches!(
        JwtKeys::from_file(&p),
        Err(KeyError::UnknownFormat)
    ));
    // Debug output never shows key material.
    let k = JwtKeys::hs256(SECRET).unwrap();
    assert!(!format!("{k:?}").contains("secret"));
}
