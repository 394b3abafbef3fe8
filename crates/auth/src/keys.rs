//! The configured verification key(s). The key fixes the algorithm: a token is
//! checked only with the algorithm its key was configured for, whatever its header
//! says, so `alg: none` and HS/RS confusion cannot be chosen by the token.
//!
//! Reading the key file is the crate's only IO, done once at construction.

use std::path::Path;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};

/// Shortest HS256 secret accepted: RFC 7518 3.2 asks for a key at least as long as
/// the hash (256 bits).
pub const MIN_SECRET_BYTES: usize = 32;

/// Why a key could not be loaded; the message names the file and the fix.
#[derive(thiserror::Error, Debug)]
pub enum KeyError {
    #[error("cannot read JWT key file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("JWT secret too short: {0} bytes, at least {MIN_SECRET_BYTES} needed")]
    ShortSecret(usize),
    #[error("JWT key PEM is a private key: give the public key (openssl pkey -pubout)")]
    PrivateKey,
    #[error("JWT key PEM is not an RSA or P-256/P-384 EC public key")]
    BadPem,
    #[error("JWKS is not valid: {0}")]
    BadJwks(String),
    #[error("JWKS key {index}: {reason}")]
    BadJwk { index: usize, reason: &'static str },
    #[error("JWKS holds no usable signature key")]
    NoKeys,
    #[error("JWKS key id {0:?} appears twice")]
    DuplicateKid(String),
    #[error("JWKS holds several keys and one has no kid: tokens could not name their key")]
    MissingKid,
    #[error("JWT key file is neither PEM (-----BEGIN) nor JWKS JSON")]
    UnknownFormat,
    #[error("empty API key")]
    EmptyApiKey,
}

/// One usable key: tokens naming `kid` (or any token, for a lone key) are checked
/// with `alg` and `key`.
pub(crate) struct KeyEntry {
    pub(crate) kid: Option<String>,
    pub(crate) alg: Algorithm,
    pub(crate) key: DecodingKey,
}

/// The verification keys: one (secret or PEM) or a JWKS.
pub struct JwtKeys {
    pub(crate) entries: Vec<KeyEntry>,
}

impl std::fmt::Debug for JwtKeys {
    // Never prints key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list: Vec<_> = self
            .entries
            .iter()
            .map(|e| (e.kid.as_deref(), e.alg))
            .collect();
        f.debug_struct("JwtKeys").field("keys", &list).finish()
    }
}

impl JwtKeys {
    /// HS256 with a shared secret (`--jwt-secret`).
    pub fn hs256(secret: &[u8]) -> Result<JwtKeys, KeyError> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(KeyError::ShortSecret(secret.len()));
        }
        Ok(JwtKeys::single(
            Algorithm::HS256,
            DecodingKey::from_secret(secret),
        ))
    }

    /// An RSA (→ RS256) or EC P-256 (→ ES256; P-384 → ES384) public key in PEM.
    pub fn from_pem(pem: &[u8]) -> Result<JwtKeys, KeyError> {
        if contains(pem, b"PRIVATE KEY-----") {
            return Err(KeyError::PrivateKey);
        }
        if let Ok(key) = DecodingKey::from_rsa_pem(pem) {
            return Ok(JwtKeys::single(Algorithm::RS256, key));
        }
        let key = DecodingKey::from_ec_pem(pem).map_err(|_| KeyError::BadPem)?;
        // The key is the uncompressed point 04 || x || y: its length names the curve.
        let alg = match key.try_get_as_bytes().map(<[u8]>::len) {
            Ok(65) => Algorithm::ES256,
            Ok(97) => Algorithm::ES384,
            _ => return Err(KeyError::BadPem),
        };
        Ok(JwtKeys::single(alg, key))
    }

    /// A JSON Web Key Set (`{"keys":[...]}`, RFC 7517). Keys marked `"use":"enc"` are
    /// skipped; each key's algorithm is its `alg`, else RS256 for RSA and ES256 /
    /// ES384 for EC P-256 / P-384. Symmetric (`oct`) keys are refused: use a secret.
    pub fn from_jwks(json: &[u8]) -> Result<JwtKeys, KeyError> {
        let set: JwkSet =
            serde_json::from_slice(json).map_err(|e| KeyError::BadJwks(e.to_string()))?;
        let mut entries: Vec<KeyEntry> = Vec::new();
        for (index, jwk) in set.keys.iter().enumerate() {
            let bad = |reason| KeyError::BadJwk { index, reason };
            if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
                continue;
            }
            let implied = match &jwk.algorithm {
                AlgorithmParameters::RSA(_) => Algorithm::RS256,
                AlgorithmParameters::EllipticCurve(p) => match p.curve {
                    EllipticCurve::P256 => Algorithm::ES256,
                    EllipticCurve::P384 => Algorithm::ES384,
                    _ => return Err(bad("unsupported EC curve")),
                },
                AlgorithmParameters::OctetKey(_) => {
                    return Err(bad("symmetric key in a JWKS: use --jwt-secret"))
                }
                _ => return Err(bad("unsupported key type")),
            };
            let alg = match jwk.common.key_algorithm {
                None => implied,
                Some(a) => a
                    .to_string()
                    .parse::<Algorithm>()
                    .map_err(|_| bad("unsupported alg"))?,
            };
            let key = DecodingKey::from_jwk(jwk).map_err(|_| bad("invalid key parameters"))?;
            if key.family() != alg.family() {
                return Err(bad("alg does not fit the key type"));
            }
            let kid = jwk.common.key_id.clone();
            if let Some(k) = &kid {
                if entries.iter().any(|e| e.kid.as_ref() == Some(k)) {
                    return Err(KeyError::DuplicateKid(k.clone()));
                }
            }
            entries.push(KeyEntry { kid, alg, key });
        }
        if entries.is_empty() {
            return Err(KeyError::NoKeys);
        }
        if entries.len() > 1 && entries.iter().any(|e| e.kid.is_none()) {
            return Err(KeyError::MissingKid);
        }
        Ok(JwtKeys { entries })
    }

    /// `--jwt-key FILE`: a PEM public key or a JWKS, told apart by content.
    pub fn from_file(path: &Path) -> Result<JwtKeys, KeyError> {
        let bytes = std::fs::read(path).map_err(|source| KeyError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let start = bytes.iter().position(|b| !b.is_ascii_whitespace());
        match start.map(|i| bytes[i]) {
            Some(b'{') => JwtKeys::from_jwks(&bytes),
            Some(b'-') => JwtKeys::from_pem(&bytes),
            _ => Err(KeyError::UnknownFormat),
        }
    }

    fn single(alg: Algorithm, key: DecodingKey) -> JwtKeys {
        JwtKeys {
            entries: vec![KeyEntry {
                kid: None,
                alg,
                key,
            }],
        }
    }

    /// The key a token must be checked with: by `kid`, or the lone key. A lone
    /// secret/PEM key ignores `kid` (it has no name to compare with).
    pub(crate) fn select(&self, kid: Option<&str>) -> Option<&KeyEntry> {
        match (self.entries.as_slice(), kid) {
            ([only], _) if only.kid.is_none() => Some(only),
            ([only], None) => Some(only),
            (all, Some(kid)) => all.iter().find(|e| e.kid.as_deref() == Some(kid)),
            (_, None) => None,
        }
    }

    /// `(kid, alg)` of every key, for the start-up line.
    pub fn describe(&self) -> Vec<(Option<&str>, &'static str)> {
        self.entries
            .iter()
            .map(|e| (e.kid.as_deref(), alg_name(e.alg)))
            .collect()
    }
}

pub(crate) fn alg_name(a: Algorithm) -> &'static str {
    match a {
        Algorithm::HS256 => "HS256",
        Algorithm::HS384 => "HS384",
        Algorithm::HS512 => "HS512",
        Algorithm::ES256 => "ES256",
        Algorithm::ES384 => "ES384",
        Algorithm::RS256 => "RS256",
        Algorithm::RS384 => "RS384",
        Algorithm::RS512 => "RS512",
        Algorithm::PS256 => "PS256",
        Algorithm::PS384 => "PS384",
        Algorithm::PS512 => "PS512",
        _ => "other",
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
