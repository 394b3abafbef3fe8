//! The listener's TLS as the flags ask for it: certificate files or a generated
//! self-signed certificate, the ALPN offered, and whether the kernel takes the
//! transmit side (`--ktls`).

use std::path::PathBuf;
use std::sync::Arc;

/// The listener's TLS: the certificate new connections get (reloaded on SIGHUP) and
/// how it was obtained, for the start line.
#[derive(Clone)]
pub struct TlsSetup {
    pub config: Arc<tls::ReloadableConfig>,
    /// Where a generated self-signed certificate was written (clients trust this
    /// file); `None` for `--tls-cert`.
    pub self_signed: Option<PathBuf>,
    /// `--ktls`: whether the kernel takes each connection's transmit side.
    pub ktls: Ktls,
}

/// `--ktls`, decided once at start by probing the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ktls {
    /// Not asked for: records are sealed in user space.
    Off,
    /// Asked for and the kernel has it: after each TLS 1.3 handshake the transmit
    /// keys go to the kernel, which seals what the loop writes.
    Tx,
    /// Asked for, but the kernel cannot (why, in words): served as [`Ktls::Off`].
    Unavailable(String),
}

impl Ktls {
    /// What `--ktls` comes to on this kernel (`asked`: the flag was given).
    pub fn probe(asked: bool) -> Ktls {
        if !asked {
            return Ktls::Off;
        }
        match tls::ktls::probe() {
            tls::ktls::Availability::Available => Ktls::Tx,
            tls::ktls::Availability::Unavailable(why) => Ktls::Unavailable(why),
        }
    }
}

impl std::fmt::Debug for TlsSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSetup")
            .field("source", self.config.source())
            .field("self_signed", &self.self_signed)
            .field("ktls", &self.ktls)
            .finish()
    }
}

impl TlsSetup {
    /// PEM certificate chain and key files, re-read on SIGHUP.
    /// `h2`: ALPN offers HTTP/2 as well as HTTP/1.1.
    pub fn from_files(cert: PathBuf, key: PathBuf, h2: bool) -> anyhow::Result<TlsSetup> {
        let config =
            tls::ReloadableConfig::new(tls::CertSource::Files { cert, key }, server_options(h2))?;
        Ok(TlsSetup {
            config: Arc::new(config),
            self_signed: None,
            ktls: Ktls::Off,
        })
    }

    /// A generated ECDSA P-256 certificate for localhost, 127.0.0.1 and ::1; its PEM
    /// is written to `dir/cert.pem` so clients can trust it (`curl --cacert`).
    pub fn self_signed(dir: &std::path::Path, h2: bool) -> anyhow::Result<TlsSetup> {
        let names: Vec<String> = tls::DEFAULT_NAMES.iter().map(|n| n.to_string()).collect();
        let generated = tls::self_signed(&names)?;
        std::fs::create_dir_all(dir)?;
        let (cert, _key) = generated.write(dir)?;
        let config = tls::ReloadableConfig::new(
            tls::CertSource::Given(generated.identity()?),
            server_options(h2),
        )?;
        Ok(TlsSetup {
            config: Arc::new(config),
            self_signed: Some(cert),
            ktls: Ktls::Off,
        })
    }
}

/// `--tls`: the one mode besides certificate files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TlsMode {
    /// Generate a self-signed certificate at start (browsers warn; for trying out).
    SelfSigned,
}

/// ALPN the listener offers: `h2` first where it is served (WebSocket clients ask
/// for `http/1.1` and get it).
fn server_options(h2: bool) -> tls::ServerOptions {
    let alpn = if h2 {
        vec![tls::Alpn::H2, tls::Alpn::Http11]
    } else {
        vec![tls::Alpn::Http11]
    };
    tls::ServerOptions {
        alpn,
        ..tls::ServerOptions::default()
    }
}
