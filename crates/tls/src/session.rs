//! One TLS connection, sans-IO: ciphertext in, plaintext and ciphertext out, into
//! buffers the caller owns. Server ([`ServerSession`]) and client ([`ClientSession`],
//! for flood) share the code.
//!
//! Lifecycle and what each phase holds:
//!
//! | phase | holds | when |
//! |---|---|---|
//! | handshaking | a boxed rustls unbuffered connection (~3.4 KB with heap) | until the handshake ends: a few round trips |
//! | lean | [`RecordLayer`]: keys, IVs, sequence numbers, traffic secrets (~220 B, no heap) | TLS 1.3 once established |
//! | rustls | the boxed rustls connection, kept for the record layer | TLS 1.2 once established (no takeover for 1.2) |
//! | closed | nothing | after an error, a sent close_notify or both sides' close |
//!
//! Input: the caller reads into its own (per-loop) scratch buffer and passes it as
//! `&mut [u8]`: records are decrypted in place. Plaintext is appended to the caller's
//! `plain` buffer, records to send (handshake flights, alerts, KeyUpdate answers) to the
//! caller's `out`. Bytes of an incomplete record are the only thing a session copies
//! and keeps between reads (a small box, freed once the record completes), so an idle
//! session owns no buffer. Errors are fatal: the alert, if any, is already in `out`.
//!
//! The handshake timeout is the caller's (the gateway's head timeout applies as it does
//! to a slow request head). Early data is off, so nothing can be replayed.

use crate::driver::{drive, write_traffic, Endpoint};
use crate::error::TlsError;
use crate::keylog::Captured;
use crate::record::{RecordLayer, Suite};
use rustls::client::UnbufferedClientConnection;
use rustls::pki_types::ServerName;
use rustls::server::UnbufferedServerConnection;
use rustls::{CipherSuite, ClientConfig, ConnectionTrafficSecrets, ProtocolVersion, ServerConfig};
use std::sync::Arc;

/// A server-side session (the gateway's).
pub type ServerSession = Session<UnbufferedServerConnection>;
/// A client-side session (flood's).
pub type ClientSession = Session<UnbufferedClientConnection>;

/// The application protocol the handshake agreed on (ALPN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alpn {
    /// No ALPN (or not yet known): HTTP/1.1 by default.
    None,
    Http11,
    H2,
}

/// Which phase a session is in (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Handshaking,
    Lean(Suite),
    Rustls,
    Closed,
}

/// What one call changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// The handshake finished during this call: [`Session::alpn`] is known and
    /// [`Session::encrypt`] works from now on.
    pub established: bool,
    /// The peer sent close_notify: no more input will come (output still may go).
    pub peer_closed: bool,
}

/// The handshake phase: rustls plus the traffic secrets caught so far.
struct Handshake<E> {
    conn: E,
    captured: Captured,
    /// The config allows the takeover (secret extraction enabled).
    lean: bool,
}

// The lean variant is inline on purpose: it is what every idle connection holds, and a
// box would add an allocation (and the allocator's overhead) per connection.
#[allow(clippy::large_enum_variant)]
enum State<E> {
    Handshaking(Box<Handshake<E>>),
    Lean(RecordLayer),
    Rustls(Box<E>),
    Closed,
}

/// One TLS connection. See the module doc.
pub struct Session<E: Endpoint> {
    state: State<E>,
    /// An incomplete record carried to the next read; `None` (no heap) otherwise.
    /// Boxed so an idle session spends 8 bytes on it, not a `Vec`'s 24.
    #[allow(clippy::box_collection)]
    pending: Option<Box<Vec<u8>>>,
    alpn: Alpn,
}

impl ServerSession {
    /// A session for one accepted connection. Take `config` from
    /// [`crate::ReloadableConfig::current`] so a reload affects new connections only.
    pub fn new(config: Arc<ServerConfig>) -> Result<ServerSession, TlsError> {
        let lean = config.enable_secret_extraction;
        Ok(Session::start(
            UnbufferedServerConnection::new(config)?,
            lean,
        ))
    }
}

impl ClientSession {
    /// A client session to `name`; call [`Session::poll_output`] for the first flight.
    pub fn new(
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
    ) -> Result<ClientSession, TlsError> {
        let lean = config.enable_secret_extraction;
        Ok(Session::start(
            UnbufferedClientConnection::new(config, name)?,
            lean,
        ))
    }
}

impl<E: Endpoint> Session<E> {
    fn start(conn: E, lean: bool) -> Self {
        Session {
            state: State::Handshaking(Box::new(Handshake {
                conn,
                captured: Captured::default(),
                lean,
            })),
            pending: None,
            alpn: Alpn::None,
        }
    }

    /// Feed bytes read from the socket (decrypted in place). Plaintext is appended to
    /// `plain`, records to send to `out`. On error the session is closed and `out` holds
    /// the alert, if there is one: write it, then close the socket.
    pub fn handle_input(
        &mut self,
        input: &mut [u8],
        out: &mut Vec<u8>,
        plain: &mut Vec<u8>,
    ) -> Result<Status, TlsError> {
        let mut status = Status::default();
        let result = match self.pending.take() {
            Some(mut carried) => {
                carried.extend_from_slice(input);
                let r = self.process(&mut carried, out, plain, &mut status);
                if let Ok(used) = r {
                    carried.drain(..used);
                    if !carried.is_empty() {
                        self.pending = Some(carried);
                    }
                }
                r
            }
            None => {
                let r = self.process(input, out, plain, &mut status);
                if let Ok(used) = r {
                    if used < input.len() {
                        self.pending = Some(Box::new(input[used..].to_vec()));
                    }
                }
                r
            }
        };
        match result {
            Ok(_) => Ok(status),
            Err(e) => {
                self.state = State::Closed;
                self.pending = None;
                Err(e)
            }
        }
    }

    /// Produce output that needs no input: a client's first flight.
    pub fn poll_output(&mut self, out: &mut Vec<u8>) -> Result<Status, TlsError> {
        let mut plain = Vec::new();
        self.handle_input(&mut [], out, &mut plain)
    }

    /// Encrypt `parts` (concatenated) as application data, appended to `out` as few
    /// records as the record size allows.
    pub fn encrypt(&mut self, parts: &[&[u8]], out: &mut Vec<u8>) -> Result<(), TlsError> {
        match &mut self.state {
            State::Lean(rl) => rl.seal(parts, out),
            State::Rustls(conn) => {
                let joined: Vec<u8>;
                let data: &[u8] = match parts {
                    [one] => one,
                    _ => {
                        joined = parts.concat();
                        &joined
                    }
                };
                let mut empty = Vec::new();
                let carried = self.pending.as_deref_mut().unwrap_or(&mut empty);
                write_traffic(&mut **conn, carried, out, |wt, buf| wt.encrypt(data, buf))
            }
            State::Handshaking(_) | State::Closed => Err(TlsError::NotEstablished),
        }
    }

    /// Send close_notify (when established) and close the session.
    pub fn close(&mut self, out: &mut Vec<u8>) {
        match &mut self.state {
            State::Lean(rl) => rl.seal_alert(crate::Alert::CloseNotify, out),
            State::Rustls(conn) => {
                let mut empty = Vec::new();
                let carried = self.pending.as_deref_mut().unwrap_or(&mut empty);
                let _ = write_traffic(&mut **conn, carried, out, |wt, buf| {
                    wt.queue_close_notify(buf)
                });
            }
            State::Handshaking(_) | State::Closed => {}
        }
        self.state = State::Closed;
        self.pending = None;
    }

    pub fn phase(&self) -> Phase {
        match &self.state {
            State::Handshaking(_) => Phase::Handshaking,
            State::Lean(rl) => Phase::Lean(rl.suite()),
            State::Rustls(_) => Phase::Rustls,
            State::Closed => Phase::Closed,
        }
    }

    pub fn is_handshaking(&self) -> bool {
        matches!(self.state, State::Handshaking(_))
    }

    /// The agreed application protocol (known once established).
    pub fn alpn(&self) -> Alpn {
        self.alpn
    }

    /// The kernel's `TLS_TX` struct for the current keys (lean phase only).
    pub(crate) fn tx_crypto_info(&self) -> Option<Vec<u8>> {
        match &self.state {
            State::Lean(rl) => Some(rl.tx_crypto_info()),
            _ => None,
        }
    }

    pub(crate) fn mark_tx_offloaded(&mut self) {
        if let State::Lean(rl) = &mut self.state {
            rl.tx_kernel = true;
        }
    }

    /// Capacity of the box carrying an incomplete record to the next read (0 when
    /// none). The rustls state of the handshaking and rustls phases is not counted
    /// here; the crate README gives its size.
    pub fn carried_bytes(&self) -> usize {
        self.pending.as_ref().map_or(0, |p| p.capacity())
    }

    /// Run `buf` through the current phase; returns the bytes consumed.
    fn process(
        &mut self,
        buf: &mut [u8],
        out: &mut Vec<u8>,
        plain: &mut Vec<u8>,
        status: &mut Status,
    ) -> Result<usize, TlsError> {
        let mut used = 0;
        loop {
            match &mut self.state {
                State::Handshaking(hs) => {
                    let (n, done) =
                        drive(&mut hs.conn, &mut buf[used..], out, plain, status, |c| {
                            if c.client.is_some() {
                                hs.captured.client = c.client;
                            }
                            if c.server.is_some() {
                                hs.captured.server = c.server;
                            }
                        })?;
                    used += n;
                    if !done {
                        return Ok(used);
                    }
                    let State::Handshaking(hs) = std::mem::replace(&mut self.state, State::Closed)
                    else {
                        unreachable!("matched above")
                    };
                    self.alpn = match hs.conn.common().alpn_protocol() {
                        Some(b"h2") => Alpn::H2,
                        Some(b"http/1.1") => Alpn::Http11,
                        _ => Alpn::None,
                    };
                    self.state = take_over(*hs)?;
                    status.established = true;
                    // Records after the handshake's last one go to the new phase.
                }
                State::Lean(rl) => {
                    let o = rl.open(&mut buf[used..], plain, out)?;
                    status.peer_closed |= o.peer_closed;
                    return Ok(used + o.consumed);
                }
                State::Rustls(conn) => {
                    let (n, _) = drive(&mut **conn, &mut buf[used..], out, plain, status, |_| {})?;
                    return Ok(used + n);
                }
                State::Closed => return Ok(buf.len()),
            }
        }
    }
}

/// Hand an established session to the lean record layer (TLS 1.3 with caught secrets),
/// or keep rustls (TLS 1.2, or a config without secret extraction).
fn take_over<E: Endpoint>(hs: Handshake<E>) -> Result<State<E>, TlsError> {
    let common = hs.conn.common();
    let suite = match common.negotiated_cipher_suite().map(|s| s.suite()) {
        Some(CipherSuite::TLS13_AES_128_GCM_SHA256) => Some(Suite::Aes128Gcm),
        Some(CipherSuite::TLS13_AES_256_GCM_SHA384) => Some(Suite::Aes256Gcm),
        Some(CipherSuite::TLS13_CHACHA20_POLY1305_SHA256) => Some(Suite::Chacha20Poly1305),
        _ => None,
    };
    let tls13 = common.protocol_version() == Some(ProtocolVersion::TLSv1_3);
    let (Some(suite), true, true, Some(client), Some(server)) = (
        suite,
        tls13,
        hs.lean,
        hs.captured.client,
        hs.captured.server,
    ) else {
        return Ok(State::Rustls(Box::new(hs.conn)));
    };
    let secrets = hs.conn.into_secrets()?;
    let (tx, rx) = if E::IS_CLIENT {
        (client, server)
    } else {
        (server, client)
    };
    let rl = RecordLayer::new(suite, E::IS_CLIENT, tx, secrets.tx.0, rx, secrets.rx.0)?;
    // The caught secrets must give exactly rustls's keys; otherwise refuse to go on.
    let ((tk, ti), (rk, ri)) = rl.keys();
    if !same_keys(&secrets.tx.1, tk, ti) || !same_keys(&secrets.rx.1, rk, ri) {
        return Err(TlsError::Takeover(
            "caught traffic secrets do not match the session's keys".into(),
        ));
    }
    Ok(State::Lean(rl))
}

fn same_keys(s: &ConnectionTrafficSecrets, key: &[u8], iv: &[u8]) -> bool {
    match s {
        ConnectionTrafficSecrets::Aes128Gcm { key: k, iv: i }
        | ConnectionTrafficSecrets::Aes256Gcm { key: k, iv: i }
        | ConnectionTrafficSecrets::Chacha20Poly1305 { key: k, iv: i } => {
            k.as_ref() == key && i.as_ref() == iv
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_session_is_small() {
        // The lean phase is what an idle connection holds: keys, IVs, sequence numbers
        // and traffic secrets of both directions, an optional carry box, the ALPN.
        let size = std::mem::size_of::<ServerSession>();
        assert!(size <= 232, "ServerSession is {size} bytes");
    }
}
