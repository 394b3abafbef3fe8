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

use crate::error::TlsError;
use crate::keylog::{self, Captured};
use crate::record::{RecordLayer, Suite};
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::pki_types::ServerName;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncodeTlsData, EncryptError, InsufficientSizeError,
    UnbufferedStatus,
};
use rustls::{
    CipherSuite, ClientConfig, CommonState, ConnectionTrafficSecrets, ProtocolVersion, ServerConfig,
};
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

/// The rustls connection types a [`Session`] can drive. Sealed: implemented for rustls's
/// unbuffered server and client connections only.
pub trait Endpoint: private::Sealed + Sized {
    #[doc(hidden)]
    type Data;
    #[doc(hidden)]
    const IS_CLIENT: bool;
    #[doc(hidden)]
    fn process<'c, 'i>(&'c mut self, buf: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data>;
    #[doc(hidden)]
    fn common(&self) -> &CommonState;
    #[doc(hidden)]
    fn into_secrets(self) -> Result<rustls::ExtractedSecrets, rustls::Error>;
}

mod private {
    pub trait Sealed {}
    impl Sealed for rustls::server::UnbufferedServerConnection {}
    impl Sealed for rustls::client::UnbufferedClientConnection {}
}

impl Endpoint for UnbufferedServerConnection {
    type Data = ServerConnectionData;
    const IS_CLIENT: bool = false;
    fn process<'c, 'i>(&'c mut self, buf: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(buf)
    }
    fn common(&self) -> &CommonState {
        self
    }
    fn into_secrets(self) -> Result<rustls::ExtractedSecrets, rustls::Error> {
        // The kernel connection only serves key updates, which the lean layer does itself.
        self.dangerous_into_kernel_connection().map(|(s, _)| s)
    }
}

impl Endpoint for UnbufferedClientConnection {
    type Data = ClientConnectionData;
    const IS_CLIENT: bool = true;
    fn process<'c, 'i>(&'c mut self, buf: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(buf)
    }
    fn common(&self) -> &CommonState {
        self
    }
    fn into_secrets(self) -> Result<rustls::ExtractedSecrets, rustls::Error> {
        self.dangerous_into_kernel_connection().map(|(s, _)| s)
    }
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

    /// Bytes this session holds on the heap now (the rustls box while handshaking is
    /// counted by its inline size only; see the crate README for its full cost).
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

/// Drive rustls over `buf` until it needs more input (`false`) or may send application
/// data (`true`); returns the bytes it consumed.
fn drive<E: Endpoint>(
    conn: &mut E,
    buf: &mut [u8],
    out: &mut Vec<u8>,
    plain: &mut Vec<u8>,
    status: &mut Status,
    mut caught: impl FnMut(Captured),
) -> Result<(usize, bool), TlsError> {
    let mut used = 0;
    loop {
        let UnbufferedStatus { mut discard, state } = conn.process(&mut buf[used..]);
        caught(keylog::take());
        let state = match state {
            Ok(s) => s,
            Err(e) => {
                used += discard;
                flush_alert(conn, &mut buf[used..], out);
                return Err(e.into());
            }
        };
        let mut done = None;
        match state {
            ConnectionState::EncodeTlsData(mut enc) => encode(&mut enc, out),
            // Encoded records are already in `out`, in order: the caller sends them.
            ConnectionState::TransmitTlsData(t) => t.done(),
            ConnectionState::ReadTraffic(mut r) => {
                while let Some(rec) = r.next_record() {
                    let rec = rec?;
                    discard += rec.discard;
                    plain.extend_from_slice(rec.payload);
                }
            }
            ConnectionState::PeerClosed => status.peer_closed = true,
            ConnectionState::BlockedHandshake => done = Some(false),
            ConnectionState::WriteTraffic(_) => done = Some(true),
            ConnectionState::Closed => {
                status.peer_closed = true;
                done = Some(true);
            }
            // Early data is disabled in our configs; anything else is a new rustls state.
            _ => return Err(TlsError::Takeover("unexpected rustls state".into())),
        }
        used += discard;
        if let Some(d) = done {
            return Ok((used, d));
        }
    }
}

/// After a rustls error: move the alert rustls queued (if any) into `out`. Only while
/// rustls has records queued: those come out before it looks at input again, so the
/// bad input is never parsed twice. The session is closed afterwards, so the records
/// need no TransmitTlsData acknowledgement.
fn flush_alert<E: Endpoint>(conn: &mut E, buf: &mut [u8], out: &mut Vec<u8>) {
    for _ in 0..4 {
        if !conn.common().wants_write() {
            break;
        }
        let UnbufferedStatus { state, .. } = conn.process(buf);
        match state {
            Ok(ConnectionState::EncodeTlsData(mut enc)) => encode(&mut enc, out),
            _ => break,
        }
    }
    let _ = keylog::take();
}

/// Append one encoded handshake record to `out` (sized exactly: one probe, one copy).
fn encode<D>(enc: &mut EncodeTlsData<'_, D>, out: &mut Vec<u8>) {
    let start = out.len();
    let need = match enc.encode(&mut []) {
        Ok(_) | Err(EncodeError::AlreadyEncoded) => return,
        Err(EncodeError::InsufficientSize(InsufficientSizeError { required_size })) => {
            required_size
        }
    };
    out.resize(start + need, 0);
    match enc.encode(&mut out[start..]) {
        Ok(n) => out.truncate(start + n),
        Err(_) => out.truncate(start),
    }
}

/// Reach rustls's WriteTraffic state (flushing anything it queued) and run `f` with a
/// buffer sized as it asks.
fn write_traffic<E: Endpoint>(
    conn: &mut E,
    carried: &mut [u8],
    out: &mut Vec<u8>,
    mut f: impl FnMut(
        &mut rustls::unbuffered::WriteTraffic<'_, E::Data>,
        &mut [u8],
    ) -> Result<usize, EncryptError>,
) -> Result<(), TlsError> {
    for _ in 0..8 {
        let UnbufferedStatus { state, .. } = conn.process(carried);
        match state? {
            ConnectionState::WriteTraffic(mut wt) => {
                let start = out.len();
                let need = match f(&mut wt, &mut []) {
                    Ok(_) => return Ok(()),
                    Err(EncryptError::InsufficientSize(InsufficientSizeError {
                        required_size,
                    })) => required_size,
                    Err(e) => return Err(TlsError::Takeover(e.to_string())),
                };
                out.resize(start + need, 0);
                return match f(&mut wt, &mut out[start..]) {
                    Ok(n) => {
                        out.truncate(start + n);
                        Ok(())
                    }
                    Err(e) => {
                        out.truncate(start);
                        Err(TlsError::Takeover(e.to_string()))
                    }
                };
            }
            ConnectionState::EncodeTlsData(mut enc) => encode(&mut enc, out),
            ConnectionState::TransmitTlsData(t) => t.done(),
            _ => return Err(TlsError::NotEstablished),
        }
    }
    Err(TlsError::NotEstablished)
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
