//! `/metrics` families with one series per process of the server, labelled by `pid`:
//! a supervised server (`serve --processes`) lists the supervisor and every child, a
//! one-process server lists itself. Totals over processes are a `sum()` away in
//! PromQL; the shipped Grafana dashboard (`deploy/grafana/myriad.json`) uses these.

use crate::sample::Sample;
use std::fmt::Write;

/// `(name, help, kind, value)` of each per-process family.
type Family = (&'static str, &'static str, &'static str, fn(&Sample) -> f64);

const FAMILIES: &[Family] = &[
    (
        "myriad_process_connections",
        "Open client connections of each process.",
        "gauge",
        |s| s.connections as f64,
    ),
    (
        "myriad_process_cpu_cores",
        "CPU use of each process over the last second, in cores (user + system).",
        "gauge",
        |s| s.cpu_user + s.cpu_sys,
    ),
    (
        "myriad_process_resident_bytes",
        "Resident memory of each process.",
        "gauge",
        |s| s.rss_bytes as f64,
    ),
    (
        "myriad_process_loop_lag_p99_seconds",
        "99th percentile of each process's event-loop lag over the last second.",
        "gauge",
        |s| s.lag_p99_us as f64 / 1e6,
    ),
    (
        "myriad_process_loop_lag_max_seconds",
        "Largest event-loop lag of each process over the last second.",
        "gauge",
        |s| s.lag_max_us as f64 / 1e6,
    ),
    (
        "myriad_process_deliveries_per_second",
        "Deliveries written per second by each process.",
        "gauge",
        |s| s.messages_out_per_s,
    ),
    (
        "myriad_process_connects_per_second",
        "Connections accepted per second by each process.",
        "gauge",
        |s| s.connects_per_s,
    ),
];

/// The per-process families for `processes` (this process first).
pub fn render(processes: &[Sample]) -> String {
    let mut out = String::with_capacity(256 * FAMILIES.len() * processes.len().max(1));
    for (name, help, kind, value) in FAMILIES {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for s in processes {
            let _ = writeln!(out, "{name}{{pid=\"{}\"}} {}", s.pid, value(s));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_series_per_process_labelled_by_pid() {
        let a = Sample {
            pid: 7,
            connections: 3,
            ..Sample::default()
        };
        let b = Sample {
            pid: 9,
            connections: 4,
            ..Sample::default()
        };
        let text = render(&[a, b]);
        assert!(text.contains("myriad_process_connections{pid=\"7\"} 3\n"));
        assert!(text.contains("myriad_process_connections{pid=\"9\"} 4\n"));
        assert_eq!(text.matches("# TYPE ").count(), FAMILIES.len());
    }
}
