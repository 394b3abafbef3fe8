//! The per-second CSV log: the server's columns ([`SERVER_COLUMNS`]), a writer, and a
//! small reader that maps any header to columns so `myriad plot` can read both the
//! server's file and `myriad flood --csv`'s.
//!
//! Columns of `serve --csv` (one row per second; rates per second, CPU in cores where
//! 1.0 is one core busy, times in microseconds, memory in bytes):
//!
//! | column | meaning |
//! |---|---|
//! | time_s | seconds since the monitor started |
//! | unix_time | Unix time of the row |
//! | pid | process id |
//! | cpu_user, cpu_sys | process CPU, cores |
//! | rss_bytes | resident memory |
//! | user_bytes_per_conn | (RSS − RSS when idle) / connections |
//! | kernel_bytes_per_conn | TCP buffer growth (sockstat) / TCP sockets added since idle, machine-wide |
//! | slab_bytes_per_conn | socket slab growth / TCP sockets added since idle, machine-wide (the two add up to `observe::kernel`'s kernel memory per socket) |
//! | connections | open client connections |
//! | connects_per_s, closes_per_s | accepted / closed connections per second |
//! | messages_in_per_s | messages published through this process's API |
//! | messages_out_per_s | deliveries per second |
//! | bytes_out_per_s | bytes written to clients per second |
//! | lag_avg_us, lag_p90_us, lag_max_us | event-loop lag of the 10 ms tick |
//! | queued_bytes | output waiting on slow sockets |
//! | slow_drops | slow-consumer drops since start |
//! | lat_p50_us, lat_p99_us, lat_max_us | publish → socket write, per delivery batch |
//! | m_cpu_user, m_cpu_sys, m_cpu_total | machine CPU, cores |
//! | mem_used, mem_free, mem_cache | machine memory as free(1) shows it |
//! | tcp_inuse, tcp_orphan, tcp_tw, tcp_alloc | machine TCP sockets |
//! | tcp_mem_bytes | kernel TCP buffer memory, machine-wide |
//! | sock_slab_bytes | socket slab memory (empty when unreadable) |

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::path::Path;

use crate::sample::Sample;

/// The header of `serve --csv`, in order.
pub const SERVER_COLUMNS: &[&str] = &[
    "time_s",
    "unix_time",
    "pid",
    "cpu_user",
    "cpu_sys",
    "rss_bytes",
    "user_bytes_per_conn",
    "kernel_bytes_per_conn",
    "slab_bytes_per_conn",
    "connections",
    "connects_per_s",
    "closes_per_s",
    "messages_in_per_s",
    "messages_out_per_s",
    "bytes_out_per_s",
    "lag_avg_us",
    "lag_p90_us",
    "lag_max_us",
    "queued_bytes",
    "slow_drops",
    "lat_p50_us",
    "lat_p99_us",
    "lat_max_us",
    "m_cpu_user",
    "m_cpu_sys",
    "m_cpu_total",
    "mem_used",
    "mem_free",
    "mem_cache",
    "tcp_inuse",
    "tcp_orphan",
    "tcp_tw",
    "tcp_alloc",
    "tcp_mem_bytes",
    "sock_slab_bytes",
];

/// The header of `myriad flood --csv` (written by the load crate), for recognising it.
/// Its `messages` and `bytes` are per second, `open` is a gauge, and its `cpu_user` /
/// `cpu_sys` are percent of one core (the server's are cores).
pub const FLOOD_COLUMNS: &[&str] = &[
    "time_s",
    "open",
    "failed",
    "closed",
    "messages",
    "bytes",
    "lat_p50_us",
    "lat_p99_us",
    "lat_max_us",
    "rss_bytes",
    "cpu_user",
    "cpu_sys",
];

/// The header line of the server CSV (with newline).
pub fn header() -> String {
    let mut h = SERVER_COLUMNS.join(",");
    h.push('\n');
    h
}

/// One row of the server CSV (with newline), in [`SERVER_COLUMNS`] order.
pub fn row(s: &Sample) -> String {
    let m = &s.machine;
    let f = |v: f64| format!("{v:.3}");
    let i = |v: u64| v.to_string();
    let cols = [
        f(s.uptime_s),
        f(s.time),
        s.pid.to_string(),
        f(s.cpu_user),
        f(s.cpu_sys),
        i(s.rss_bytes),
        f(s.user_bytes_per_conn),
        f(s.kernel_bytes_per_conn),
        f(s.slab_bytes_per_conn),
        i(s.connections),
        f(s.connects_per_s),
        f(s.closes_per_s),
        f(s.messages_in_per_s),
        f(s.messages_out_per_s),
        f(s.bytes_out_per_s),
        f(s.lag_avg_us),
        i(s.lag_p90_us),
        i(s.lag_max_us),
        i(s.queued_bytes),
        i(s.slow_drops),
        i(s.latency_p50_us),
        i(s.latency_p99_us),
        i(s.latency_max_us),
        f(m.cpu_user),
        f(m.cpu_sys),
        f(m.cpu_total),
        i(m.mem_used_bytes),
        i(m.mem_free_bytes),
        i(m.mem_cache_bytes),
        i(m.tcp_inuse),
        i(m.tcp_orphan),
        i(m.tcp_tw),
        i(m.tcp_alloc),
        i(m.tcp_mem_bytes),
        m.sock_slab_bytes.map(i).unwrap_or_default(),
    ];
    debug_assert_eq!(cols.len(), SERVER_COLUMNS.len());
    let mut line = cols.join(",");
    line.push('\n');
    line
}

/// Appends rows to a CSV file, flushing each so a crash loses at most one second.
pub struct CsvWriter {
    out: io::BufWriter<std::fs::File>,
}

impl CsvWriter {
    /// Create (truncate) `path` and write the header.
    pub fn create(path: &Path) -> io::Result<CsvWriter> {
        let mut out = io::BufWriter::new(std::fs::File::create(path)?);
        out.write_all(header().as_bytes())?;
        out.flush()?;
        Ok(CsvWriter { out })
    }

    /// Write one sample.
    pub fn write(&mut self, s: &Sample) -> io::Result<()> {
        self.out.write_all(row(s).as_bytes())?;
        self.out.flush()
    }
}

/// Which program wrote a CSV file, told by its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CsvKind {
    /// `myriad serve --csv`.
    Server,
    /// `myriad flood --csv`.
    Flood,
    /// Anything else with a `time_s` column.
    Other,
}

/// A CSV file read into columns of numbers (empty or non-numeric cells are NaN).
#[derive(Clone, Debug)]
pub struct Table {
    pub kind: CsvKind,
    pub columns: Vec<String>,
    index: HashMap<String, usize>,
    rows: Vec<Vec<f64>>,
}

impl Table {
    /// Parse CSV text with a header row.
    pub fn parse(reader: impl BufRead) -> io::Result<Table> {
        let mut lines = reader.lines();
        let head = lines
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "empty CSV file"))??;
        let columns: Vec<String> = head
            .trim()
            .split(',')
            .map(|c| c.trim().to_string())
            .collect();
        let index: HashMap<String, usize> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.clone(), i))
            .collect();
        if !index.contains_key("time_s") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("no time_s column in header `{head}`"),
            ));
        }
        let has = |c: &str| index.contains_key(c);
        let kind = if has("lag_p90_us") && has("connections") {
            CsvKind::Server
        } else if has("open") && has("messages") {
            CsvKind::Flood
        } else {
            CsvKind::Other
        };
        let mut rows = Vec::new();
        for line in lines {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            rows.push(
                line.split(',')
                    .map(|c| c.trim().parse::<f64>().unwrap_or(f64::NAN))
                    .collect(),
            );
        }
        Ok(Table {
            kind,
            columns,
            index,
            rows,
        })
    }

    /// Read a CSV file.
    pub fn read(path: &Path) -> io::Result<Table> {
        let f = std::fs::File::open(path)?;
        Table::parse(io::BufReader::new(f))
    }

    /// Number of data rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True without data rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// True when the header has `name`.
    pub fn has(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// The column `name` (NaN for missing cells), or `None` without such a header.
    pub fn column(&self, name: &str) -> Option<Vec<f64>> {
        let i = *self.index.get(name)?;
        Some(
            self.rows
                .iter()
                .map(|r| r.get(i).copied().unwrap_or(f64::NAN))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_rows_round_trip_through_the_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.csv");
        let mut w = CsvWriter::create(&path).unwrap();
        let mut s = Sample {
            uptime_s: 1.0,
            connections: 10,
            lag_p90_us: 250,
            ..Sample::default()
        };
        s.machine.tcp_mem_bytes = 4096;
        w.write(&s).unwrap();
        s.uptime_s = 2.0;
        s.connections = 20;
        s.machine.sock_slab_bytes = Some(77);
        w.write(&s).unwrap();
        drop(w);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("time_s,unix_time,pid,cpu_user,"));
        for line in text.lines() {
            assert_eq!(line.split(',').count(), SERVER_COLUMNS.len(), "{line}");
        }
        let t = Table::read(&path).unwrap();
        assert_eq!(t.kind, CsvKind::Server);
        assert_eq!(t.len(), 2);
        assert_eq!(t.column("connections").unwrap(), vec![10.0, 20.0]);
        assert_eq!(t.column("lag_p90_us").unwrap(), vec![250.0, 250.0]);
        let slab = t.column("sock_slab_bytes").unwrap();
        assert!(slab[0].is_nan() && slab[1] == 77.0);
        assert!(t.column("nope").is_none());
    }

    #[test]
    fn flood_header_is_recognised_and_bad_files_are_refused() {
        let text = format!(
            "{}\n0,10,0,0,5,300,100,900,1200,1000000,0.5,0.2\n",
            FLOOD_COLUMNS.join(",")
        );
        let t = Table::parse(text.as_bytes()).unwrap();
        assert_eq!(t.kind, CsvKind::Flood);
        assert_eq!(t.column("open").unwrap(), vec![10.0]);
        assert!(Table::parse("a,b\n1,2\n".as_bytes()).is_err());
        assert!(Table::parse("".as_bytes()).is_err());
    }
}
