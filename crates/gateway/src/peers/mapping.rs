//! The table's memory and its lock word: an anonymous or memfd mapping, and the
//! guard that gives the lock back. Not here: what the memory holds (`peers`).

use super::TableError;
use std::sync::atomic::{AtomicU32, Ordering};

/// The lock, released on drop.
pub(super) struct Locked<'a>(pub(super) &'a AtomicU32);

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

pub(super) fn map(len: usize, flags: i32, fd: i32) -> Result<*mut u8, TableError> {
    // SAFETY: a fresh mapping of `len` bytes; checked for MAP_FAILED.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(base.cast())
}
