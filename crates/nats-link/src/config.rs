//! How a process reaches NATS: `--nats` and the `--nats-*` credential and TLS flags
//! ([`NatsAuthArgs`]), resolved into a [`NatsConfig`] that [`crate::link::Link`] connects
//! with. Every role reads the same flags: router, gateway, the supervisor's children
//! and `msggen --nats`.
//!
//! Secrets (a password, a token, an NKey seed, a `.creds` file) come from files or
//! environment variables, never from a flag's value: a flag is in the process's
//! arguments, which any local user reads in `/proc/<pid>/cmdline`. A user and
//! password (or a token) written in the `--nats` URL (`nats://user:pass@host`) still
//! work, but every place that shows the URL shows [`NatsConfig::shown`], with the
//! secret replaced by `***`; the NATS client is given the URL without them.
//!
//! Not here: which subjects each role may use. That is the NATS server's to enforce
//! (docs/security.md "NATS trust boundary", `deploy/nats-authorization.conf`).

use async_nats::ConnectOptions;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Environment variables holding a secret's value (no flag: it would be in argv).
pub const PASSWORD_VAR: &str = "MYRIAD_NATS_PASSWORD";
pub const TOKEN_VAR: &str = "MYRIAD_NATS_TOKEN";
pub const NKEY_VAR: &str = "MYRIAD_NATS_NKEY";

/// What a redacted secret is shown as.
const HIDDEN: &str = "***";

/// The credential and TLS flags of every process that connects to NATS.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct NatsAuthArgs {
    /// NATS user name; its password is read from --nats-password-file or the
    /// MYRIAD_NATS_PASSWORD variable (there is no password flag: argv is public).
    #[arg(long, env = "MYRIAD_NATS_USER")]
    pub nats_user: Option<String>,
    /// File holding the NATS password of --nats-user (one line).
    #[arg(long, env = "MYRIAD_NATS_PASSWORD_FILE", value_name = "FILE")]
    pub nats_password_file: Option<PathBuf>,
    /// File holding a NATS token (`authorization { token }`); or the
    /// MYRIAD_NATS_TOKEN variable.
    #[arg(long, env = "MYRIAD_NATS_TOKEN_FILE", value_name = "FILE")]
    pub nats_token_file: Option<PathBuf>,
    /// File holding an NKey seed (`SU…`, as `nk -gen user` writes it); or the
    /// MYRIAD_NATS_NKEY variable.
    #[arg(long, env = "MYRIAD_NATS_NKEY_FILE", value_name = "FILE")]
    pub nats_nkey_file: Option<PathBuf>,
    /// NATS `.creds` file (a user JWT and its NKey seed, as `nsc` writes it).
    #[arg(long, env = "MYRIAD_NATS_CREDS", value_name = "FILE")]
    pub nats_creds: Option<PathBuf>,
    /// CA certificates (PEM) the NATS server's certificate must chain to; TLS is then
    /// required (as with a `tls://` URL).
    #[arg(long, env = "MYRIAD_NATS_CA", value_name = "FILE")]
    pub nats_ca: Option<PathBuf>,
    /// Client certificate (PEM) shown to a NATS server that verifies clients
    /// (`tls { verify: true }`); with --nats-key.
    #[arg(
        long,
        env = "MYRIAD_NATS_CERT",
        value_name = "FILE",
        requires = "nats_key"
    )]
    pub nats_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(
        long,
        env = "MYRIAD_NATS_KEY",
        value_name = "FILE",
        requires = "nats_cert"
    )]
    pub nats_key: Option<PathBuf>,
}

/// Why the NATS flags cannot be used. No variant holds a secret's value.
#[derive(Debug, Error)]
pub enum NatsConfigError {
    #[error("--nats is empty")]
    NoServer,
    #[error("--nats {0}: not a NATS URL (nats://host:port, tls://host:port)")]
    BadUrl(String),
    #[error("cannot read {what} {path}: {why}")]
    Unreadable {
        what: &'static str,
        path: PathBuf,
        why: std::io::Error,
    },
    #[error("{0} is empty")]
    Empty(String),
    #[error("the password is given twice: by --nats-password-file and by {PASSWORD_VAR}")]
    PasswordTwice,
    #[error("the token is given twice: by --nats-token-file and by {TOKEN_VAR}")]
    TokenTwice,
    #[error("the NKey seed is given twice: by --nats-nkey-file and by {NKEY_VAR}")]
    NkeyTwice,
    #[error("--nats-user needs a password: --nats-password-file or {PASSWORD_VAR}")]
    NoPassword,
    #[error("a NATS password needs --nats-user")]
    NoUser,
    #[error("the --nats URLs carry different credentials; write them once (or use the flags)")]
    UrlsDisagree,
    #[error("NATS credentials are given twice ({0}); give one kind")]
    TwoKinds(String),
    #[error("{0} does not hold an NKey user seed (a line starting with SU)")]
    BadSeed(String),
    #[error("--nats-creds {0} is not a NATS credentials file (a user JWT and its NKey seed)")]
    BadCreds(PathBuf),
    #[error("{what} {path} holds no PEM {kind}")]
    NotPem {
        what: &'static str,
        path: PathBuf,
        kind: &'static str,
    },
}

/// A secret's value: shown as `***` by `Debug`, so it never reaches a log by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(HIDDEN)
    }
}

/// How this process proves itself to NATS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credentials {
    None,
    UserPassword {
        user: String,
        password: Secret,
    },
    Token(Secret),
    /// An NKey seed (the server knows the public key).
    Nkey(Secret),
    /// A `.creds` file's text: a user JWT and its seed.
    Creds {
        path: PathBuf,
        text: Secret,
    },
}

/// The NATS servers, credentials and TLS a process connects with.
#[derive(Clone, Debug)]
pub struct NatsConfig {
    /// The servers without user information, as the client is given them.
    servers: Vec<String>,
    /// The servers as shown in logs, `/stats` and errors (secrets as `***`).
    shown: String,
    credentials: Credentials,
    ca: Option<PathBuf>,
    client_cert: Option<(PathBuf, PathBuf)>,
    /// The inbox prefix of this process's requests (see [`NatsConfig::with_inbox`]).
    inbox: String,
}

/// The inbox prefix of myriad's own processes: the replies to their requests (JetStream,
/// a router shard's publishes) stay out of `_INBOX.>`, which back-ends may read.
pub const MYRIAD_INBOX: &str = "myriad.inbox";

impl NatsConfig {
    /// Resolves `--nats URL[,URL…]` and `args`, reading secret variables with `env`.
    pub fn resolve(
        urls: &str,
        args: &NatsAuthArgs,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<NatsConfig, NatsConfigError> {
        let (servers, shown, in_url) = split_urls(urls)?;
        let from_flags = flag_credentials(args, &env)?;
        let credentials = match (in_url, from_flags) {
            (Credentials::None, c) | (c, Credentials::None) => c,
            _ => return Err(NatsConfigError::TwoKinds("in --nats and by flags".into())),
        };
        if let Some(ca) = &args.nats_ca {
            pem(ca, "--nats-ca", "CERTIFICATE", "certificate")?;
        }
        let client_cert = match (&args.nats_cert, &args.nats_key) {
            (Some(cert), Some(key)) => {
                pem(cert, "--nats-cert", "CERTIFICATE", "certificate")?;
                pem(key, "--nats-key", "PRIVATE KEY", "private key")?;
                Some((cert.clone(), key.clone()))
            }
            // clap's `requires` makes a lone one an error before this.
            _ => None,
        };
        Ok(NatsConfig {
            servers,
            shown,
            credentials,
            ca: args.nats_ca.clone(),
            client_cert,
            inbox: MYRIAD_INBOX.to_string(),
        })
    }

    /// [`NatsConfig::resolve`] with the process's environment.
    pub fn from_flags(urls: &str, args: &NatsAuthArgs) -> Result<NatsConfig, NatsConfigError> {
        NatsConfig::resolve(urls, args, |name| std::env::var(name).ok())
    }

    /// Replies to this process's requests arrive under `prefix` (`_INBOX` for a
    /// back-end's, like `msggen --nats`; myriad's own roles use [`MYRIAD_INBOX`]).
    pub fn with_inbox(mut self, prefix: &str) -> NatsConfig {
        self.inbox = prefix.to_string();
        self
    }

    /// The servers as they may be shown: `nats://user:***@host:4222`.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The servers without user information.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// Whether this connection needs more than a NATS server with no
    /// authorization and no TLS (which `serve --processes` may start itself).
    pub fn is_secured(&self) -> bool {
        self.credentials != Credentials::None || self.tls_required()
    }

    /// Whether the connection must be TLS: a CA or client certificate given, or a
    /// `tls://` URL.
    pub fn tls_required(&self) -> bool {
        self.ca.is_some()
            || self.client_cert.is_some()
            || self.servers.iter().any(|s| s.starts_with("tls://"))
    }

    /// How this process authenticates, for its start line (never a secret).
    pub fn describe_auth(&self) -> String {
        match &self.credentials {
            Credentials::None => "none".into(),
            Credentials::UserPassword { user, .. } => format!("user {user}"),
            Credentials::Token(_) => "token".into(),
            Credentials::Nkey(seed) => match nkeys::KeyPair::from_seed(seed.expose()) {
                Ok(pair) => format!("nkey {}", pair.public_key()),
                Err(_) => "nkey".into(),
            },
            Credentials::Creds { path, .. } => format!("creds {}", path.display()),
        }
    }

    /// TLS to NATS, for the start line.
    pub fn describe_tls(&self) -> String {
        match (self.tls_required(), &self.ca, &self.client_cert) {
            (false, _, _) => "off".into(),
            (true, ca, cert) => {
                let ca = ca
                    .as_ref()
                    .map_or("system CAs".into(), |p| format!("CA {}", p.display()));
                let cert = cert.as_ref().map_or(String::new(), |(c, _)| {
                    format!(", client certificate {}", c.display())
                });
                format!("required ({ca}{cert})")
            }
        }
    }

    /// `options` with these credentials, TLS settings and inbox prefix.
    pub fn apply(&self, options: ConnectOptions) -> std::io::Result<ConnectOptions> {
        let mut options = options.custom_inbox_prefix(&self.inbox);
        options = match &self.credentials {
            Credentials::None => options,
            Credentials::UserPassword { user, password } => {
                options.user_and_password(user.clone(), password.expose().to_string())
            }
            Credentials::Token(token) => options.token(token.expose().to_string()),
            Credentials::Nkey(seed) => options.nkey(seed.expose().to_string()),
            Credentials::Creds { text, .. } => options.credentials(text.expose())?,
        };
        if let Some(ca) = &self.ca {
            options = options.add_root_certificates(ca.clone());
        }
        if let Some((cert, key)) = &self.client_cert {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        if self.ca.is_some() || self.client_cert.is_some() {
            options = options.require_tls(true);
        }
        Ok(options)
    }
}

/// The servers of `--nats` without user information, the list as shown, and the
/// credentials the URLs carry (the same in every URL that has some).
fn split_urls(urls: &str) -> Result<(Vec<String>, String, Credentials), NatsConfigError> {
    let mut servers = Vec::new();
    let mut shown = Vec::new();
    let mut found = Credentials::None;
    for url in urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
        let (scheme, rest) = match url.split_once("://") {
            Some((scheme, rest)) => (format!("{scheme}://"), rest),
            None => (String::new(), url),
        };
        let authority_end = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = rest.split_at(authority_end);
        let Some((userinfo, host)) = authority.rsplit_once('@') else {
            servers.push(url.to_string());
            shown.push(url.to_string());
            continue;
        };
        if host.is_empty() {
            return Err(NatsConfigError::BadUrl(redact_userinfo(url)));
        }
        let (credentials, hidden) = match userinfo.split_once(':') {
            Some((user, password)) => (
                Credentials::UserPassword {
                    user: decode(user),
                    password: Secret(decode(password)),
                },
                format!("{user}:{HIDDEN}"),
            ),
            // `nats://TOKEN@host`, as the NATS clients read it.
            None => (Credentials::Token(Secret(decode(userinfo))), HIDDEN.into()),
        };
        match &found {
            Credentials::None => found = credentials,
            same if *same == credentials => {}
            _ => return Err(NatsConfigError::UrlsDisagree),
        }
        servers.push(format!("{scheme}{host}{path}"));
        shown.push(format!("{scheme}{hidden}@{host}{path}"));
    }
    if servers.is_empty() {
        return Err(NatsConfigError::NoServer);
    }
    Ok((servers, shown.join(","), found))
}

/// A URL's user information replaced by `***` (for an error about the URL itself).
fn redact_userinfo(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) if rest.contains('@') => {
            format!(
                "{scheme}://{HIDDEN}@{}",
                rest.rsplit('@').next().unwrap_or("")
            )
        }
        _ => url.to_string(),
    }
}

/// Percent-decoding of a URL's user or password (`p%40ss` is `p@ss`).
fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// The credentials the flags and secret variables give (at most one kind).
fn flag_credentials(
    args: &NatsAuthArgs,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Credentials, NatsConfigError> {
    let password = one_secret(
        args.nats_password_file.as_deref(),
        "--nats-password-file",
        PASSWORD_VAR,
        env,
        NatsConfigError::PasswordTwice,
    )?;
    let token = one_secret(
        args.nats_token_file.as_deref(),
        "--nats-token-file",
        TOKEN_VAR,
        env,
        NatsConfigError::TokenTwice,
    )?;
    let seed = one_secret(
        args.nats_nkey_file.as_deref(),
        "--nats-nkey-file",
        NKEY_VAR,
        env,
        NatsConfigError::NkeyTwice,
    )?;
    let mut kinds = Vec::new();
    match (&args.nats_user, password) {
        (Some(user), Some((password, _))) => kinds.push((
            "user and password",
            Credentials::UserPassword {
                user: user.clone(),
                password,
            },
        )),
        (Some(_), None) => return Err(NatsConfigError::NoPassword),
        (None, Some(_)) => return Err(NatsConfigError::NoUser),
        (None, None) => {}
    }
    if let Some((token, _)) = token {
        kinds.push(("token", Credentials::Token(token)));
    }
    if let Some((seed, from)) = seed {
        let valid =
            seed.expose().starts_with("SU") && nkeys::KeyPair::from_seed(seed.expose()).is_ok();
        if !valid {
            return Err(NatsConfigError::BadSeed(from));
        }
        kinds.push(("nkey", Credentials::Nkey(seed)));
    }
    if let Some(path) = &args.nats_creds {
        let text = read(path, "--nats-creds")?;
        if ConnectOptions::new().credentials(&text).is_err() {
            return Err(NatsConfigError::BadCreds(path.clone()));
        }
        kinds.push((
            "creds",
            Credentials::Creds {
                path: path.clone(),
                text: Secret(text),
            },
        ));
    }
    match kinds.len() {
        0 => Ok(Credentials::None),
        1 => Ok(kinds.remove(0).1),
        _ => {
            let names: Vec<&str> = kinds.iter().map(|(name, _)| *name).collect();
            Err(NatsConfigError::TwoKinds(names.join(", ")))
        }
    }
}

/// A secret from its file flag or its variable (not both), and where it came from.
fn one_secret(
    file: Option<&Path>,
    flag: &'static str,
    var: &str,
    env: &impl Fn(&str) -> Option<String>,
    twice: NatsConfigError,
) -> Result<Option<(Secret, String)>, NatsConfigError> {
    let (value, from) = match (file, env(var)) {
        (Some(_), Some(_)) => return Err(twice),
        (Some(path), None) => (read(path, flag)?, format!("{flag} {}", path.display())),
        (None, Some(value)) => (value, var.to_string()),
        (None, None) => return Ok(None),
    };
    // A file's trailing line end is not part of the secret.
    let value = value.trim_end_matches(['\n', '\r']).to_string();
    if value.is_empty() {
        return Err(NatsConfigError::Empty(from));
    }
    Ok(Some((Secret(value), from)))
}

fn read(path: &Path, what: &'static str) -> Result<String, NatsConfigError> {
    std::fs::read_to_string(path).map_err(|why| NatsConfigError::Unreadable {
        what,
        path: path.to_path_buf(),
        why,
    })
}

/// Checks that `path` holds a PEM block of `label` (at start, not at the first connect).
fn pem(
    path: &Path,
    what: &'static str,
    label: &str,
    kind: &'static str,
) -> Result<(), NatsConfigError> {
    let text = read(path, what)?;
    let found = text
        .lines()
        .any(|l| l.starts_with("-----BEGIN ") && l.contains(label));
    if found {
        Ok(())
    } else {
        Err(NatsConfigError::NotPem {
            what,
            path: path.to_path_buf(),
            kind,
        })
    }
}

#[cfg(test)]
mod tests;
