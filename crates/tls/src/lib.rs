//! `tls`: myriad's TLS, sans-IO, on rustls — built so an idle TLS connection holds as
//! little as possible (the budget is 1 KB of user space per idle connection, all
//! included; a plain one is ~135 B).
//!
//! A [`ServerSession`] takes ciphertext from the caller's per-loop scratch buffer
//! (decrypted in place), appends plaintext to the caller's buffer, and appends records to
//! send to the caller's output buffer. It owns no buffer while idle. The handshake runs in
//! rustls's unbuffered API; once a TLS 1.3 session is established, its keys move to a
//! lean record layer (~220 B, no heap) and rustls's ~3.4 KB per connection is freed
//! (TLS 1.2 sessions stay in rustls). Time is not an input: the caller times out a
//! handshake that stalls as it times out a slow request head.
//!
//! # Layout
//!
//! | module | concept |
//! |---|---|
//! | `session` | [`Session`]: one connection's TLS, server or client; phases and buffers |
//! | `driver` | running rustls's unbuffered state machine over a caller's buffer |
//! | `record` | [`RecordLayer`]: established TLS 1.3 records, KeyUpdate, alerts (RFC 8446 §5–7) |
//! | `keylog` | catching the traffic secrets the lean layer needs for KeyUpdate |
//! | `identity` | [`Identity`]: a certificate chain and key from PEM |
//! | `config` | server and client configs: ALPN, [`ReloadableConfig`], client trust |
//! | `selfsigned` | generated certificates: `--tls self-signed`, a [`TestCa`] for tests |
//! | `ktls` | the kernel TLS hook: detected, used when present |
//! | `sighup` | SIGHUP as a reload request, polled |
//! | `error` | [`ConfigError`], [`TlsError`], [`Alert`] |
//!
//! # Glossary
//!
//! *Session*: one connection's TLS state. *Record*: TLS's unit on the wire (≤ 16 KB of
//! plaintext). *Lean phase*: an established TLS 1.3 session held by [`RecordLayer`]
//! instead of rustls. *Takeover*: the move from rustls to the lean phase.
//!
//! # Client-visible failures
//!
//! | condition | what the peer gets |
//! |---|---|
//! | garbage instead of a ClientHello, bad handshake | rustls's alert (e.g. `decode_error`, `handshake_failure`), close |
//! | record over 2^14 + 256 bytes | established TLS 1.3: `record_overflow`; handshake or TLS 1.2 (rustls): `decode_error`; close |
//! | record that fails to decrypt | `bad_record_mac` alert, close |
//! | TLS 1.2 renegotiation attempt | rustls answers `no_renegotiation` (warning) and carries on |
//! | TLS 1.3 handshake message other than KeyUpdate after the handshake | `unexpected_message`, close |
//! | handshake not finished within the caller's head timeout | the caller closes |

mod config;
mod driver;
mod error;
mod identity;
mod key_schedule;
mod keylog;
pub mod ktls;
mod record;
mod selfsigned;
mod session;
pub mod sighup;

pub use config::{
    client_config, provider, server_config, server_name, CertSource, ReloadableConfig, Roots,
    ServerOptions, SYSTEM_CA_BUNDLE,
};
pub use driver::Endpoint;
pub use error::{Alert, ConfigError, TlsError};
pub use identity::Identity;
pub use record::{RecordLayer, Suite, MAX_PLAINTEXT, OVERHEAD};
pub use selfsigned::{self_signed, self_signed_with_key, Generated, TestCa, DEFAULT_NAMES};
pub use session::{Alpn, ClientSession, Phase, ServerSession, Session, Status};

/// rustls, as this crate uses it (configs, server names), so callers need no version
/// of their own.
pub use rustls;
