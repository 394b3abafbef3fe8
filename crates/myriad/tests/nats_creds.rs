//! `--nats-creds FILE` against a nats-server in operator mode (decentralized JWT
//! auth, as `nsc` sets it up): an operator, an account preloaded in a memory
//! resolver, a user JWT the account signed and its seed in a `.creds` file. A router
//! and a gateway connect with that file and serve a publish; its seed shows in no
//! log and no argument; a user the account did not sign is refused.

mod common;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use common::cluster::{sse, wait_router_connections};
use common::read_until;
use common::secured::{serve, spawn_logged, start_nats};
use nkeys::KeyPair;
use std::process::Command;

/// The subscriber's user, and the subject published to.
const USER: u64 = 5;

/// A NATS JWT (v2) of `claims` for `subject`, signed by `issuer`.
fn jwt(issuer: &KeyPair, subject: &str, name: &str, nats: serde_json::Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(r#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let claims = serde_json::json!({
        "jti": format!("{name}-{subject}"),
        "iat": 1_700_000_000u64,
        "iss": issuer.public_key(),
        "name": name,
        "sub": subject,
        "nats": nats,
    });
    let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signed = format!("{header}.{claims}");
    let signature = URL_SAFE_NO_PAD.encode(issuer.sign(signed.as_bytes()).unwrap());
    format!("{signed}.{signature}")
}

/// A `.creds` file's text, as `nsc generate creds` writes it.
fn creds(user_jwt: &str, seed: &str) -> String {
    format!(
        "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
         ************************* IMPORTANT *************************\n\
         NKEY Seed printed below can be used to sign and prove identity.\n\n\
         -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
    )
}

/// A user of `account` with no limits.
fn user_jwt(account: &KeyPair, user: &KeyPair) -> String {
    let nats = serde_json::json!({
        "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
        "type": "user", "version": 2,
    });
    jwt(account, &user.public_key(), "myriad", nats)
}

#[test]
fn a_creds_file_authenticates_router_and_gateway_in_operator_mode() {
    let (operator, account) = (KeyPair::new_operator(), KeyPair::new_account());
    let operator_jwt = jwt(
        &operator,
        &operator.public_key(),
        "operator",
        serde_json::json!({"type": "operator", "version": 2}),
    );
    let limits = serde_json::json!({
        "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
        "wildcards": true, "conn": -1, "leaf": -1,
    });
    let account_jwt = jwt(
        &operator,
        &account.public_key(),
        "myriad",
        serde_json::json!({"limits": limits, "type": "account", "version": 2}),
    );
    let dir = tempfile::tempdir().unwrap();
    let conf = format!(
        "operator: {operator_jwt}\nresolver: MEMORY\nresolver_preload: {{ {}: {account_jwt} }}\n",
        account.public_key()
    );
    let nats = start_nats(dir.path(), &conf, &[]);
    let user = KeyPair::new_user();
    let seed = user.seed().unwrap();
    let file = dir.path().join("myriad.creds");
    std::fs::write(&file, creds(&user_jwt(&account, &user), &seed)).unwrap();
    let file = file.to_str().unwrap();

    let mut router = Command::new(env!("CARGO_BIN_EXE_myriad"));
    router
        .args([
            "serve", "--role", "router", "--store", "memory", "--nats", &nats.url,
        ])
        .args(["--nats-creds", file]);
    let (mut router, line, router_log) = spawn_logged(&mut router, "myriad router serving");
    assert!(line.contains("nats_auth=creds "), "{line}");
    let (gw, gw_log) = serve(
        &[
            "--role",
            "gateway",
            "--listen",
            "127.0.0.1:0",
            "--loops",
            "1",
        ],
        &[
            ("MYRIAD_NATS", nats.url.as_str()),
            ("MYRIAD_NATS_CREDS", file),
        ],
        "listen=",
    );
    let (mut stream, mut got) = sse(&gw, USER, None);
    wait_router_connections(&gw, 1);
    assert_eq!(gw.publish(USER, "by-creds")["connections"], 1);
    read_until(&mut stream, &mut got, "by-creds");
    for (name, text) in [
        ("the router's log", router_log.lock().unwrap().join("\n")),
        ("the gateway's log", gw_log.lock().unwrap().join("\n")),
        ("the gateway's /stats", gw.stats().to_string()),
    ] {
        assert!(!text.contains(&seed), "the seed is in {name}");
    }

    // A user signed by another account's key: refused, saying so.
    let stranger = KeyPair::new_user();
    let forged = dir.path().join("forged.creds");
    let other = KeyPair::new_account();
    std::fs::write(
        &forged,
        creds(&user_jwt(&other, &stranger), &stranger.seed().unwrap()),
    )
    .unwrap();
    common::secured::gateway_refused_by_nats(
        &nats.url,
        &["--nats-creds", forged.to_str().unwrap()],
    );
    let _ = router.kill();
    let _ = router.wait();
}
