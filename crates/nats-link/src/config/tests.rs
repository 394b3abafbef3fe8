use super::*;
use std::collections::HashMap;

fn no_env(_: &str) -> Option<String> {
    None
}

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_url_s_password_is_taken_out_and_shown_as_stars() {
    let c = NatsConfig::resolve(
        "nats://router:s%40cret@127.0.0.1:4222,nats://router:s%40cret@10.0.0.2",
        &NatsAuthArgs::default(),
        no_env,
    )
    .unwrap();
    assert_eq!(c.servers(), ["nats://127.0.0.1:4222", "nats://10.0.0.2"]);
    assert_eq!(
        c.shown(),
        "nats://router:***@127.0.0.1:4222,nats://router:***@10.0.0.2"
    );
    assert_eq!(
        c.credentials(),
        &Credentials::UserPassword {
            user: "router".into(),
            password: Secret("s@cret".into())
        }
    );
    assert!(!format!("{c:?}").contains("cret"), "{c:?}");
    assert!(!c.describe_auth().contains("cret"));
}

#[test]
fn a_url_with_a_user_only_carries_a_token() {
    let c = NatsConfig::resolve(
        "tls://t0ken@nats.example:4443",
        &NatsAuthArgs::default(),
        no_env,
    )
    .unwrap();
    assert_eq!(c.shown(), "tls://***@nats.example:4443");
    assert_eq!(c.credentials(), &Credentials::Token(Secret("t0ken".into())));
    assert!(c.tls_required());
}

#[test]
fn urls_with_different_credentials_are_refused_without_showing_them() {
    let e = NatsConfig::resolve(
        "nats://a:one@h1,nats://a:two@h2",
        &NatsAuthArgs::default(),
        no_env,
    )
    .unwrap_err();
    assert!(matches!(e, NatsConfigError::UrlsDisagree));
    let e = NatsConfig::resolve("nats://a:pw@", &NatsAuthArgs::default(), no_env).unwrap_err();
    assert!(!e.to_string().contains("pw"), "{e}");
}

#[test]
fn a_password_comes_from_its_file_or_its_variable_not_both() {
    let dir = tempfile::tempdir().unwrap();
    let args = NatsAuthArgs {
        nats_user: Some("gw".into()),
        nats_password_file: Some(file(&dir, "pw", "from-file\n")),
        ..Default::default()
    };
    let c = NatsConfig::resolve("nats://127.0.0.1", &args, no_env).unwrap();
    assert_eq!(
        c.credentials(),
        &Credentials::UserPassword {
            user: "gw".into(),
            password: Secret("from-file".into())
        }
    );
    let e = NatsConfig::resolve("nats://h", &args, env_of(&[(PASSWORD_VAR, "x")])).unwrap_err();
    assert!(matches!(e, NatsConfigError::PasswordTwice));
    let by_env = NatsAuthArgs {
        nats_user: Some("gw".into()),
        ..Default::default()
    };
    let c =
        NatsConfig::resolve("nats://h", &by_env, env_of(&[(PASSWORD_VAR, "from-env")])).unwrap();
    assert_eq!(c.describe_auth(), "user gw");
    let e = NatsConfig::resolve("nats://h", &by_env, no_env).unwrap_err();
    assert!(matches!(e, NatsConfigError::NoPassword));
    let e = NatsConfig::resolve(
        "nats://h",
        &NatsAuthArgs::default(),
        env_of(&[(PASSWORD_VAR, "lonely")]),
    )
    .unwrap_err();
    assert!(matches!(e, NatsConfigError::NoUser));
}

#[test]
fn one_kind_of_credentials_at_a_time() {
    let e = NatsConfig::resolve(
        "nats://h",
        &NatsAuthArgs::default(),
        env_of(&[(TOKEN_VAR, "t"), (NKEY_VAR, "SUxx")]),
    )
    .unwrap_err();
    assert!(matches!(e, NatsConfigError::BadSeed(_)), "{e}");
    let e = NatsConfig::resolve(
        "nats://u:p@h",
        &NatsAuthArgs::default(),
        env_of(&[(TOKEN_VAR, "t")]),
    )
    .unwrap_err();
    assert!(matches!(e, NatsConfigError::TwoKinds(_)), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let args = NatsAuthArgs {
        nats_token_file: Some(file(&dir, "token", "t")),
        ..Default::default()
    };
    let seed = nkeys::KeyPair::new_user().seed().unwrap();
    let e = NatsConfig::resolve("nats://h", &args, env_of(&[(NKEY_VAR, &seed)])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "NATS credentials are given twice (token, nkey); give one kind"
    );
}

#[test]
fn an_nkey_seed_is_checked_and_shown_by_its_public_key() {
    let pair = nkeys::KeyPair::new_user();
    let seed = pair.seed().unwrap();
    let c = NatsConfig::resolve(
        "nats://h",
        &NatsAuthArgs::default(),
        env_of(&[(NKEY_VAR, &seed)]),
    )
    .unwrap();
    assert_eq!(c.describe_auth(), format!("nkey {}", pair.public_key()));
    let dir = tempfile::tempdir().unwrap();
    let args = NatsAuthArgs {
        nats_nkey_file: Some(file(&dir, "seed", "not a seed\n")),
        ..Default::default()
    };
    let e = NatsConfig::resolve("nats://h", &args, no_env).unwrap_err();
    assert!(e.to_string().contains("--nats-nkey-file"), "{e}");
    assert!(!e.to_string().contains("not a seed"), "{e}");
}

#[test]
fn a_creds_file_is_parsed_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let seed = nkeys::KeyPair::new_user().seed().unwrap();
    let creds = format!(
        "-----BEGIN NATS USER JWT-----\neyJhbGciOiJlZDI1NTE5In0.e30.sig\n------END NATS USER JWT------\n\n\
         -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
    );
    let args = NatsAuthArgs {
        nats_creds: Some(file(&dir, "user.creds", &creds)),
        ..Default::default()
    };
    let c = NatsConfig::resolve("nats://h", &args, no_env).unwrap();
    assert!(matches!(c.credentials(), Credentials::Creds { .. }));
    assert!(c.apply(ConnectOptions::new()).is_ok());
    let bad = NatsAuthArgs {
        nats_creds: Some(file(&dir, "bad.creds", "nothing here")),
        ..Default::default()
    };
    let e = NatsConfig::resolve("nats://h", &bad, no_env).unwrap_err();
    assert!(matches!(e, NatsConfigError::BadCreds(_)), "{e}");
}

#[test]
fn tls_files_are_checked_and_make_tls_required() {
    let dir = tempfile::tempdir().unwrap();
    let args = NatsAuthArgs {
        nats_ca: Some(file(&dir, "ca.pem", "-----BEGIN CERTIFICATE-----\nx\n")),
        ..Default::default()
    };
    let c = NatsConfig::resolve("nats://h", &args, no_env).unwrap();
    assert!(c.tls_required() && c.is_secured());
    assert!(c.describe_tls().starts_with("required (CA "));
    let args = NatsAuthArgs {
        nats_ca: Some(file(&dir, "empty.pem", "")),
        ..Default::default()
    };
    let e = NatsConfig::resolve("nats://h", &args, no_env).unwrap_err();
    assert!(e.to_string().contains("holds no PEM certificate"), "{e}");
    let plain = NatsConfig::resolve("nats://h", &NatsAuthArgs::default(), no_env).unwrap();
    assert!(!plain.is_secured());
    assert_eq!(plain.describe_tls(), "off");
}
