//! TLS between socket and core: a byte transform, nothing more. Ciphertext read into
//! the scratch buffer is decrypted in place and the plaintext goes to the core as if
//! from a plain socket; the core's outbox is sealed into records before it is written
//! or queued. The core, the wheel and the bus never know a connection is TLS.
//!
//! Where the state lives (the per-connection budget): the slab entry stays 40 B. Each
//! connection's [`ServerSession`] lies in a dense side table found through a 4 B
//! per-slot index (only on a TLS listener; h2 stream slots have no session); an idle established TLS 1.3 session
//! is `tls`'s lean record layer, 232 B with no heap of its own (crates/tls/README.md).
//! Handshake flights and alerts, and sealed output the socket does not take, go
//! through the same write queue as plain output, so order holds and `--max-queued`
//! counts ciphertext. Ciphertext differs per connection: the encode-once property
//! holds for plaintext only, so queued TLS output is a copy per connection.
//!
//! Time: the core's head timeout runs from accept, so a handshake that stalls is
//! closed like a slow head (its 408 cannot be sealed before the handshake: the
//! connection is closed without it).
//!
//! kTLS (`--ktls`, only where the start-up probe found it): right after a TLS 1.3
//! handshake, before any application data is sealed, the connection's transmit keys
//! go to the kernel ([`::tls::ktls::offload_tx`]); from then on its session passes
//! the outbox through as plaintext and the kernel seals it on write. Only when every
//! handshake byte already is in the socket: bytes still queued were sealed here and
//! would be sealed a second time. Anything that does not offload stays in user space.

use super::output::OutQueue;
use super::EventLoop;
use ::tls::{ReloadableConfig, ServerSession};
use bytes::Bytes;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Outbox pieces sealed per `encrypt` call (on the stack; more are sealed in turns).
const PIECES_PER_SEAL: usize = 64;

/// One loop's TLS: the config new connections take and every connection's session.
pub(super) struct TlsLayer {
    config: Arc<ReloadableConfig>,
    /// Sessions, dense (one per TLS connection, none for h2 stream slots, which
    /// share their parent's), found through `by_slot`. A side table rather than a
    /// slot field: the slot keeps its 40 B on plain listeners and in the size test.
    /// Inline, not boxed: boxed 240-byte sessions were allocated between the ~4 KB of
    /// rustls state every handshake frees, and that interleaving kept the freed pages
    /// resident (measured: 1,076 B per idle TLS connection at 15,000 with boxes and a
    /// heap trim; docs/decisions/tls-and-http2-in-process.md). In one array, the handshake garbage lies on
    /// pages of its own, which the trim below returns.
    sessions: Vec<ServerSession>,
    /// Slab index of `sessions[i]`, to fix `by_slot` when a removal moves the last one.
    owner: Vec<u32>,
    /// Slab index → position in `sessions` + 1 (0: none); 4 B per slot instead of an
    /// empty 240-byte entry for every h2 stream slot.
    by_slot: Vec<u32>,
    /// Records to write (handshake flight, alert, sealed output), reused per call.
    cipher: Vec<u8>,
    /// Plaintext of one read, handed to the core, reused per call.
    plain: Vec<u8>,
    /// Handshakes finished since the last [`TlsLayer::trim_after_handshakes`].
    handshakes: u32,
    /// `--ktls` on a kernel that has it: offload each session's transmit side.
    ktls: bool,
    /// An offload failed on this loop already (said once, then at debug level).
    ktls_warned: bool,
}

/// Handshakes between two heap trims (see [`TlsLayer::trim_after_handshakes`]).
const TRIM_EVERY: u32 = super::listener::TRIM_EVERY;

impl TlsLayer {
    /// `ktls`: hand sessions' transmit side to the kernel after their handshake.
    pub(super) fn new(config: Arc<ReloadableConfig>, ktls: bool) -> TlsLayer {
        TlsLayer {
            config,
            sessions: Vec::new(),
            owner: Vec::new(),
            by_slot: Vec::new(),
            cipher: Vec::new(),
            plain: Vec::new(),
            handshakes: 0,
            ktls,
            ktls_warned: false,
        }
    }

    /// A handshake passes through ~4 KB of rustls state that is freed when the session
    /// moves to the lean record layer. Once per second
    /// (the loop's give-back tick), after at least [`TRIM_EVERY`] handshakes, the free
    /// pages inside the heap go back to the kernel (glibc's `malloc_trim` releases
    /// whole free pages anywhere in the heap, not only its top). Cost: one walk of the
    /// free lists, milliseconds at 15,000 connections.
    /// True when it trimmed.
    pub(super) fn trim_after_handshakes(&mut self) -> bool {
        if self.handshakes < TRIM_EVERY {
            return false;
        }
        self.handshakes = 0;
        super::trim_heap();
        true
    }

    /// Gives back table capacity after a mass disconnect (the slab shrank too): free
    /// entries past the last open connection go.
    pub(super) fn shrink(&mut self) {
        while self.by_slot.last() == Some(&0) {
            self.by_slot.pop();
        }
        self.by_slot.shrink_to_fit();
        self.sessions.shrink_to_fit();
        self.owner.shrink_to_fit();
        self.cipher = Vec::new();
        self.plain = Vec::new();
    }

    /// Connection `index`'s session, if it has one.
    fn session(&self, index: usize) -> Option<&ServerSession> {
        let at = *self.by_slot.get(index)?;
        self.sessions.get((at as usize).checked_sub(1)?)
    }

    /// Connection `index`'s session, mutably, with the cipher buffer it writes into.
    fn session_mut(&mut self, index: usize) -> Option<(&mut ServerSession, &mut Vec<u8>)> {
        let at = *self.by_slot.get(index)?;
        let session = self.sessions.get_mut((at as usize).checked_sub(1)?)?;
        Some((session, &mut self.cipher))
    }

    /// Gives connection `index` its session (replacing any it had).
    fn insert(&mut self, index: usize, session: ServerSession) {
        self.remove(index);
        if self.by_slot.len() <= index {
            self.by_slot.resize(index + 1, 0);
        }
        self.sessions.push(session);
        self.owner.push(index as u32);
        self.by_slot[index] = self.sessions.len() as u32;
    }

    /// Drops connection `index`'s session; the last one moves into its place.
    fn remove(&mut self, index: usize) {
        let Some(at) = self.by_slot.get_mut(index) else {
            return;
        };
        let Some(pos) = (*at as usize).checked_sub(1) else {
            return;
        };
        *at = 0;
        self.sessions.swap_remove(pos);
        self.owner.swap_remove(pos);
        if let Some(&moved) = self.owner.get(pos) {
            self.by_slot[moved as usize] = pos as u32 + 1;
        }
    }
}

impl EventLoop {
    /// A new connection on a TLS listener gets its session; false if none could be
    /// made (the caller closes).
    pub(super) fn tls_open(&mut self, index: usize) -> bool {
        let Some(tls) = self.tls.as_mut() else {
            return true;
        };
        match ServerSession::new(tls.config.current()) {
            Ok(session) => {
                tls.insert(index, session);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "tls session could not be made");
                false
            }
        }
    }

    /// `--ktls`: the kernel takes connection `index`'s transmit side, just after its
    /// handshake and before any application data (h2 SETTINGS, a response) is sealed.
    /// Skipped while handshake bytes wait in the queue (already sealed here); a
    /// refusal leaves the session as it was (TLS 1.2 sessions are never offloaded).
    fn tls_offload_tx(&mut self, index: usize) {
        let Some(tls) = self.tls.as_mut().filter(|t| t.ktls) else {
            return;
        };
        let slot = &self.conns[index];
        let (Some(stream), None) = (slot.stream.as_ref(), slot.out.as_ref()) else {
            return;
        };
        let fd = stream.as_raw_fd();
        let Some((session, _)) = tls.session_mut(index) else {
            return;
        };
        match ::tls::ktls::offload_tx(fd, session) {
            Ok(()) => tracing::trace!("tls transmit side offloaded to the kernel"),
            Err(::tls::ktls::KtlsError::NotLean) => {}
            Err(e) if !tls.ktls_warned => {
                tls.ktls_warned = true;
                tracing::warn!(error = %e, "kTLS offload failed; this connection and others like it stay in user space");
            }
            Err(e) => tracing::debug!(error = %e, "kTLS offload failed"),
        }
    }

    /// Drops connection `index`'s session (the slot is being freed).
    pub(super) fn tls_forget(&mut self, index: usize) {
        if let Some(tls) = self.tls.as_mut() {
            tls.remove(index);
        }
    }

    /// Ciphertext read from connection `index`: the handshake's answer or alerts go
    /// out, plaintext goes to the core; a TLS error writes its alert and closes.
    pub(super) fn tls_read(&mut self, index: usize, input: &mut [u8]) {
        let Some(tls) = self.tls.as_mut() else {
            return;
        };
        let mut plain = std::mem::take(&mut tls.plain);
        let Some((session, cipher)) = tls.session_mut(index) else {
            tls.plain = plain;
            return;
        };
        plain.clear();
        cipher.clear();
        let result = session.handle_input(input, cipher, &mut plain);
        let alive = tls.cipher.is_empty() || self.write_cipher(index, false);
        match result {
            Err(e) => {
                tracing::debug!(error = %e, "tls connection refused");
                if alive {
                    self.close(index);
                }
            }
            Ok(status) => {
                if status.established {
                    if let Some(tls) = self.tls.as_mut() {
                        tls.handshakes = tls.handshakes.saturating_add(1);
                    }
                    if alive {
                        self.tls_offload_tx(index);
                    }
                }
                if status.established && self.h2.is_some() {
                    let h2 = self.tls.as_ref().and_then(|t| t.session(index));
                    if h2.is_some_and(|s| s.alpn() == ::tls::Alpn::H2) {
                        self.h2_start(index);
                    }
                }
                let h2 = self.h2.as_ref().is_some_and(|h| h.is_conn(index));
                if alive && !plain.is_empty() && self.conns.contains(index) {
                    if h2 {
                        self.h2_input(index, &plain);
                    } else {
                        self.with_core(index, |conn, cx| conn.handle_bytes(cx, &plain));
                    }
                }
                // close_notify: no more input comes, like a plain EOF.
                if status.peer_closed && self.conns.contains(index) {
                    self.close(index);
                }
            }
        }
        if let Some(tls) = self.tls.as_mut() {
            tls.plain = plain;
        }
    }

    /// Seals the outbox's bytes for connection `index` and writes or queues the
    /// records like `send` does plain bytes. A connection whose handshake has not
    /// finished cannot be written to (a head-timeout 408): it is closed. False if the
    /// connection was closed. An HTTP/2 connection's own core speaks no HTTP/2: what
    /// it writes (a drain notice) is dropped; its streams write through `h2_stream`.
    pub(super) fn tls_send(&mut self, index: usize, coalesce: bool) -> bool {
        if self.h2.as_ref().is_some_and(|h| h.is_conn(index)) {
            self.outbox.clear_bytes();
            return true;
        }
        let mut parts: [&[u8]; PIECES_PER_SEAL] = [&[]; PIECES_PER_SEAL];
        let tls = self.tls.as_mut().expect("tls_send on a TLS loop");
        tls.cipher.clear();
        let mut sealed = true;
        for chunk in self.outbox.pieces().chunks(PIECES_PER_SEAL) {
            for (part, piece) in parts.iter_mut().zip(chunk) {
                *part = self.outbox.slice(piece);
            }
            sealed = seal(tls, index, &parts[..chunk.len()]);
            if !sealed {
                break;
            }
        }
        self.finish_send(index, sealed, coalesce)
    }

    /// Seals `parts` for connection `index` and writes or queues the records (HTTP/2
    /// frames). False if the connection was closed.
    pub(super) fn tls_send_bytes(&mut self, index: usize, parts: &[&[u8]], coalesce: bool) -> bool {
        if !self.conns.contains(index) {
            return false;
        }
        let tls = self.tls.as_mut().expect("tls_send_bytes on a TLS loop");
        tls.cipher.clear();
        let sealed = seal(tls, index, parts);
        let outbox = std::mem::take(&mut self.outbox);
        let alive = self.finish_send(index, sealed, coalesce);
        self.outbox = outbox;
        alive
    }

    /// After sealing: close_notify for a closing connection, then the write.
    fn finish_send(&mut self, index: usize, sealed: bool, coalesce: bool) -> bool {
        let tls = self.tls.as_mut().expect("finish_send on a TLS loop");
        let closing = self.conns[index].conn.is_closing();
        let mut sealed = sealed;
        if sealed && closing {
            // The last bytes: close_notify after them, then the FIN.
            match tls.session_mut(index) {
                Some((session, cipher)) => session.close(cipher),
                _ => sealed = false,
            }
        }
        self.outbox.clear_bytes();
        if !sealed {
            self.close(index);
            return false;
        }
        self.write_cipher(index, coalesce)
    }

    /// Writes the layer's `cipher` bytes to connection `index`: behind queued output,
    /// only queued with `coalesce`, else at once with the rest queued. False if the
    /// write failed (the connection is then closed).
    fn write_cipher(&mut self, index: usize, coalesce: bool) -> bool {
        let tls = self.tls.as_mut().expect("write_cipher on a TLS loop");
        let bytes = &tls.cipher[..];
        let slot = &mut self.conns[index];
        let Some(stream) = slot.stream.as_mut() else {
            return false; // a stream's virtual slot never writes ciphertext
        };
        if let Some(queue) = slot.out.as_mut() {
            queue.push(Bytes::copy_from_slice(bytes));
            self.writer.add_queued(bytes.len());
            return true;
        }
        if coalesce {
            let mut queue = Box::<OutQueue>::default();
            queue.push(Bytes::copy_from_slice(bytes));
            slot.out = Some(queue);
            self.writer.add_queued(bytes.len());
            self.writer.mark_dirty(index);
            return true;
        }
        let mut written = 0;
        while written < bytes.len() {
            match stream.write(&bytes[written..]) {
                Ok(0) => break,
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.close(index);
                    return false;
                }
            }
        }
        self.metrics
            .bytes_out
            .fetch_add(written as u64, Ordering::Relaxed);
        if written < bytes.len() {
            let mut queue = Box::<OutQueue>::default();
            queue.push(Bytes::copy_from_slice(&bytes[written..]));
            self.writer.add_queued(queue.bytes());
            slot.out = Some(queue);
        } else if slot.conn.is_closing() {
            let _ = stream.shutdown(std::net::Shutdown::Write);
        }
        true
    }

    /// SIGHUP: the certificate files are read again; new connections get the new
    /// certificate, open ones keep theirs. Any loop may see the signal (it is taken
    /// once per process); a failed reload keeps the old certificate.
    pub(super) fn tls_tick(&mut self) {
        let Some(tls) = self.tls.as_ref() else {
            return;
        };
        if ::tls::sighup::take() {
            match tls.config.reload() {
                Ok(()) => tracing::info!(
                    generation = tls.config.generation(),
                    "tls certificate reloaded"
                ),
                Err(e) => {
                    tracing::error!(error = %e, "tls reload failed; the old certificate stays")
                }
            }
        }
    }
}

/// Seals `parts` into the layer's `cipher` with connection `index`'s session; false if
/// there is none (handshake unfinished) or sealing failed.
fn seal(tls: &mut TlsLayer, index: usize, parts: &[&[u8]]) -> bool {
    match tls.session_mut(index) {
        Some((session, cipher)) => parts
            .chunks(PIECES_PER_SEAL)
            .all(|chunk| session.encrypt(chunk, cipher).is_ok()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer() -> TlsLayer {
        let names = vec!["localhost".to_string()];
        let identity = ::tls::self_signed(&names).unwrap().identity().unwrap();
        let source = ::tls::CertSource::Given(identity);
        let config = ReloadableConfig::new(source, ::tls::ServerOptions::default()).unwrap();
        TlsLayer::new(Arc::new(config), false)
    }

    fn session(layer: &TlsLayer) -> ServerSession {
        ServerSession::new(layer.config.current()).unwrap()
    }

    /// Each session is found from its own slot and from no other: a removal moves
    /// the last session into the freed place, and its slot must follow it.
    fn consistent(layer: &TlsLayer, open: &[usize]) {
        assert_eq!(layer.sessions.len(), open.len());
        for (pos, &owner) in layer.owner.iter().enumerate() {
            assert_eq!(
                layer.by_slot[owner as usize] as usize,
                pos + 1,
                "owner {owner}"
            );
        }
        for index in 0..layer.by_slot.len() + 2 {
            assert_eq!(
                layer.session(index).is_some(),
                open.contains(&index),
                "slot {index}"
            );
        }
    }

    #[test]
    fn sessions_stay_with_their_slots_through_removals() {
        let mut layer = layer();
        let mut open = Vec::new();
        for index in [5, 2, 9, 0, 7] {
            let s = session(&layer);
            layer.insert(index, s);
            open.push(index);
            consistent(&layer, &open);
        }
        // The last, a middle one, the first, one twice, one never opened.
        for index in [7, 2, 5, 5, 42] {
            layer.remove(index);
            open.retain(|&o| o != index);
            consistent(&layer, &open);
        }
        let s = session(&layer);
        layer.insert(9, s);
        consistent(&layer, &open); // replaced, not doubled
        layer.shrink();
        consistent(&layer, &open);
        assert_eq!(
            layer.by_slot.len(),
            10,
            "the table ends at the last open slot"
        );
    }
}
