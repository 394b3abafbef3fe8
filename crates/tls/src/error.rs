//! What can go wrong, per operation: loading certificates and keys ([`ConfigError`]) and
//! running a session ([`TlsError`]). A session error is fatal for its connection: the
//! session has already appended the alert to send (if the protocol has one for it), the
//! caller writes what it has and closes.

use std::path::PathBuf;

/// Loading or building a TLS configuration failed. The previous configuration (if any)
/// stays in use.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("tls: cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("tls: {what}: no PEM {kind} found")]
    NoPem { what: String, kind: &'static str },
    #[error("tls: {what}: bad PEM: {detail}")]
    BadPem { what: String, detail: String },
    #[error("tls: certificate and key do not fit together or are unsupported: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("tls: cannot generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("tls: {0}")]
    Other(String),
}

/// A session failed; the connection must close after the bytes already appended to the
/// caller's output are written (they may hold an alert telling the peer why).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The handshake or a record broke the protocol (rustls's own verdict).
    #[error("tls: {0}")]
    Protocol(#[from] rustls::Error),
    /// An established TLS 1.3 record was refused by the lean record layer; the alert
    /// with this description has been appended to the output.
    #[error("tls: record refused ({0:?}), alert sent")]
    Refused(Alert),
    /// The peer sent a fatal alert.
    #[error("tls: peer sent alert {0}")]
    PeerAlert(u8),
    /// Application data was offered before the handshake finished, or after close.
    #[error("tls: session is not established (handshaking or closed)")]
    NotEstablished,
    /// Keys could not be moved out of the handshake (a bug or an unexpected rustls state).
    #[error("tls: cannot take over the established session: {0}")]
    Takeover(String),
}

/// TLS alert descriptions the lean record layer sends (RFC 8446 §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Alert {
    CloseNotify = 0,
    UnexpectedMessage = 10,
    BadRecordMac = 20,
    RecordOverflow = 22,
    DecodeError = 50,
    IllegalParameter = 47,
    InternalError = 80,
}
