//! SIGHUP as a reload request: [`install`] once, then poll [`take`] from a loop tick
//! (the gateway's wheel tick) and call [`crate::ReloadableConfig::reload`] when it
//! says so. The handler only stores a flag (async-signal-safe); the reload itself runs
//! on the polling thread, where an error can be logged and the old config kept.

use std::sync::atomic::{AtomicBool, Ordering};

static PENDING: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sighup(_: libc::c_int) {
    PENDING.store(true, Ordering::Relaxed);
}

/// Route SIGHUP to the flag (instead of terminating the process).
pub fn install() {
    let handler = on_sighup as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only performs an atomic store.
    unsafe {
        libc::signal(libc::SIGHUP, handler);
    }
}

/// Whether a SIGHUP arrived since the last call.
pub fn take() -> bool {
    PENDING.swap(false, Ordering::Relaxed)
}
