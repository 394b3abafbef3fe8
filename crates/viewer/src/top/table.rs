//! The process table of `myriad top` as text: its columns, the cells of a row, which
//! columns fit a width, and the whole `--once` snapshot. The live view (`view`) draws
//! the same cells with the same column choice.

use observe::sample::{MachineSample, Sample};

use super::model::{sort_rows, totals, Snapshot, SortKey};

/// Column titles of the process table, in display order.
pub const HEADER: [&str; 17] = [
    "ADDR",
    "PID",
    "CONNS",
    "CONN/s",
    "CLOSE/s",
    "CPU%",
    "USR%",
    "SYS%",
    "RSS",
    "B/CONN",
    "IN/s",
    "OUT/s",
    "OUT B/s",
    "LAG avg/p90/max",
    "QUEUED",
    "DROPS",
    "LAT p50/p99",
];
/// When the width is short, columns leave in this order (indices into [`HEADER`]): the
/// split of CPU and the figures derived from others first. ADDR, PID, CONNS and OUT/s
/// always stay.
const DROP_ORDER: [usize; 13] = [6, 7, 12, 4, 14, 10, 15, 16, 3, 13, 9, 8, 5];
/// Spaces between columns.
pub const GAP: usize = 2;
/// Width of `--once` text when stdout is not a terminal.
pub const DEFAULT_WIDTH: usize = 120;

/// The columns to show (indices into [`HEADER`], in order) so that a row of cells as wide
/// as `widths` fits in `width` characters: all, minus the least important ones.
pub fn fit_columns(widths: &[usize], width: usize) -> Vec<usize> {
    let mut shown: Vec<usize> = (0..widths.len()).collect();
    let total = |shown: &[usize]| -> usize {
        shown.iter().map(|&c| widths[c]).sum::<usize>() + GAP * shown.len().saturating_sub(1)
    };
    for drop in DROP_ORDER {
        if total(&shown) <= width {
            break;
        }
        shown.retain(|&c| c != drop);
    }
    shown
}

/// Bytes with a binary unit: `512 B`, `3.4 KiB`, `1.2 GiB`.
pub fn fmt_bytes(v: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = v;
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A count with an SI suffix: `950`, `12.3k`, `1.0M`.
pub fn fmt_si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// A duration in microseconds: `850µs`, `12.5ms`, `1.2s`.
pub fn fmt_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.1}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1}ms", us / 1e3)
    } else {
        format!("{us:.0}µs")
    }
}

fn pct(cores: f64) -> String {
    format!("{:.0}", cores * 100.0)
}

/// The cells of one row, one per [`HEADER`] column.
pub fn cells(addr: &str, pid: &str, s: &Sample) -> Vec<String> {
    vec![
        addr.to_string(),
        pid.to_string(),
        fmt_si(s.connections as f64),
        fmt_si(s.connects_per_s),
        fmt_si(s.closes_per_s),
        pct(s.cpu_user + s.cpu_sys),
        pct(s.cpu_user),
        pct(s.cpu_sys),
        fmt_bytes(s.rss_bytes as f64),
        if s.connections > 0 {
            fmt_bytes(s.user_bytes_per_conn)
        } else {
            "-".into()
        },
        fmt_si(s.messages_in_per_s),
        fmt_si(s.messages_out_per_s),
        fmt_bytes(s.bytes_out_per_s),
        format!(
            "{}/{}/{}",
            fmt_us(s.lag_avg_us),
            fmt_us(s.lag_p90_us as f64),
            fmt_us(s.lag_max_us as f64)
        ),
        fmt_bytes(s.queued_bytes as f64),
        fmt_si(s.slow_drops as f64),
        // No delivery in the interval: no latency, rather than a zero.
        if s.latency_batches > 0 {
            format!(
                "{}/{}",
                fmt_us(s.latency_p50_us as f64),
                fmt_us(s.latency_p99_us as f64)
            )
        } else {
            "-".into()
        },
    ]
}

/// The machine summary: two lines, each shorter than 120 characters.
pub fn machine_lines(m: &MachineSample) -> [String; 2] {
    [
        format!(
            "machine: CPU {}% of {} cores (user {}%, sys {}%) · memory used {}, free {}, cache {}",
            pct(m.cpu_total),
            m.cpus,
            pct(m.cpu_user),
            pct(m.cpu_sys),
            fmt_bytes(m.mem_used_bytes as f64),
            fmt_bytes(m.mem_free_bytes as f64),
            fmt_bytes(m.mem_cache_bytes as f64),
        ),
        format!(
            "TCP sockets: {} in use, {} orphaned, {} time-wait · kernel TCP buffers {}{}",
            fmt_si(m.tcp_inuse as f64),
            fmt_si(m.tcp_orphan as f64),
            fmt_si(m.tcp_tw as f64),
            fmt_bytes(m.tcp_mem_bytes as f64),
            m.sock_slab_bytes
                .map(|b| format!(", socket slab {}", fmt_bytes(b as f64)))
                .unwrap_or_default(),
        ),
    ]
}

/// All table rows (processes, sorted) followed by the totals row.
pub fn table(snap: &Snapshot, key: SortKey) -> (Vec<Vec<String>>, Vec<String>) {
    let mut rows = snap.rows.clone();
    sort_rows(&mut rows, key);
    let body = rows
        .iter()
        .map(|r| cells(&r.addr, &r.sample.pid.to_string(), &r.sample))
        .collect();
    let total = cells("TOTAL", &format!("{}p", rows.len()), &totals(&rows));
    (body, total)
}

/// Each column's width: its widest cell or title.
pub fn column_widths(rows: &[Vec<String>]) -> Vec<usize> {
    (0..HEADER.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain(std::iter::once(HEADER[c].chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// The `--once` text, at most `width` columns wide where it can be (the table drops its
/// least important columns to fit): title, machine lines, aligned table with totals, errors.
pub fn render_text(snap: &Snapshot, key: SortKey, width: usize) -> String {
    let (body, total) = table(snap, key);
    let mut all = vec![HEADER.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
    all.extend(body);
    all.push(total);
    let widths = column_widths(&all);
    let shown = fit_columns(&widths, width);
    let mut out = format!(
        "myriad top: {} process(es), sorted by {}\n",
        snap.rows.len(),
        key.name()
    );
    if let Some(m) = &snap.machine {
        for line in machine_lines(m) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    for row in &all {
        let line: Vec<String> = shown
            .iter()
            .map(|&c| {
                let cell = &row[c];
                if c == 0 {
                    format!("{cell:<w$}", w = widths[c])
                } else {
                    format!("{cell:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(line.join(&" ".repeat(GAP)).trim_end());
        out.push('\n');
    }
    for (addr, e) in &snap.errors {
        out.push_str(&format!("error: {addr}: {e}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::model::tests::row;

    #[test]
    fn formats() {
        assert_eq!(fmt_bytes(512.0), "512 B");
        assert_eq!(fmt_bytes(3.5 * 1024.0), "3.5 KiB");
        assert_eq!(fmt_si(950.0), "950");
        assert_eq!(fmt_si(12_345.0), "12.3k");
        assert_eq!(fmt_us(850.0), "850µs");
        assert_eq!(fmt_us(12_500.0), "12.5ms");
        let snap = Snapshot {
            rows: vec![row(7, 5, 0.25, 100)],
            ..Snapshot::default()
        };
        let text = render_text(&snap, SortKey::Conns, 500);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].starts_with("ADDR") && lines[2].starts_with("127.0.0.1:7"),
            "{text}"
        );
        assert!(lines[3].starts_with("TOTAL"), "{text}");
        assert!(lines[2].contains("  25  "), "cpu percent in {text}");
        assert!(
            lines[1].contains("LAT p50/p99"),
            "all columns when wide: {text}"
        );
        assert!(
            lines[2].ends_with("  -"),
            "no deliveries, no latency: {text}"
        );
    }

    #[test]
    fn narrow_widths_drop_the_least_important_columns_first() {
        let widths: Vec<usize> = HEADER.iter().map(|h| h.len()).collect();
        let all = fit_columns(&widths, 1000);
        assert_eq!(all.len(), HEADER.len());
        let fits = |shown: &[usize]| {
            shown.iter().map(|&c| widths[c]).sum::<usize>() + GAP * (shown.len() - 1)
        };
        let at_100 = fit_columns(&widths, 100);
        assert!(fits(&at_100) <= 100);
        assert!(
            !at_100.contains(&6) && !at_100.contains(&7),
            "USR% and SYS% go first"
        );
        assert!(at_100.windows(2).all(|w| w[0] < w[1]), "order kept");
        // Too narrow for anything: the four that always stay.
        let names: Vec<&str> = fit_columns(&widths, 10)
            .iter()
            .map(|&c| HEADER[c])
            .collect();
        assert_eq!(names, ["ADDR", "PID", "CONNS", "OUT/s"]);
    }
}
