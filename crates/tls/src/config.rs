//! Configurations: the server's certificate and key (PEM files, `--tls-cert` /
//! `--tls-key`, or generated), ALPN, and a [`ReloadableConfig`] that swaps in new files
//! for new connections while existing ones keep the `Arc<ServerConfig>` they started
//! with; and the client side flood uses (a CA file, the system bundle, or `--insecure`).
//!
//! Every config uses rustls on ring, offers TLS 1.3 and 1.2, no early data, and, when
//! `lean` is on (the default), enables the takeover of established TLS 1.3 sessions by
//! the lean record layer (secret extraction plus the key-log catch of `keylog`).

use crate::error::ConfigError;
use crate::identity::Identity;
use crate::keylog::Capture;
use crate::session::Alpn;
use parking_lot::RwLock;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where Debian-family systems keep the CA bundle (flood's default trust store).
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The crypto provider of every config here.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Server settings besides the identity.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Offered ALPN protocols, in preference order (offer `H2` only where it is served).
    pub alpn: Vec<Alpn>,
    /// Accept TLS 1.2 clients too (their sessions stay in rustls: ~3.4 KB each).
    pub tls12: bool,
    /// Hand established TLS 1.3 sessions to the lean record layer (~220 B each).
    pub lean: bool,
    /// TLS 1.3 session tickets sent per handshake (stateless, ring's ticketer): a
    /// reconnecting client resumes without a certificate signature.
    pub tickets: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            alpn: vec![Alpn::Http11],
            tls12: true,
            lean: true,
            tickets: 1,
        }
    }
}

fn alpn_ids(alpn: &[Alpn]) -> Vec<Vec<u8>> {
    alpn.iter()
        .filter_map(|a| match a {
            Alpn::H2 => Some(b"h2".to_vec()),
            Alpn::Http11 => Some(b"http/1.1".to_vec()),
            Alpn::None => None,
        })
        .collect()
}

static TLS13_ONLY: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];

fn versions(tls12: bool) -> &'static [&'static rustls::SupportedProtocolVersion] {
    if tls12 {
        rustls::ALL_VERSIONS
    } else {
        &TLS13_ONLY
    }
}

/// A server config for `id` with `opts`.
pub fn server_config(id: &Identity, opts: &ServerOptions) -> Result<ServerConfig, ConfigError> {
    let mut c = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(versions(opts.tls12))?
        .with_no_client_auth()
        .with_single_cert(id.certs.clone(), id.key.clone_key())?;
    c.alpn_protocols = alpn_ids(&opts.alpn);
    c.max_early_data_size = 0;
    c.send_tls13_tickets = opts.tickets;
    if opts.tickets > 0 {
        c.ticketer = rustls::crypto::ring::Ticketer::new()?;
    }
    // Stateless tickets only: no per-session cache to grow with a million clients.
    c.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    if opts.lean {
        c.enable_secret_extraction = true;
        c.key_log = Arc::new(Capture::new());
    }
    Ok(c)
}

/// Where the server identity comes from.
#[derive(Clone, Debug)]
pub enum CertSource {
    /// PEM files, re-read on [`ReloadableConfig::reload`].
    Files { cert: PathBuf, key: PathBuf },
    /// A self-signed ECDSA P-256 certificate for these names, generated once
    /// (`--tls self-signed`; browsers will warn).
    SelfSigned(Vec<String>),
    /// An identity given directly (tests, embedders); reload keeps it.
    Given(Identity),
}

/// The server config new connections take; [`reload`](Self::reload) replaces it
/// (SIGHUP), connections already open keep the one they started with.
pub struct ReloadableConfig {
    source: CertSource,
    opts: ServerOptions,
    current: RwLock<Arc<ServerConfig>>,
    /// Bumped by every successful reload.
    generation: AtomicU64,
}

impl ReloadableConfig {
    pub fn new(source: CertSource, opts: ServerOptions) -> Result<ReloadableConfig, ConfigError> {
        let config = Self::build(&source, &opts)?;
        Ok(ReloadableConfig {
            source,
            opts,
            current: RwLock::new(Arc::new(config)),
            generation: AtomicU64::new(0),
        })
    }

    fn build(source: &CertSource, opts: &ServerOptions) -> Result<ServerConfig, ConfigError> {
        let id = match source {
            CertSource::Files { cert, key } => Identity::from_pem_files(cert, key)?,
            CertSource::SelfSigned(names) => crate::selfsigned::self_signed(names)?.identity()?,
            CertSource::Given(id) => id.clone(),
        };
        server_config(&id, opts)
    }

    /// The config for a new connection (a short read lock and an `Arc` clone).
    pub fn current(&self) -> Arc<ServerConfig> {
        self.current.read().clone()
    }

    /// Re-read the files and swap the config for new connections. On error nothing
    /// changes: the old certificate stays in use and the error says why.
    pub fn reload(&self) -> Result<(), ConfigError> {
        if !matches!(self.source, CertSource::Files { .. }) {
            return Ok(());
        }
        let fresh = Arc::new(Self::build(&self.source, &self.opts)?);
        *self.current.write() = fresh;
        self.generation.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    pub fn source(&self) -> &CertSource {
        &self.source
    }
}

/// Whom a client trusts.
#[derive(Clone, Debug)]
pub enum Roots {
    /// CA certificates from a PEM file (`--ca FILE`), e.g. a test CA.
    CaFile(PathBuf),
    /// Given CA certificates.
    Certs(Vec<CertificateDer<'static>>),
    /// The system bundle ([`SYSTEM_CA_BUNDLE`]).
    System,
    /// No verification at all (`--insecure`): anyone can impersonate the server.
    Insecure,
}

/// A client config (flood's): `alpn` offered, `lean` as for servers.
pub fn client_config(
    roots: &Roots,
    alpn: &[Alpn],
    lean: bool,
) -> Result<ClientConfig, ConfigError> {
    let p = provider();
    let builder =
        ClientConfig::builder_with_provider(p.clone()).with_protocol_versions(versions(true))?;
    let store = |certs: Vec<CertificateDer<'static>>| {
        let mut store = RootCertStore::empty();
        let (added, _) = store.add_parsable_certificates(certs);
        (added > 0).then_some(store)
    };
    let read_pem = |path: &Path| -> Result<Vec<CertificateDer<'static>>, ConfigError> {
        let pem = std::fs::read(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ConfigError::BadPem {
                what: path.display().to_string(),
                detail: e.to_string(),
            })
    };
    let no_ca = |what: String| ConfigError::NoPem {
        what,
        kind: "CA certificate",
    };
    let mut c = match roots {
        Roots::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(p)))
            .with_no_client_auth(),
        Roots::CaFile(path) => builder
            .with_root_certificates(
                store(read_pem(path)?).ok_or_else(|| no_ca(path.display().to_string()))?,
            )
            .with_no_client_auth(),
        Roots::System => builder
            .with_root_certificates(
                store(read_pem(Path::new(SYSTEM_CA_BUNDLE))?)
                    .ok_or_else(|| no_ca(SYSTEM_CA_BUNDLE.to_string()))?,
            )
            .with_no_client_auth(),
        Roots::Certs(certs) => builder
            .with_root_certificates(
                store(certs.clone()).ok_or_else(|| no_ca("given roots".into()))?,
            )
            .with_no_client_auth(),
    };
    c.alpn_protocols = alpn_ids(alpn);
    // flood opens many connections to the same server: no resumption cache per name.
    c.resumption = rustls::client::Resumption::disabled();
    if lean {
        c.enable_secret_extraction = true;
        c.key_log = Arc::new(Capture::new());
    }
    Ok(c)
}

/// A server name for SNI and verification from a URL host (a DNS name or an IP).
pub fn server_name(host: &str) -> Result<ServerName<'static>, ConfigError> {
    ServerName::try_from(host.to_string())
        .map_err(|_| ConfigError::Other(format!("{host:?} is not a valid server name")))
}

/// `--insecure`: accept any certificate, but still check the handshake signatures so
/// the session is at least bound to the key the server presented.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
