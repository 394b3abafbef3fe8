//! The state behind `myriad top`: fetch `/stats` from each admin address, sort the
//! processes and sum them into a totals line. No text here (see `table`) and no
//! terminal (see `view`).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use observe::sample::{MachineSample, Sample};

/// How long one admin address may take to answer before its row shows an error.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest `/stats` answer accepted (a few processes' samples are a few KB).
const MAX_STATS_BYTES: u64 = 8 << 20;

/// What to sort the process rows by (largest first, except pid).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    /// Open connections.
    #[default]
    Conns,
    /// CPU (user + sys).
    Cpu,
    /// Resident memory.
    Rss,
    /// Deliveries per second.
    Out,
    /// Loop lag p90.
    Lag,
    /// Process id, ascending.
    Pid,
}

impl SortKey {
    /// The key's name as shown in the title.
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Conns => "connections",
            SortKey::Cpu => "cpu",
            SortKey::Rss => "rss",
            SortKey::Out => "deliveries/s",
            SortKey::Lag => "lag",
            SortKey::Pid => "pid",
        }
    }
}

/// One process as seen through one admin address.
#[derive(Clone, Debug)]
pub struct ProcessRow {
    pub addr: String,
    pub sample: Sample,
}

/// Everything one refresh learned.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub rows: Vec<ProcessRow>,
    /// Addresses that did not answer, with the reason.
    pub errors: Vec<(String, String)>,
    /// Machine figures from the first process that answered.
    pub machine: Option<MachineSample>,
}

/// `host:port` from `host:port`, `http://host:port` or `http://host:port/...`.
fn host_port(addr: &str) -> &str {
    let a = addr.strip_prefix("http://").unwrap_or(addr);
    a.split('/').next().unwrap_or(a)
}

/// GET `/stats` from one admin address (HTTP/1.0, so the server closes the connection).
pub fn fetch_stats(addr: &str) -> Result<serde_json::Value, String> {
    let hp = host_port(addr);
    let sock = hp
        .to_socket_addrs()
        .map_err(|e| format!("bad address {hp}: {e}"))?
        .next()
        .ok_or_else(|| format!("{hp} resolves to nothing"))?;
    let mut s = TcpStream::connect_timeout(&sock, FETCH_TIMEOUT).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(FETCH_TIMEOUT))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(FETCH_TIMEOUT))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET /stats HTTP/1.0\r\nHost: {hp}\r\nAccept: application/json\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.take(MAX_STATS_BYTES)
        .read_to_end(&mut raw)
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no HTTP answer")?;
    let status = head.split(' ').nth(1).unwrap_or("?");
    if status != "200" {
        return Err(format!("HTTP {status} from /stats"));
    }
    serde_json::from_str(body).map_err(|e| format!("bad /stats JSON: {e}"))
}

/// Fetch every address; a failing one becomes an error line, not a failure.
pub fn collect(addrs: &[String]) -> Snapshot {
    let mut snap = Snapshot::default();
    for addr in addrs {
        let stats = fetch_stats(addr).and_then(|v| {
            let procs = v
                .get("processes")
                .cloned()
                .or_else(|| v.get("sample").map(|s| serde_json::json!([s])));
            serde_json::from_value::<Vec<Sample>>(procs.unwrap_or_default())
                .map_err(|e| format!("bad samples: {e}"))
        });
        match stats {
            Ok(samples) => {
                for sample in samples {
                    if snap.machine.is_none() {
                        snap.machine = Some(sample.machine.clone());
                    }
                    snap.rows.push(ProcessRow {
                        addr: host_port(addr).to_string(),
                        sample,
                    });
                }
            }
            Err(e) => snap.errors.push((addr.clone(), e)),
        }
    }
    snap
}

/// Sort rows in place.
pub fn sort_rows(rows: &mut [ProcessRow], key: SortKey) {
    let k = |r: &ProcessRow| -> f64 {
        let s = &r.sample;
        match key {
            SortKey::Conns => s.connections as f64,
            SortKey::Cpu => s.cpu_user + s.cpu_sys,
            SortKey::Rss => s.rss_bytes as f64,
            SortKey::Out => s.messages_out_per_s,
            SortKey::Lag => s.lag_p90_us as f64,
            SortKey::Pid => -(s.pid as f64),
        }
    };
    rows.sort_by(|a, b| k(b).total_cmp(&k(a)).then(a.sample.pid.cmp(&b.sample.pid)));
}

/// The sum (or maximum, for lag) of several processes, as a pseudo-sample.
pub fn totals(rows: &[ProcessRow]) -> Sample {
    let mut t = Sample::default();
    let mut idle = 0u64;
    let mut lag_weighted = 0.0;
    for r in rows {
        let s = &r.sample;
        t.connections += s.connections;
        t.connects_per_s += s.connects_per_s;
        t.closes_per_s += s.closes_per_s;
        t.cpu_user += s.cpu_user;
        t.cpu_sys += s.cpu_sys;
        t.rss_bytes += s.rss_bytes;
        idle += s.rss_idle_bytes;
        t.messages_in_per_s += s.messages_in_per_s;
        t.messages_out_per_s += s.messages_out_per_s;
        t.bytes_out_per_s += s.bytes_out_per_s;
        t.queued_bytes += s.queued_bytes;
        t.slow_drops += s.slow_drops;
        t.lag_ticks += s.lag_ticks;
        lag_weighted += s.lag_avg_us * s.lag_ticks as f64;
        t.lag_p90_us = t.lag_p90_us.max(s.lag_p90_us);
        t.lag_max_us = t.lag_max_us.max(s.lag_max_us);
        t.latency_p50_us = t.latency_p50_us.max(s.latency_p50_us);
        t.latency_p99_us = t.latency_p99_us.max(s.latency_p99_us);
        t.latency_batches += s.latency_batches;
    }
    t.lag_avg_us = if t.lag_ticks > 0 {
        lag_weighted / t.lag_ticks as f64
    } else {
        0.0
    };
    t.rss_idle_bytes = idle;
    t.user_bytes_per_conn = if t.connections > 0 {
        t.rss_bytes.saturating_sub(idle) as f64 / t.connections as f64
    } else {
        0.0
    };
    t
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn row(pid: u32, conns: u64, cpu: f64, lag_p90: u64) -> ProcessRow {
        let sample = Sample {
            pid,
            connections: conns,
            cpu_user: cpu,
            rss_bytes: 1000 + conns * 100,
            rss_idle_bytes: 1000,
            lag_p90_us: lag_p90,
            lag_avg_us: 100.0,
            lag_ticks: 100,
            ..Sample::default()
        };
        ProcessRow {
            addr: format!("127.0.0.1:{pid}"),
            sample,
        }
    }

    #[test]
    fn sorts_and_totals() {
        let mut rows = vec![
            row(1, 10, 0.5, 900),
            row(2, 30, 0.1, 100),
            row(3, 20, 0.9, 400),
        ];
        sort_rows(&mut rows, SortKey::Conns);
        assert_eq!(
            rows.iter().map(|r| r.sample.pid).collect::<Vec<_>>(),
            [2, 3, 1]
        );
        sort_rows(&mut rows, SortKey::Cpu);
        assert_eq!(
            rows.iter().map(|r| r.sample.pid).collect::<Vec<_>>(),
            [3, 1, 2]
        );
        sort_rows(&mut rows, SortKey::Pid);
        assert_eq!(
            rows.iter().map(|r| r.sample.pid).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        let t = totals(&rows);
        assert_eq!(t.connections, 60);
        assert!((t.cpu_user - 1.5).abs() < 1e-9);
        assert_eq!(t.lag_p90_us, 900);
        assert!((t.user_bytes_per_conn - 100.0).abs() < 1e-9);
        assert!((t.lag_avg_us - 100.0).abs() < 1e-9);
    }

    #[test]
    fn addresses_in_any_form() {
        assert_eq!(host_port("http://127.0.0.1:9/stats"), "127.0.0.1:9");
        assert_eq!(host_port("127.0.0.1:9"), "127.0.0.1:9");
    }
}
