//! API keys (`--api-key`, repeatable): the credential for publish, subscriptions,
//! subscribers and stats. Keys are kept as SHA-256 digests and a presented key is
//! compared with every configured one in constant time, so neither the timing of a
//! mismatch nor the number of keys tells a client how close it came.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::{bearer_token, AuthError, KeyError};

/// The configured API keys; empty means none was configured (the caller then
/// decides, e.g. loopback peers only).
#[derive(Clone, Default)]
pub struct ApiKeys {
    digests: Vec<[u8; 32]>,
}

impl std::fmt::Debug for ApiKeys {
    // Never prints key material, not even digests.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiKeys({} keys)", self.digests.len())
    }
}

impl ApiKeys {
    /// Keys as given on the command line; an empty key is refused (it would let in
    /// `Authorization: Bearer` with nothing after it on some clients).
    pub fn new<K: AsRef<[u8]>>(keys: impl IntoIterator<Item = K>) -> Result<ApiKeys, KeyError> {
        let mut digests = Vec::new();
        for k in keys {
            let k = k.as_ref();
            if k.is_empty() {
                return Err(KeyError::EmptyApiKey);
            }
            digests.push(Sha256::digest(k).into());
        }
        Ok(ApiKeys { digests })
    }

    /// True when no key is configured.
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// Checks an `Authorization` header value: `Bearer <key>`.
    pub fn check(&self, authorization: Option<&str>) -> Result<(), AuthError> {
        let key = authorization
            .and_then(bearer_token)
            .ok_or(AuthError::Missing)?;
        self.check_key(key.as_bytes())
    }

    /// Checks a bare key. Every configured key is compared (no early exit).
    pub fn check_key(&self, key: &[u8]) -> Result<(), AuthError> {
        let presented: [u8; 32] = Sha256::digest(key).into();
        let mut hit = subtle::Choice::from(0);
        for d in &self.digests {
            hit |= d.ct_eq(&presented);
        }
        if bool::from(hit) {
            Ok(())
        } else {
            Err(AuthError::BadApiKey)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_every_key() {
        let keys = ApiKeys::new(["first-key", "second-key"]).unwrap();
        assert!(!keys.is_empty());
        assert_eq!(keys.check(Some("Bearer first-key")), Ok(()));
        assert_eq!(keys.check(Some("bearer second-key")), Ok(()));
        assert_eq!(
            keys.check(Some("Bearer second-ke")),
            Err(AuthError::BadApiKey)
        );
        assert_eq!(
            keys.check(Some("Bearer second-keyy")),
            Err(AuthError::BadApiKey)
        );
        assert_eq!(
            keys.check(Some("Basic Zmlyc3Qta2V5")),
            Err(AuthError::Missing)
        );
        assert_eq!(keys.check(None), Err(AuthError::Missing));
        assert_eq!(AuthError::BadApiKey.status(), 401);
        assert!(format!("{keys:?}").contains("2 keys"));
        assert!(!format!("{keys:?}").contains("first"));
    }

    #[test]
    fn none_configured_lets_nobody_in() {
        let keys = ApiKeys::new(Vec::<String>::new()).unwrap();
        assert!(keys.is_empty());
        assert_eq!(keys.check(Some("Bearer x")), Err(AuthError::BadApiKey));
        assert!(matches!(ApiKeys::new([""]), Err(KeyError::EmptyApiKey)));
    }
}
