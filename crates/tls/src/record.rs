//! The lean record layer: an established TLS 1.3 session after rustls has finished the
//! handshake, in ~220 bytes and no heap.
//!
//! Why it exists: rustls keeps ~3.4 KB per established session (1,088 B inline, plus
//! two boxed AEAD contexts of 560 B each, the handshake state machine kept for
//! post-handshake messages, the deframer's span vector and two chunk queues). A million
//! idle push connections would hold 3.4 GB for that alone. What an idle TLS 1.3 session
//! really needs is a key, an IV and a sequence number per direction, and the two
//! traffic secrets (for KeyUpdate). This is the same takeover rustls offers for kTLS
//! (`dangerous_into_kernel_connection`): the keys leave rustls, rustls is dropped, and
//! records are sealed and opened here with ring's AEAD, the same code rustls itself
//! calls. AEAD contexts (AES key schedule, GHASH table) are rebuilt on the stack for each
//! call, never stored: a few hundred nanoseconds against a write's microseconds.
//!
//! RFC 8446 rules enforced here (anything else → alert and close):
//! - §5.1/5.2: outer type must be application_data; ciphertext ≤ 2^14 + 256 and inner
//!   plaintext ≤ 2^14 (`record_overflow`); decryption failure → `bad_record_mac`; an
//!   all-zero inner plaintext → `unexpected_message`.
//! - §4.6.3 KeyUpdate: rx keys move to the next secret; if the peer requests it we answer
//!   with our own KeyUpdate under the old key and switch tx. A KeyUpdate must end its
//!   record. Handshake messages must not be fragmented across records here (only
//!   KeyUpdate and, on a client, NewSessionTicket are legal after the handshake, and
//!   both are tiny); a fragment is refused.
//! - §6.1: close_notify ends input, data after it is ignored; other alerts are fatal.
//! - §5.5: tx keys are updated before the AEAD's confidentiality limit; an rx sequence
//!   past the integrity limit closes the connection.
//!
//! Not here: TLS 1.2 (those sessions stay in rustls, see `session`), early data,
//! session tickets (a client ignores NewSessionTicket: flood does not resume).
//! The suites' AEADs, a direction's keys and KeyUpdate's next secret are in
//! `key_schedule`.

use crate::error::{Alert, TlsError};
pub use crate::key_schedule::Suite;
use crate::key_schedule::{next_secret, Keys};
use crate::keylog::{Secret, MAX_SECRET};
use ring::aead::Aad;

/// Largest plaintext in one record (RFC 8446 §5.1).
pub const MAX_PLAINTEXT: usize = 1 << 14;
/// Largest ciphertext a peer may send (RFC 8446 §5.2).
pub const MAX_CIPHERTEXT: usize = MAX_PLAINTEXT + 256;
/// Record header: type, legacy version (2), length (2).
pub const HEADER: usize = 5;
/// AEAD tag of every TLS 1.3 suite.
const TAG: usize = 16;
/// Bytes one record adds to its plaintext: header, inner content type, tag.
pub const OVERHEAD: usize = HEADER + 1 + TAG;

const APPLICATION_DATA: u8 = 23;
const HANDSHAKE: u8 = 22;
const ALERT: u8 = 21;
const KEY_UPDATE: u8 = 24;
const NEW_SESSION_TICKET: u8 = 4;

/// A key and an IV.
pub(crate) type KeyIv<'a> = (&'a [u8], &'a [u8]);

/// What the peer's records said besides application data.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    /// Bytes of input consumed (whole records); the rest is an incomplete record.
    pub consumed: usize,
    /// The peer sent close_notify: no more input will come.
    pub peer_closed: bool,
}

/// An established TLS 1.3 session's record protection. See the module doc.
pub struct RecordLayer {
    suite: Suite,
    is_client: bool,
    peer_closed: bool,
    /// The kernel seals our records (kTLS TX): plaintext passes through.
    pub(crate) tx_kernel: bool,
    tx: Keys,
    rx: Keys,
    /// Current traffic secrets, for KeyUpdate: ours and the peer's.
    tx_secret: [u8; MAX_SECRET],
    rx_secret: [u8; MAX_SECRET],
}

impl RecordLayer {
    /// Take over from rustls: `tx`/`rx` are our and the peer's traffic secrets,
    /// `tx_seq`/`rx_seq` the next sequence numbers rustls would have used.
    pub(crate) fn new(
        suite: Suite,
        is_client: bool,
        tx: Secret,
        tx_seq: u64,
        rx: Secret,
        rx_seq: u64,
    ) -> Result<RecordLayer, TlsError> {
        if tx.as_slice().len() != suite.hash_len() || rx.as_slice().len() != suite.hash_len() {
            return Err(TlsError::Takeover("traffic secret length".into()));
        }
        let mut txk = Keys::derive(suite, &tx);
        txk.seq = tx_seq;
        let mut rxk = Keys::derive(suite, &rx);
        rxk.seq = rx_seq;
        Ok(RecordLayer {
            suite,
            is_client,
            peer_closed: false,
            tx_kernel: false,
            tx: txk,
            rx: rxk,
            tx_secret: tx.bytes,
            rx_secret: rx.bytes,
        })
    }

    /// The (key, IV) pairs in use (tx, rx), for the takeover check against rustls's keys.
    pub(crate) fn keys(&self) -> (KeyIv<'_>, KeyIv<'_>) {
        let n = self.suite.key_len();
        (
            (&self.tx.key[..n], &self.tx.iv[..]),
            (&self.rx.key[..n], &self.rx.iv[..]),
        )
    }

    pub fn suite(&self) -> Suite {
        self.suite
    }

    /// The kernel's `TLS_TX` struct for our current transmit keys.
    pub(crate) fn tx_crypto_info(&self) -> Vec<u8> {
        crate::ktls::crypto_info(
            self.suite,
            &self.tx.key[..self.suite.key_len()],
            &self.tx.iv,
            self.tx.seq,
        )
    }

    /// Seal `parts` (application data, concatenated) into as few records as possible,
    /// appended to `out`. Nothing is appended for empty input.
    pub fn seal(&mut self, parts: &[&[u8]], out: &mut Vec<u8>) -> Result<(), TlsError> {
        self.seal_typed(APPLICATION_DATA, parts, out)
    }

    /// Seal an alert (a fatal one ends this session's output).
    pub fn seal_alert(&mut self, alert: Alert, out: &mut Vec<u8>) {
        if self.tx_kernel {
            return; // the kernel would frame it as data; the socket close says enough
        }
        let level = if alert == Alert::CloseNotify { 1 } else { 2 };
        // Two bytes always fit one record, and the only error (the limit) re-keys first.
        let _ = self.seal_typed(ALERT, &[&[level, alert as u8]], out);
    }

    fn seal_typed(
        &mut self,
        inner: u8,
        parts: &[&[u8]],
        out: &mut Vec<u8>,
    ) -> Result<(), TlsError> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total == 0 {
            return Ok(());
        }
        if self.tx_kernel {
            if inner != APPLICATION_DATA {
                return Err(TlsError::Takeover("non-data record with kernel TX".into()));
            }
            parts.iter().for_each(|p| out.extend_from_slice(p));
            return Ok(());
        }
        let records = total.div_ceil(MAX_PLAINTEXT);
        out.reserve(total + records * OVERHEAD);
        let mut key = self.tx.aead(self.suite);
        let (mut part, mut at) = (0usize, 0usize);
        let mut left = total;
        while left > 0 {
            if self.tx.seq >= self.suite.confidentiality_limit() - 1 {
                self.update_tx(out);
                key = self.tx.aead(self.suite);
            }
            let n = left.min(MAX_PLAINTEXT);
            let start = out.len();
            let len = ((n + 1 + TAG) as u16).to_be_bytes();
            let header = [APPLICATION_DATA, 3, 3, len[0], len[1]];
            out.extend_from_slice(&header);
            let mut want = n;
            while want > 0 {
                let p = parts[part];
                let take = (p.len() - at).min(want);
                out.extend_from_slice(&p[at..at + take]);
                at += take;
                want -= take;
                if at == p.len() {
                    part += 1;
                    at = 0;
                }
            }
            out.push(inner);
            let tag = key
                .seal_in_place_separate_tag(
                    self.tx.nonce(),
                    Aad::from(header),
                    &mut out[start + HEADER..],
                )
                .map_err(|_| TlsError::Takeover("seal failed".into()))?;
            out.extend_from_slice(tag.as_ref());
            self.tx.seq += 1;
            left -= n;
        }
        Ok(())
    }

    /// Send KeyUpdate(update_not_requested) under the current key, then switch to the
    /// next tx secret.
    fn update_tx(&mut self, out: &mut Vec<u8>) {
        let msg = [KEY_UPDATE, 0, 0, 1, 0];
        // Bypass the limit check: this record is what resets it.
        let key = self.tx.aead(self.suite);
        let start = out.len();
        let len = ((msg.len() + 1 + TAG) as u16).to_be_bytes();
        let header = [APPLICATION_DATA, 3, 3, len[0], len[1]];
        out.extend_from_slice(&header);
        out.extend_from_slice(&msg);
        out.push(HANDSHAKE);
        if let Ok(tag) = key.seal_in_place_separate_tag(
            self.tx.nonce(),
            Aad::from(header),
            &mut out[start + HEADER..],
        ) {
            out.extend_from_slice(tag.as_ref());
        }
        self.tx_secret = next_secret(self.suite, &self.tx_secret);
        self.tx = Keys::derive(self.suite, &self.secret(&self.tx_secret));
    }

    fn secret(&self, bytes: &[u8; MAX_SECRET]) -> Secret {
        Secret {
            bytes: *bytes,
            len: self.suite.hash_len() as u8,
        }
    }

    /// Open whole records at the front of `buf`, in place. Application data is appended
    /// to `plain`; records we must send in reply (a KeyUpdate) to `out`. On a protocol
    /// error the alert is appended to `out` too.
    pub fn open(
        &mut self,
        buf: &mut [u8],
        plain: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<Opened, TlsError> {
        match self.open_records(buf, plain, out) {
            Err(TlsError::Refused(alert)) => {
                self.seal_alert(alert, out);
                Err(TlsError::Refused(alert))
            }
            r => r,
        }
    }

    fn open_records(
        &mut self,
        buf: &mut [u8],
        plain: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<Opened, TlsError> {
        let refuse = |a| Err(TlsError::Refused(a));
        let mut done = Opened::default();
        while buf.len() - done.consumed >= HEADER && !self.peer_closed {
            let rec = &mut buf[done.consumed..];
            let len = usize::from(u16::from_be_bytes([rec[3], rec[4]]));
            if rec[0] != APPLICATION_DATA {
                return refuse(Alert::UnexpectedMessage);
            }
            if len > MAX_CIPHERTEXT {
                return refuse(Alert::RecordOverflow);
            }
            if rec.len() < HEADER + len {
                break; // incomplete: the caller keeps it
            }
            if self.rx.seq >= self.suite.integrity_limit() {
                return refuse(Alert::BadRecordMac);
            }
            let header = [rec[0], rec[1], rec[2], rec[3], rec[4]];
            let key = self.rx.aead(self.suite);
            let Ok(inner) = key.open_in_place(
                self.rx.nonce(),
                Aad::from(header),
                &mut rec[HEADER..HEADER + len],
            ) else {
                return refuse(Alert::BadRecordMac);
            };
            self.rx.seq += 1;
            done.consumed += HEADER + len;
            // Strip the zero padding; the last non-zero byte is the real content type.
            let Some(type_at) = inner.iter().rposition(|&b| b != 0) else {
                return refuse(Alert::UnexpectedMessage);
            };
            let content = &inner[..type_at];
            if content.len() > MAX_PLAINTEXT {
                return refuse(Alert::RecordOverflow);
            }
            match inner[type_at] {
                APPLICATION_DATA => plain.extend_from_slice(content),
                ALERT => {
                    let [level, desc] = *content else {
                        return refuse(Alert::DecodeError);
                    };
                    match desc {
                        0 => {
                            self.peer_closed = true;
                            done.peer_closed = true;
                        }
                        90 if level == 1 => {} // user_canceled: close_notify follows
                        d => return Err(TlsError::PeerAlert(d)),
                    }
                }
                HANDSHAKE => self.handshake(content, out)?,
                _ => return refuse(Alert::UnexpectedMessage),
            }
        }
        if self.peer_closed {
            // RFC 8446 §6.1: data after close_notify is ignored (and not carried).
            done.consumed = buf.len();
        }
        Ok(done)
    }

    /// Post-handshake handshake messages, each whole within `msgs` (one record).
    fn handshake(&mut self, mut msgs: &[u8], out: &mut Vec<u8>) -> Result<(), TlsError> {
        let refuse = |a| Err(TlsError::Refused(a));
        while !msgs.is_empty() {
            let [typ, a, b, c, ref rest @ ..] = *msgs else {
                return refuse(Alert::UnexpectedMessage); // a fragment
            };
            let len = u32::from_be_bytes([0, a, b, c]) as usize;
            if rest.len() < len {
                return refuse(Alert::UnexpectedMessage); // a fragment
            }
            let (body, next) = rest.split_at(len);
            match typ {
                KEY_UPDATE => {
                    let [request] = *body else {
                        return refuse(Alert::DecodeError);
                    };
                    if request > 1 {
                        return refuse(Alert::IllegalParameter);
                    }
                    if !next.is_empty() {
                        // §5.1: handshake messages must not span a key change.
                        return refuse(Alert::UnexpectedMessage);
                    }
                    self.rx_secret = next_secret(self.suite, &self.rx_secret);
                    self.rx = Keys::derive(self.suite, &self.secret(&self.rx_secret));
                    if request == 1 {
                        if self.tx_kernel {
                            return Err(TlsError::Takeover("KeyUpdate asked of kernel TX".into()));
                        }
                        self.update_tx(out);
                    }
                }
                NEW_SESSION_TICKET if self.is_client => {} // we never resume
                _ => return refuse(Alert::UnexpectedMessage),
            }
            msgs = next;
        }
        Ok(())
    }
}

impl Drop for RecordLayer {
    fn drop(&mut self) {
        // Best effort: do not leave keys in freed memory.
        for b in self
            .tx
            .key
            .iter_mut()
            .chain(self.rx.key.iter_mut())
            .chain(self.tx_secret.iter_mut())
            .chain(self.rx_secret.iter_mut())
        {
            // SAFETY: a plain write through a valid &mut u8; volatile so it is not elided.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
    }
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
