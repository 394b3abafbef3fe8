//! A server's certificate chain and key, read from PEM: what `config` builds a server
//! config from and what `selfsigned` makes.

use crate::error::ConfigError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;

/// A certificate chain and its private key.
#[derive(Debug)]
pub struct Identity {
    pub certs: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Identity {
            certs: self.certs.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl Identity {
    /// Parse a PEM certificate chain (leaf first) and a PEM private key (PKCS#8, PKCS#1
    /// or SEC1). `what` names the source in errors.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8], what: &str) -> Result<Identity, ConfigError> {
        let certs = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ConfigError::BadPem {
                what: what.to_string(),
                detail: e.to_string(),
            })?;
        if certs.is_empty() {
            return Err(ConfigError::NoPem {
                what: what.to_string(),
                kind: "certificate",
            });
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => ConfigError::NoPem {
                what: what.to_string(),
                kind: "private key",
            },
            e => ConfigError::BadPem {
                what: what.to_string(),
                detail: e.to_string(),
            },
        })?;
        Ok(Identity { certs, key })
    }

    /// Read `--tls-cert` and `--tls-key` files.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Identity, ConfigError> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| ConfigError::Read {
                path: p.to_path_buf(),
                source,
            })
        };
        Identity::from_pem(
            &read(cert)?,
            &read(key)?,
            &format!("{} / {}", cert.display(), key.display()),
        )
    }
}
