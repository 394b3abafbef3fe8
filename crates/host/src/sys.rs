//! Process plumbing the server, the load tools and the benches share: the open-file
//! limit, RSS and CPU readings, `/proc/sys` values and a Ctrl-C flag. Linux only; the
//! `/proc` files are read by `observe::procfs` (not a portability layer).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Descriptors kept free in each process for stdio, epoll, files and the probe: a
/// flood process holds at most (soft NOFILE − this) connections, and the doctor plans
/// with the same margin.
pub const FD_MARGIN: u64 = 64;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Route SIGINT and SIGTERM to a flag instead of killing the process, so the load
/// tools can close their connections and print a summary. Idempotent.
pub fn catch_interrupt() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: installing a handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// True once SIGINT or SIGTERM arrived (after [`catch_interrupt`]).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The (soft, hard) RLIMIT_NOFILE.
pub fn nofile() -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    (lim.rlim_cur, lim.rlim_max)
}

/// Raise the soft NOFILE limit to the hard one; returns the soft limit now in force.
pub fn raise_nofile() -> u64 {
    let (soft, hard) = nofile();
    if soft < hard {
        let lim = libc::rlimit {
            rlim_cur: hard as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: setrlimit reads the struct we own; failure leaves the old limit.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
    nofile().0
}

/// Descriptors this process has open now (0 if /proc is unreadable).
pub fn open_fds() -> u64 {
    observe::procfs::open_fds().unwrap_or(0)
}

/// Resident set size of this process in bytes (0 if /proc is unreadable).
pub fn rss_bytes() -> u64 {
    observe::procfs::read_self().map_or(0, |s| s.rss_pages * observe::procfs::page_size())
}

/// CPU time used by this process so far: (user, system).
pub fn cpu_times() -> (Duration, Duration) {
    // SAFETY: a zeroed rusage is a valid value for getrusage to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// CPU use between two readings as percent of one core: (user, system).
pub struct CpuMeter {
    last: (Duration, Duration),
    at: std::time::Instant,
}

impl CpuMeter {
    pub fn new() -> Self {
        CpuMeter {
            last: cpu_times(),
            at: std::time::Instant::now(),
        }
    }

    /// Percent of one core used since the previous call.
    pub fn sample(&mut self) -> (f64, f64) {
        let now = cpu_times();
        let at = std::time::Instant::now();
        let wall = at.duration_since(self.at).as_secs_f64().max(1e-6);
        let u = (now.0.saturating_sub(self.last.0)).as_secs_f64() / wall * 100.0;
        let s = (now.1.saturating_sub(self.last.1)).as_secs_f64() / wall * 100.0;
        self.last = now;
        self.at = at;
        (u, s)
    }
}

impl Default for CpuMeter {
    fn default() -> Self {
        Self::new()
    }
}

/// Microseconds since the unix epoch (the `ts=` stamp clock).
pub fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Read a whole /proc/sys value as text, trimmed; None if absent.
pub fn read_proc(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_are_plausible() {
        assert!(rss_bytes() > 0);
        let (soft, hard) = nofile();
        assert!(soft <= hard);
        assert!(raise_nofile() >= soft);
        assert!(open_fds() >= 3, "stdio at least");
        assert!(unix_micros() > 1_600_000_000_000_000);
    }
}
