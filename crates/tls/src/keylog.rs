//! Catching the TLS 1.3 application traffic secrets as rustls derives them.
//!
//! The lean record layer (`record`) needs the traffic secrets themselves, not only the
//! keys rustls hands out when a session is taken over (`dangerous_into_kernel_connection`
//! gives key, IV and sequence numbers): a KeyUpdate derives the next keys from the
//! secret (RFC 8446 §7.2). rustls's only public way to see a secret is the key-log hook
//! (the one behind `SSLKEYLOGFILE`), so our configs install [`Capture`].
//!
//! Why a thread-local slot is unambiguous: rustls calls the hook synchronously inside
//! `process_tls_records`, on the caller's thread, and `session` takes the slot right
//! after every such call. Two sessions can never interleave between a log and its take.
//! When the `SSLKEYLOGFILE` variable is set, secrets are also written there (debugging
//! with Wireshark), exactly as rustls's own `KeyLogFile` does.

use std::cell::RefCell;

pub(crate) const CLIENT_SECRET: &str = "CLIENT_TRAFFIC_SECRET_0";
pub(crate) const SERVER_SECRET: &str = "SERVER_TRAFFIC_SECRET_0";

/// The longest secret: SHA-384's output.
pub(crate) const MAX_SECRET: usize = 48;

/// One traffic secret (its first `len` bytes are used).
#[derive(Clone, Copy)]
pub(crate) struct Secret {
    pub bytes: [u8; MAX_SECRET],
    pub len: u8,
}

impl Secret {
    pub fn new(s: &[u8]) -> Option<Secret> {
        let mut bytes = [0u8; MAX_SECRET];
        bytes.get_mut(..s.len())?.copy_from_slice(s);
        Some(Secret {
            bytes,
            len: s.len() as u8,
        })
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// The secrets logged since the last [`take`]: (client → server, server → client).
#[derive(Clone, Copy, Default)]
pub(crate) struct Captured {
    pub client: Option<Secret>,
    pub server: Option<Secret>,
}

thread_local! {
    static SLOT: RefCell<Captured> = RefCell::new(Captured::default());
}

/// Take what was logged on this thread since the last call.
pub(crate) fn take() -> Captured {
    SLOT.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

/// The key-log hook our configs install.
#[derive(Debug)]
pub(crate) struct Capture {
    /// Also write the NSS key log here (`SSLKEYLOGFILE`), for debugging.
    file: Option<rustls::KeyLogFile>,
}

impl Capture {
    pub fn new() -> Capture {
        Capture {
            file: std::env::var_os("SSLKEYLOGFILE").map(|_| rustls::KeyLogFile::new()),
        }
    }
}

impl rustls::KeyLog for Capture {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        if let Some(f) = &self.file {
            f.log(label, client_random, secret);
        }
        let which = match label {
            CLIENT_SECRET => 0,
            SERVER_SECRET => 1,
            _ => return,
        };
        let Some(secret) = Secret::new(secret) else {
            return; // longer than any TLS 1.3 hash: the takeover check will refuse
        };
        SLOT.with(|s| {
            let mut s = s.borrow_mut();
            if which == 0 {
                s.client = Some(secret);
            } else {
                s.server = Some(secret);
            }
        });
    }

    fn will_log(&self, label: &str) -> bool {
        self.file.is_some() || label == CLIENT_SECRET || label == SERVER_SECRET
    }
}
