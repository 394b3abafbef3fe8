//! kTLS: handing the transmit side of an established TLS 1.3 session to the kernel
//! (`setsockopt(TCP_ULP, "tls")`, then `SOL_TLS`/`TLS_TX` with the keys), so writes of
//! plaintext leave the socket as records and encryption runs in the kernel (or on a NIC
//! that offloads it).
//!
//! An option, detected at run time: [`probe`] says whether this kernel has it. The
//! development machine's kernel is built without `CONFIG_TLS` (`tcp_available_ulp` lists
//! only `mptcp`, no `tls` module exists, and `TCP_ULP "tls"` fails with `ENOENT`), so
//! [`offload_tx`] is exercised here only on its refusal path; its struct layouts follow
//! `include/uapi/linux/tls.h`. What it would save: encryption CPU, and the user-space
//! transmit key (56 B of the ~220 B lean session); the kernel then keeps its own crypto
//! context per socket (kernel memory), so idle-memory figures must be read together.
//! Receive stays in user space (the lean record layer): kTLS RX would need every
//! non-data record (alerts, KeyUpdate) fished out of `recvmsg` control messages.

use crate::session::{Phase, ServerSession};
use crate::Suite;
use std::os::fd::RawFd;

const TCP_ULP: libc::c_int = 31;
const SOL_TLS: libc::c_int = 282;
const TLS_TX: libc::c_int = 1;
const TLS_1_3_VERSION: u16 = 0x0304;
const TLS_CIPHER_AES_GCM_128: u16 = 51;
const TLS_CIPHER_AES_GCM_256: u16 = 52;
const TLS_CIPHER_CHACHA20_POLY1305: u16 = 54;

/// Whether this kernel can take TLS records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Availability {
    Available,
    /// Why not, in words for a log line or `myriad doctor`.
    Unavailable(String),
}

/// Why an offload did not happen; the session is unchanged and keeps working.
#[derive(Debug, thiserror::Error)]
pub enum KtlsError {
    #[error("kTLS unavailable: {0}")]
    Unavailable(String),
    #[error("kTLS needs an established TLS 1.3 session in the lean phase")]
    NotLean,
    #[error("kTLS setsockopt failed: {0}")]
    Os(std::io::Error),
}

/// Look for kTLS: the `tls` ULP loaded, or loadable on a real loopback socket.
pub fn probe() -> Availability {
    let ulps = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp").unwrap_or_default();
    if ulps.split_whitespace().any(|u| u == "tls") {
        return Availability::Available;
    }
    // Not loaded: the kernel loads the module on first use if it has one. Try on a
    // connected loopback pair (TCP_ULP needs an established socket).
    let attempt = || -> std::io::Result<()> {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        let c = std::net::TcpStream::connect(l.local_addr()?)?;
        let _peer = l.accept()?;
        use std::os::fd::AsRawFd;
        set_ulp(c.as_raw_fd())
    };
    match attempt() {
        Ok(()) => Availability::Available,
        Err(e) => Availability::Unavailable(format!(
            "TCP_ULP \"tls\" refused ({e}); tcp_available_ulp lists {:?}: kernel built without CONFIG_TLS or the tls module is missing",
            ulps.trim()
        )),
    }
}

fn set_ulp(fd: RawFd) -> std::io::Result<()> {
    let name = b"tls";
    // SAFETY: setsockopt reads `name.len()` bytes from a live buffer.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            TCP_ULP,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The `tls12_crypto_info_*` struct for TLS_TX: version, cipher, iv, key, salt, seq.
pub(crate) fn crypto_info(suite: Suite, key: &[u8], iv: &[u8; 12], seq: u64) -> Vec<u8> {
    let mut info = Vec::with_capacity(64);
    let cipher = match suite {
        Suite::Aes128Gcm => TLS_CIPHER_AES_GCM_128,
        Suite::Aes256Gcm => TLS_CIPHER_AES_GCM_256,
        Suite::Chacha20Poly1305 => TLS_CIPHER_CHACHA20_POLY1305,
    };
    info.extend_from_slice(&TLS_1_3_VERSION.to_ne_bytes());
    info.extend_from_slice(&cipher.to_ne_bytes());
    match suite {
        // AES-GCM: iv[8] (the IV's last 8 bytes), key, salt[4] (its first 4), rec_seq[8].
        Suite::Aes128Gcm | Suite::Aes256Gcm => {
            info.extend_from_slice(&iv[4..]);
            info.extend_from_slice(key);
            info.extend_from_slice(&iv[..4]);
        }
        // ChaCha20-Poly1305: iv[12], key[32], salt[0], rec_seq[8].
        Suite::Chacha20Poly1305 => {
            info.extend_from_slice(iv);
            info.extend_from_slice(key);
        }
    }
    info.extend_from_slice(&seq.to_be_bytes());
    info
}

/// Hand `session`'s transmit side to the kernel for socket `fd`. On success,
/// [`ServerSession::encrypt`] passes plaintext through unchanged (the kernel frames
/// it); on failure nothing changed.
pub fn offload_tx(fd: RawFd, session: &mut ServerSession) -> Result<(), KtlsError> {
    if !matches!(session.phase(), Phase::Lean(_)) {
        return Err(KtlsError::NotLean);
    }
    let info = session.tx_crypto_info().ok_or(KtlsError::NotLean)?;
    set_ulp(fd).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) => KtlsError::Unavailable(format!("TCP_ULP \"tls\": {e}")),
        _ => KtlsError::Os(e),
    })?;
    // SAFETY: setsockopt reads `info.len()` bytes from a live buffer.
    let r = unsafe {
        libc::setsockopt(
            fd,
            SOL_TLS,
            TLS_TX,
            info.as_ptr().cast(),
            info.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(KtlsError::Os(std::io::Error::last_os_error()));
    }
    session.mark_tx_offloaded();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crypto_info_layouts_match_linux_tls_h() {
        // sizeof(struct tls12_crypto_info_aes_gcm_128) = 40, _256 = 56, chacha = 56.
        assert_eq!(
            crypto_info(Suite::Aes128Gcm, &[1; 16], &[2; 12], 7).len(),
            40
        );
        assert_eq!(
            crypto_info(Suite::Aes256Gcm, &[1; 32], &[2; 12], 7).len(),
            56
        );
        assert_eq!(
            crypto_info(Suite::Chacha20Poly1305, &[1; 32], &[2; 12], 7).len(),
            56
        );
    }
}
