//! Certificates made on the spot (rcgen): a self-signed one for `--tls self-signed`, and
//! a test CA that issues leaf certificates, for tests and benches whose clients must
//! verify the server (flood `--ca`, a browser with a test CA).
//!
//! Keys are ECDSA P-256 (ring cannot generate RSA keys; [`self_signed_with_key`] signs
//! a certificate for a key made elsewhere, e.g. `openssl genpkey -algorithm RSA`).

use crate::error::ConfigError;
use crate::identity::Identity;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair,
    KeyUsagePurpose,
};
use std::path::{Path, PathBuf};

/// Names `--tls self-signed` covers when none are given.
pub const DEFAULT_NAMES: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// A certificate and its key, PEM-encoded.
#[derive(Clone, Debug)]
pub struct Generated {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Generated {
    pub fn identity(&self) -> Result<Identity, ConfigError> {
        Identity::from_pem(
            self.cert_pem.as_bytes(),
            self.key_pem.as_bytes(),
            "generated certificate",
        )
    }

    /// Write `cert.pem` and `key.pem` into `dir` (the key readable by the owner only).
    pub fn write(&self, dir: &Path) -> Result<(PathBuf, PathBuf), ConfigError> {
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        let io = |path: &Path, e| ConfigError::Read {
            path: path.to_path_buf(),
            source: e,
        };
        std::fs::write(&cert, &self.cert_pem).map_err(|e| io(&cert, e))?;
        write_private(&key, self.key_pem.as_bytes()).map_err(|e| io(&key, e))?;
        Ok((cert, key))
    }
}

fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?
        .write_all(data)
}

fn params(names: &[String], common_name: &str) -> Result<CertificateParams, ConfigError> {
    let mut p = CertificateParams::new(names.to_vec())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    p.distinguished_name = dn;
    Ok(p)
}

/// A self-signed ECDSA P-256 certificate for `names` (DNS names or IP addresses).
pub fn self_signed(names: &[String]) -> Result<Generated, ConfigError> {
    let key = KeyPair::generate()?;
    let cert = params(names, "myriad self-signed")?.self_signed(&key)?;
    Ok(Generated {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A self-signed certificate for an existing PEM key (RSA or ECDSA).
pub fn self_signed_with_key(names: &[String], key_pem: &str) -> Result<Generated, ConfigError> {
    let key = KeyPair::from_pem(key_pem)?;
    let cert = params(names, "myriad self-signed")?.self_signed(&key)?;
    Ok(Generated {
        cert_pem: cert.pem(),
        key_pem: key_pem.to_string(),
    })
}

/// A throwaway certificate authority: trust [`TestCa::cert_pem`] in the client, serve a
/// leaf from [`TestCa::issue`].
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    pub fn new(common_name: &str) -> Result<TestCa, ConfigError> {
        let mut p = params(&[], common_name)?;
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(p, KeyPair::generate()?)?;
        Ok(TestCa { issuer })
    }

    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    pub fn cert_der(&self) -> rustls::pki_types::CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// A leaf certificate for `names`, signed by this CA (chain: leaf, CA).
    pub fn issue(&self, names: &[String]) -> Result<Generated, ConfigError> {
        let key = KeyPair::generate()?;
        let leaf = params(names, "myriad test server")?.signed_by(&key, &self.issuer)?;
        Ok(Generated {
            cert_pem: leaf.pem() + &self.issuer.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_identities_load_and_files_are_private() {
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let g = self_signed(&names).unwrap();
        assert_eq!(g.identity().unwrap().certs.len(), 1);
        let ca = TestCa::new("test ca").unwrap();
        let leaf = ca.issue(&names).unwrap();
        assert_eq!(leaf.identity().unwrap().certs.len(), 2, "leaf and CA");
        let dir = tempfile::tempdir().unwrap();
        let (_, key) = leaf.write(dir.path()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
