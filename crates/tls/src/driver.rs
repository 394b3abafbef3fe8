//! Driving rustls's unbuffered API: the state machine of `process_tls_records`
//! (encode, transmit, read traffic, blocked, write traffic) run over a caller's buffer,
//! for the handshake phase and for TLS 1.2 sessions that stay in rustls. The
//! [`Endpoint`] trait lets one driver serve rustls's server and client connections.

use crate::error::TlsError;
use crate::keylog::{self, Captured};
use crate::session::Status;
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncodeTlsData, EncryptError, InsufficientSizeError,
    UnbufferedStatus,
};
use rustls::CommonState;

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

/// Drive rustls over `buf` until it needs more input (`false`) or may send application
/// data (`true`); returns the bytes it consumed.
pub(crate) fn drive<E: Endpoint>(
    conn: &mut E,
    buf: &mut [u8],
    out: &mut Vec<u8>,
    plain: &mut Vec<u8>,
    status: &mut Status,
    mut caught: impl FnMut(Captured),
) -> Result<(usize, bool), TlsError> {
    let mut used = 0;
    loop {
        // Empty the slot first: whatever is in it now was logged by a connection this
        // crate does not drive (a rustls connection elsewhere on the thread).
        let _ = keylog::take();
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
pub(crate) fn write_traffic<E: Endpoint>(
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
