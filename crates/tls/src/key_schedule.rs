//! The TLS 1.3 key schedule the lean record layer needs once rustls has handed over
//! the traffic secrets: each suite's AEAD and hash, a direction's key, IV and
//! sequence number, and the next secret for KeyUpdate (RFC 8446 §7). The AEAD and
//! HKDF are ring's, the code rustls itself calls.

use crate::keylog::{Secret, MAX_SECRET};
use ring::aead::{self, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf;

/// The AEAD of a TLS 1.3 cipher suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suite {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

impl Suite {
    pub(crate) fn aead(self) -> &'static aead::Algorithm {
        match self {
            Suite::Aes128Gcm => &aead::AES_128_GCM,
            Suite::Aes256Gcm => &aead::AES_256_GCM,
            Suite::Chacha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }

    pub(crate) fn hkdf(self) -> hkdf::Algorithm {
        match self {
            Suite::Aes256Gcm => hkdf::HKDF_SHA384,
            _ => hkdf::HKDF_SHA256,
        }
    }

    pub(crate) fn hash_len(self) -> usize {
        match self {
            Suite::Aes256Gcm => 48,
            _ => 32,
        }
    }

    pub(crate) fn key_len(self) -> usize {
        self.aead().key_len()
    }

    /// Records one key may seal (rustls's figures for these AEADs, RFC 8446 §5.5).
    pub(crate) fn confidentiality_limit(self) -> u64 {
        match self {
            Suite::Chacha20Poly1305 => u64::MAX,
            _ => 1 << 24,
        }
    }

    /// Forged records one key may be asked to open before the connection must end.
    pub(crate) fn integrity_limit(self) -> u64 {
        match self {
            Suite::Chacha20Poly1305 => 1 << 36,
            _ => 1 << 52,
        }
    }
}

/// One direction: key, IV and the next record's sequence number.
#[derive(Clone)]
pub(crate) struct Keys {
    pub(crate) key: [u8; 32],
    pub(crate) iv: [u8; 12],
    pub(crate) seq: u64,
}

impl Keys {
    /// Keys derived from a traffic secret (RFC 8446 §7.3), sequence 0.
    pub(crate) fn derive(suite: Suite, secret: &Secret) -> Keys {
        let mut k = Keys {
            key: [0; 32],
            iv: [0; 12],
            seq: 0,
        };
        expand_label(suite, secret, b"key", &mut k.key[..suite.key_len()]);
        expand_label(suite, secret, b"iv", &mut k.iv);
        k
    }

    pub(crate) fn aead(&self, suite: Suite) -> LessSafeKey {
        // The key length matches the suite by construction (`derive` wrote that many).
        LessSafeKey::new(
            UnboundKey::new(suite.aead(), &self.key[..suite.key_len()]).expect("key length"),
        )
    }

    /// Per-record nonce: the IV XOR the sequence number, left-padded (RFC 8446 §5.3).
    pub(crate) fn nonce(&self) -> Nonce {
        let mut n = self.iv;
        for (b, s) in n[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *b ^= s;
        }
        Nonce::assume_unique_for_key(n)
    }
}

/// `HKDF-Expand-Label(secret, label, "", out.len())` (RFC 8446 §7.1).
pub(crate) fn expand_label(suite: Suite, secret: &Secret, label: &[u8], out: &mut [u8]) {
    struct Len(usize);
    impl hkdf::KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let len = (out.len() as u16).to_be_bytes();
    let label_len = [(6 + label.len()) as u8];
    let info: [&[u8]; 5] = [&len, &label_len, b"tls13 ", label, &[0]];
    let prk = hkdf::Prk::new_less_safe(suite.hkdf(), secret.as_slice());
    // Output lengths here (≤ 48) are far below HKDF's 255 × hash length limit.
    prk.expand(&info, Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .expect("HKDF output length");
}

/// `application_traffic_secret_N+1` (RFC 8446 §7.2).
pub(crate) fn next_secret(suite: Suite, current: &[u8; MAX_SECRET]) -> [u8; MAX_SECRET] {
    let cur = Secret {
        bytes: *current,
        len: suite.hash_len() as u8,
    };
    let mut next = [0u8; MAX_SECRET];
    expand_label(suite, &cur, b"traffic upd", &mut next[..suite.hash_len()]);
    next
}
