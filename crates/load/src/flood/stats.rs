//! flood's counters and the records that cross process boundaries: a per-second
//! [`Sample`] and a final [`ProcSummary`] per process, both JSON lines on a child's
//! stdout, plus the latency histogram helpers that merge them exactly.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::io;

/// Highest latency recorded, in microseconds (an hour); larger values saturate.
pub const LAT_MAX_US: u64 = 3_600_000_000;
/// Histogram precision: two significant digits is 1 % error, enough for p99.
pub const LAT_SIGFIG: u8 = 2;

/// A fresh latency histogram (microseconds).
pub fn new_hist() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts (low 1, high > 2 * low, sigfig ≤ 5).
    Histogram::new_with_bounds(1, LAT_MAX_US, LAT_SIGFIG).expect("valid histogram bounds")
}

/// A histogram as (value, count) pairs: compact, exact at its precision, mergeable.
pub fn hist_pairs(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

/// Add (value, count) pairs into a histogram.
pub fn hist_add(h: &mut Histogram<u64>, pairs: &[(u64, u64)]) {
    for &(v, c) in pairs {
        h.saturating_record_n(v.clamp(1, LAT_MAX_US), c);
    }
}

/// (p50, p99, max) in microseconds; zeros when empty.
pub fn percentiles(h: &Histogram<u64>) -> (u64, u64, u64) {
    (quantile(h, 0.5), quantile(h, 0.99), h.max())
}

/// The value at quantile `q` (µs for a latency histogram); 0 when empty, where
/// hdrhistogram's own answer would be meaningless.
pub fn quantile(h: &Histogram<u64>, q: f64) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.value_at_quantile(q)
    }
}

/// Failed connection attempts by reason.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FailCounts {
    /// ECONNREFUSED: nothing listening, or the accept queue overflowed.
    pub refused: u64,
    /// No response head within --connect-timeout, or ETIMEDOUT.
    pub timeout: u64,
    /// ECONNRESET / EPIPE before the response head.
    pub reset: u64,
    /// A response status other than 200 (101 for WebSocket), or unreadable framing.
    pub bad_status: u64,
    /// The server closed before sending a response head.
    pub closed_early: u64,
    /// EADDRNOTAVAIL / EADDRINUSE: the source address ran out of ports.
    pub no_ports: u64,
    /// EMFILE / ENFILE: out of file descriptors.
    pub no_files: u64,
    /// Anything else (unreachable network, ...).
    pub other: u64,
    /// Still waiting for the response head when the run ended (stop, Ctrl-C, --max-time).
    pub cancelled: u64,
    /// TLS: the handshake failed (certificate refused, alert, server closed mid-handshake).
    #[serde(default)]
    pub handshake: u64,
}

impl FailCounts {
    pub fn total(&self) -> u64 {
        self.refused
            + self.timeout
            + self.reset
            + self.bad_status
            + self.closed_early
            + self.no_ports
            + self.no_files
            + self.other
            + self.cancelled
            + self.handshake
    }

    /// Count one failure from an OS error.
    pub fn count_io(&mut self, e: &io::Error) {
        match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => self.refused += 1,
            Some(libc::ETIMEDOUT) => self.timeout += 1,
            Some(libc::ECONNRESET) | Some(libc::EPIPE) | Some(libc::ECONNABORTED) => {
                self.reset += 1
            }
            Some(libc::EADDRNOTAVAIL) | Some(libc::EADDRINUSE) => self.no_ports += 1,
            Some(libc::EMFILE) | Some(libc::ENFILE) => self.no_files += 1,
            _ => self.other += 1,
        }
    }

    pub fn add(&mut self, o: &FailCounts) {
        self.refused += o.refused;
        self.timeout += o.timeout;
        self.reset += o.reset;
        self.bad_status += o.bad_status;
        self.closed_early += o.closed_early;
        self.no_ports += o.no_ports;
        self.no_files += o.no_files;
        self.other += o.other;
        self.cancelled += o.cancelled;
        self.handshake += o.handshake;
    }

    /// "refused 3, timeout 1" (only non-zero reasons), or "none".
    pub fn describe(&self) -> String {
        let parts: Vec<String> = [
            ("refused", self.refused),
            ("timeout", self.timeout),
            ("reset", self.reset),
            ("bad status", self.bad_status),
            ("closed early", self.closed_early),
            ("no ports", self.no_ports),
            ("no files", self.no_files),
            ("other", self.other),
            ("cancelled", self.cancelled),
            ("handshake", self.handshake),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// What `--reconnect` saw, summed over connections (all zero without it).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ResumeCounts {
    /// Connections opened again after they ended (server close, reset, EOF).
    pub reconnects: u64,
    /// Reconnect attempts that failed; each is tried again after a longer backoff.
    pub reconnect_failures: u64,
    /// Gaps the server reported (SSE `event: gap`, `"gap":true`, a position's ` gap`).
    pub gaps: u64,
    /// Messages missing by sequence number with no gap reported.
    pub lost: u64,
    /// Messages received twice (a sequence number at or below one already seen).
    pub duplicates: u64,
}

impl ResumeCounts {
    pub fn add(&mut self, o: &ResumeCounts) {
        self.reconnects += o.reconnects;
        self.reconnect_failures += o.reconnect_failures;
        self.gaps += o.gaps;
        self.lost += o.lost;
        self.duplicates += o.duplicates;
    }
}

/// One process's state at a one-second tick. Counts are cumulative except `open`
/// (current) and `hist` (stamps since the previous sample).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Sample {
    pub t: f64,
    pub attempted: u64,
    pub open: u64,
    pub failed: u64,
    pub closed: u64,
    pub messages: u64,
    pub bytes: u64,
    pub rss: u64,
    pub cpu_user: f64,
    pub cpu_sys: f64,
    pub fail: FailCounts,
    pub hist: Vec<(u64, u64)>,
}

/// One process's totals at its end.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProcSummary {
    pub attempted: u64,
    pub opened: u64,
    pub peak_open: u64,
    pub failed: u64,
    pub fail: FailCounts,
    pub closed: u64,
    pub messages: u64,
    pub bytes: u64,
    /// Seconds from start to the first connect attempt and to the last successful open.
    pub first_connect_s: f64,
    pub last_open_s: f64,
    /// RSS before connecting, and at the sample with the most open connections.
    pub rss_base: u64,
    pub rss_at_peak: u64,
    pub open_at_rss_peak: u64,
    pub elapsed_s: f64,
    pub hist: Vec<(u64, u64)>,
    #[serde(default)]
    pub resume: ResumeCounts,
}

/// What a child prints on stdout, one JSON object per line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChildLine {
    Sample(Sample),
    Final(ProcSummary),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_pairs_merge_exactly() {
        let mut a = new_hist();
        for v in [100, 200, 300, 5000] {
            a.record(v).unwrap();
        }
        let mut b = new_hist();
        hist_add(&mut b, &hist_pairs(&a));
        hist_add(&mut b, &hist_pairs(&a));
        assert_eq!(b.len(), 8);
        assert_eq!(percentiles(&b), percentiles(&a));
    }

    #[test]
    fn failures_are_classified() {
        let mut f = FailCounts::default();
        f.count_io(&io::Error::from_raw_os_error(libc::ECONNREFUSED));
        f.count_io(&io::Error::from_raw_os_error(libc::EADDRNOTAVAIL));
        f.count_io(&io::Error::from_raw_os_error(libc::ENETUNREACH));
        assert_eq!((f.refused, f.no_ports, f.other, f.total()), (1, 1, 1, 3));
        assert_eq!(f.describe(), "refused 1, no ports 1, other 1");
        let line = serde_json::to_string(&ChildLine::Sample(Sample::default())).unwrap();
        assert!(matches!(
            serde_json::from_str(&line).unwrap(),
            ChildLine::Sample(_)
        ));
    }
}
