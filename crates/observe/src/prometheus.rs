//! Prometheus text exposition format 0.0.4 for `/metrics`.
//!
//! Counters come straight from the live atomics (so a scrape between two samples sees
//! current totals); gauges and summary quantiles come from the latest one-second
//! [`Sample`]. Standard process metric names (`process_*`) are used where they exist,
//! everything else is prefixed `myriad_`. This module formats text; it serves nothing.

use std::fmt::Write;

use crate::metrics::ProcessMetrics;
use crate::sample::Sample;

/// The `Content-Type` of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Metric kinds of the text format.
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Summary,
}

struct Out(String);

impl Out {
    /// Write HELP, TYPE and one line per `(labels, value)`.
    fn metric(&mut self, name: &str, kind: Kind, help: &str, points: &[(&str, f64)]) {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Summary => "summary",
        };
        // Writing to a String cannot fail.
        let _ = writeln!(self.0, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
        for (labels, v) in points {
            self.point(name, labels, *v);
        }
    }

    fn point(&mut self, name: &str, labels: &str, v: f64) {
        let value = if v.is_nan() {
            "NaN".to_string()
        } else if v.is_infinite() {
            if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
        } else {
            format!("{v}")
        };
        if labels.is_empty() {
            let _ = writeln!(self.0, "{name} {value}");
        } else {
            let _ = writeln!(self.0, "{name}{{{labels}}} {value}");
        }
    }

    /// A summary from a latest-interval quantile set and cumulative sum/count.
    fn summary(
        &mut self,
        name: &str,
        help: &str,
        quantiles: &[(&str, u64)],
        sum_us: u64,
        count: u64,
    ) {
        let pts: Vec<(String, f64)> = quantiles
            .iter()
            .map(|(q, us)| (format!("quantile=\"{q}\""), *us as f64 / 1e6))
            .collect();
        let pts: Vec<(&str, f64)> = pts.iter().map(|(l, v)| (l.as_str(), *v)).collect();
        self.metric(name, Kind::Summary, help, &pts);
        self.point(&format!("{name}_sum"), "", sum_us as f64 / 1e6);
        self.point(&format!("{name}_count"), "", count as f64);
    }
}

fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// True when `name` is a valid metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// The soft limit on open files.
fn max_fds() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and has no other effect.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    (rc == 0).then_some(lim.rlim_cur)
}

/// Numeric leaves of `extra` as `(snake_case_path, value)`, e.g. `{"router":{"subjects":3}}`
/// → `("router_subjects", 3.0)`.
fn numeric_leaves(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, f64)>) {
    match v {
        serde_json::Value::Number(n) => {
            if let Some(f) = n.as_f64() {
                out.push((prefix.to_string(), f));
            }
        }
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let key: String = k
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() {
                            c.to_ascii_lowercase()
                        } else {
                            '_'
                        }
                    })
                    .collect();
                let path = if prefix.is_empty() {
                    key
                } else {
                    format!("{prefix}_{key}")
                };
                numeric_leaves(&path, v, out);
            }
        }
        _ => {}
    }
}

/// Render `/metrics`.
pub fn render(s: &Sample, m: &ProcessMetrics, extra: &serde_json::Value) -> String {
    use Kind::*;
    let mut o = Out(String::with_capacity(8 * 1024));
    let total = |f: fn(&crate::LoopMetrics) -> &std::sync::atomic::AtomicU64| m.sum(f) as f64;

    o.metric(
        "process_cpu_seconds_total",
        Counter,
        "Total user and system CPU time spent in seconds.",
        &[("", s.cpu_user_seconds_total + s.cpu_sys_seconds_total)],
    );
    o.metric(
        "process_resident_memory_bytes",
        Gauge,
        "Resident memory size in bytes.",
        &[("", s.rss_bytes as f64)],
    );
    if let Ok(n) = crate::procfs::open_fds() {
        o.metric(
            "process_open_fds",
            Gauge,
            "Number of open file descriptors.",
            &[("", n as f64)],
        );
    }
    if let Some(n) = max_fds() {
        o.metric(
            "process_max_fds",
            Gauge,
            "Maximum number of open file descriptors.",
            &[("", n as f64)],
        );
    }
    o.metric(
        "myriad_cpu_seconds_total",
        Counter,
        "CPU time of this process by mode.",
        &[
            ("mode=\"user\"", s.cpu_user_seconds_total),
            ("mode=\"system\"", s.cpu_sys_seconds_total),
        ],
    );
    o.metric(
        "myriad_process_threads",
        Gauge,
        "Threads of this process.",
        &[("", s.threads as f64)],
    );
    o.metric(
        "myriad_event_loops",
        Gauge,
        "Gateway event loops in this process.",
        &[("", m.loops.len() as f64)],
    );
    o.metric(
        "myriad_connections",
        Gauge,
        "Open client connections.",
        &[("", total(|l| &l.connections))],
    );
    let per_loop: Vec<(String, f64)> = m
        .loops
        .iter()
        .enumerate()
        .map(|(i, l)| {
            (
                format!("loop=\"{i}\""),
                l.connections.load(std::sync::atomic::Ordering::Relaxed) as f64,
            )
        })
        .collect();
    let per_loop: Vec<(&str, f64)> = per_loop.iter().map(|(l, v)| (l.as_str(), *v)).collect();
    o.metric(
        "myriad_loop_connections",
        Gauge,
        "Open client connections per event loop.",
        &per_loop,
    );
    o.metric(
        "myriad_connects_total",
        Counter,
        "Accepted connections.",
        &[("", total(|l| &l.connects))],
    );
    o.metric(
        "myriad_closes_total",
        Counter,
        "Closed connections.",
        &[("", total(|l| &l.closes))],
    );
    o.metric(
        "myriad_messages_in_total",
        Counter,
        "Messages published through this process's API.",
        &[("", total(|l| &l.messages_in))],
    );
    o.metric(
        "myriad_deliveries_total",
        Counter,
        "Messages queued to client connections (one per recipient connection).",
        &[("", total(|l| &l.messages_out))],
    );
    o.metric(
        "myriad_bytes_out_total",
        Counter,
        "Bytes written to client connections.",
        &[("", total(|l| &l.bytes_out))],
    );
    o.metric(
        "myriad_queued_bytes",
        Gauge,
        "Output bytes waiting on slow sockets.",
        &[("", total(|l| &l.queued_bytes))],
    );
    o.metric(
        "myriad_slow_consumer_drops_total",
        Counter,
        "Deliveries dropped or connections cut by the slow-consumer policy.",
        &[("", total(|l| &l.slow_drops))],
    );
    o.metric(
        "myriad_auth_failures_total",
        Counter,
        "Refused credentials: tokens, API keys and WebSocket token refreshes.",
        &[("", total(|l| &l.auth_failures))],
    );
    let lag = m.lag_snapshot();
    o.summary(
        "myriad_loop_lag_seconds",
        "How late each event loop's 10 ms tick fired; quantiles over the last second.",
        &[
            ("0.5", s.lag_p50_us),
            ("0.9", s.lag_p90_us),
            ("0.99", s.lag_p99_us),
            ("1", s.lag_max_us),
        ],
        lag.sum_us,
        lag.count,
    );
    let lat = m.latency_snapshot();
    o.summary(
        "myriad_delivery_latency_seconds",
        "Publish received to written to socket, per delivery batch; quantiles over the last second.",
        &[("0.5", s.latency_p50_us), ("0.99", s.latency_p99_us), ("1", s.latency_max_us)],
        lat.sum_us,
        lat.count,
    );
    o.metric(
        "myriad_memory_per_connection_bytes",
        Gauge,
        "Memory per connection: user = (RSS - idle RSS) / connections; kernel = TCP buffer growth and slab = socket slab growth per TCP socket added since idle, machine-wide (kernel + slab = kernel memory per socket).",
        &[
            ("space=\"user\"", s.user_bytes_per_conn),
            ("space=\"kernel\"", s.kernel_bytes_per_conn),
            ("space=\"slab\"", s.slab_bytes_per_conn),
        ],
    );
    let mc = &s.machine;
    o.metric(
        "myriad_machine_cpu_cores",
        Gauge,
        "Machine CPU use in cores over the last second, by mode.",
        &[
            ("mode=\"user\"", mc.cpu_user),
            ("mode=\"system\"", mc.cpu_sys),
            ("mode=\"busy\"", mc.cpu_total),
        ],
    );
    o.metric(
        "myriad_machine_memory_bytes",
        Gauge,
        "Machine memory by kind, as free(1) counts it.",
        &[
            ("kind=\"total\"", mc.mem_total_bytes as f64),
            ("kind=\"used\"", mc.mem_used_bytes as f64),
            ("kind=\"free\"", mc.mem_free_bytes as f64),
            ("kind=\"cache\"", mc.mem_cache_bytes as f64),
            ("kind=\"available\"", mc.mem_available_bytes as f64),
        ],
    );
    o.metric(
        "myriad_machine_tcp_sockets",
        Gauge,
        "Machine TCP sockets by state (/proc/net/sockstat).",
        &[
            ("state=\"inuse\"", mc.tcp_inuse as f64),
            ("state=\"orphan\"", mc.tcp_orphan as f64),
            ("state=\"timewait\"", mc.tcp_tw as f64),
            ("state=\"alloc\"", mc.tcp_alloc as f64),
        ],
    );
    o.metric(
        "myriad_machine_tcp_memory_bytes",
        Gauge,
        "Kernel memory in TCP socket buffers, machine-wide (sockstat mem pages x page size).",
        &[("", mc.tcp_mem_bytes as f64)],
    );
    if let Some(b) = mc.sock_slab_bytes {
        o.metric(
            "myriad_machine_socket_slab_bytes",
            Gauge,
            "Kernel slab memory of socket objects (TCP, sock_inode_cache, minisocks, epoll).",
            &[("", b as f64)],
        );
    }
    let mut leaves = Vec::new();
    numeric_leaves("", extra, &mut leaves);
    for (path, v) in leaves {
        let name = format!("myriad_{path}");
        if valid_name(&name) {
            o.metric(
                &name,
                Gauge,
                &format!("Server figure {path} (from /stats extra)."),
                &[("", v)],
            );
        }
    }
    o.0
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::time::Duration;

    /// Check `text` against the 0.0.4 format; return the sample names seen.
    pub(crate) fn check_format(text: &str) -> HashSet<String> {
        let mut typed: HashSet<String> = HashSet::new();
        let mut helped: HashSet<String> = HashSet::new();
        let mut seen = HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap();
                assert!(helped.insert(name.to_string()), "duplicate HELP for {name}");
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut it = rest.split(' ');
                let name = it.next().unwrap();
                let kind = it.next().unwrap();
                assert!(
                    ["counter", "gauge", "summary", "histogram", "untyped"].contains(&kind),
                    "{line}"
                );
                assert!(helped.contains(name), "TYPE before HELP for {name}");
                assert!(typed.insert(name.to_string()), "duplicate TYPE for {name}");
            } else {
                let (name_labels, value) = line
                    .rsplit_once(' ')
                    .unwrap_or_else(|| panic!("no value: {line}"));
                let name = name_labels.split('{').next().unwrap();
                assert!(valid_name(name), "bad name {name}");
                if let Some(l) = name_labels.strip_prefix(name) {
                    if !l.is_empty() {
                        assert!(
                            l.starts_with('{') && l.ends_with('}') && l.contains("=\""),
                            "labels {l}"
                        );
                    }
                }
                assert!(
                    value == "NaN" || value.ends_with("Inf") || value.parse::<f64>().is_ok(),
                    "{line}"
                );
                let base = name.trim_end_matches("_sum").trim_end_matches("_count");
                assert!(
                    typed.contains(name) || typed.contains(base),
                    "sample {name} without TYPE"
                );
                seen.insert(name.to_string());
            }
        }
        seen
    }

    #[test]
    fn renders_valid_text_with_standard_names() {
        let m = ProcessMetrics::new(2);
        m.loops[1]
            .connections
            .store(7, std::sync::atomic::Ordering::Relaxed);
        m.loops[0]
            .messages_out
            .store(12, std::sync::atomic::Ordering::Relaxed);
        m.loops[0].record_lag(Duration::from_micros(1500));
        let s = Sample {
            rss_bytes: 1234,
            lag_p90_us: 1500,
            ..Sample::default()
        };
        let extra = serde_json::json!({"router": {"subjects": 3, "name": "x"}, "edges": 9.5});
        let text = render(&s, &m, &extra);
        let names = check_format(&text);
        for n in [
            "process_resident_memory_bytes",
            "process_cpu_seconds_total",
            "myriad_connections",
            "myriad_deliveries_total",
            "myriad_loop_lag_seconds",
            "myriad_loop_lag_seconds_sum",
            "myriad_loop_lag_seconds_count",
            "myriad_router_subjects",
            "myriad_edges",
        ] {
            assert!(names.contains(n), "{n} missing in\n{text}");
        }
        assert!(text.contains("\nmyriad_connections 7\n"));
        assert!(text.contains("\nmyriad_loop_connections{loop=\"1\"} 7\n"));
        assert!(text.contains("\nmyriad_deliveries_total 12\n"));
        assert!(text.contains("\nmyriad_loop_lag_seconds{quantile=\"0.9\"} 0.0015\n"));
        assert!(text.contains("\nmyriad_loop_lag_seconds_count 1\n"));
        assert!(text.contains("\nprocess_resident_memory_bytes 1234\n"));
    }
}
