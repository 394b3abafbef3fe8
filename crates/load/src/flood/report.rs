//! flood's output: the per-second report (stderr line, CSV row, callback) and the final
//! summary summed over every process of the run.

use super::stats::{hist_add, new_hist, percentiles, ProcSummary, Sample};
use super::{FloodArgs, FloodSummary, FloodTick, CSV_HEADER};
use anyhow::Context;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

pub(super) fn summarize(args: &FloodArgs, procs: &[ProcSummary]) -> FloodSummary {
    let mut s = FloodSummary {
        requested: args.connections,
        processes: procs.len() as u32,
        ..Default::default()
    };
    let mut hist = new_hist();
    let (mut first, mut last) = (f64::MAX, 0.0f64);
    let (mut rss_growth, mut rss_open) = (0i64, 0u64);
    for p in procs {
        s.attempted += p.attempted;
        s.opened += p.opened;
        s.peak_open += p.peak_open;
        s.failures.add(&p.fail);
        s.closed += p.closed;
        s.messages += p.messages;
        s.bytes += p.bytes;
        s.elapsed_s = s.elapsed_s.max(p.elapsed_s);
        if p.opened > 0 {
            first = first.min(p.first_connect_s);
            last = last.max(p.last_open_s);
        }
        rss_growth += p.rss_at_peak as i64 - p.rss_base as i64;
        rss_open += p.open_at_rss_peak;
        hist_add(&mut hist, &p.hist);
        s.resume.add(&p.resume);
    }
    s.failed = s.failures.total();
    if s.opened > 0 && last > first {
        s.connect_rate = s.opened as f64 / (last - first);
    }
    (s.lat_p50_us, s.lat_p99_us, s.lat_max_us) = percentiles(&hist);
    if rss_open > 0 {
        s.rss_per_conn_bytes = rss_growth.max(0) as f64 / rss_open as f64;
    }
    s
}

/// Per-second output: stderr line, CSV row, callback.
pub(super) struct Report<'a> {
    quiet: bool,
    csv: Option<std::io::BufWriter<std::fs::File>>,
    csv_path: Option<PathBuf>,
    last_messages: u64,
    last_bytes: u64,
    /// Largest `open` of any sample.
    pub(super) max_open: u64,
    on_second: &'a mut dyn FnMut(&FloodTick),
}

impl<'a> Report<'a> {
    pub(super) fn new(
        args: &FloodArgs,
        on_second: &'a mut dyn FnMut(&FloodTick),
    ) -> anyhow::Result<Self> {
        let csv = match &args.csv {
            Some(p) => {
                let f = std::fs::File::create(p)
                    .with_context(|| format!("cannot create {}", p.display()))?;
                let mut w = std::io::BufWriter::new(f);
                writeln!(w, "{CSV_HEADER}")?;
                Some(w)
            }
            None => None,
        };
        Ok(Report {
            quiet: args.quiet,
            csv,
            csv_path: args.csv.clone(),
            last_messages: 0,
            last_bytes: 0,
            max_open: 0,
            on_second,
        })
    }

    pub(super) fn sample(&mut self, s: &Sample) {
        let mut h = new_hist();
        hist_add(&mut h, &s.hist);
        let (p50, p99, max) = percentiles(&h);
        let tick = FloodTick {
            elapsed: Duration::from_secs_f64(s.t),
            open: s.open,
            failed: s.failed,
            closed: s.closed,
            messages: s.messages.saturating_sub(self.last_messages),
            bytes: s.bytes.saturating_sub(self.last_bytes),
            lat_p50_us: p50,
            lat_p99_us: p99,
            lat_max_us: max,
            rss_bytes: s.rss,
            cpu_user: s.cpu_user,
            cpu_sys: s.cpu_sys,
            hist: s.hist.clone(),
        };
        self.max_open = self.max_open.max(s.open);
        self.last_messages = s.messages;
        self.last_bytes = s.bytes;
        if !self.quiet {
            eprintln!("{}", tick_line(&tick));
        }
        if let Some(w) = self.csv.as_mut() {
            let _ = writeln!(
                w,
                "{:.1},{},{},{},{},{},{},{},{},{},{:.1},{:.1}",
                s.t,
                tick.open,
                tick.failed,
                tick.closed,
                tick.messages,
                tick.bytes,
                p50,
                p99,
                max,
                s.rss,
                s.cpu_user,
                s.cpu_sys
            );
            let _ = w.flush();
        }
        (self.on_second)(&tick);
    }

    pub(super) fn finish(&mut self, s: &FloodSummary) -> anyhow::Result<()> {
        if let Some(w) = self.csv.as_mut() {
            w.flush()?;
        }
        if !self.quiet {
            eprintln!("{}", summary_text(s));
            if let Some(p) = &self.csv_path {
                eprintln!("  csv: {}", p.display());
            }
        }
        Ok(())
    }
}

/// The per-second stderr line.
pub fn tick_line(t: &FloodTick) -> String {
    format!(
        "{:>6.1}s open {:>8} failed {:>6} closed {:>8} | {:>7} msg/s {:>9} B/s | lat p50 {} p99 {} max {} | rss {} MB cpu {:.0}%",
        t.elapsed.as_secs_f64(),
        t.open,
        t.failed,
        t.closed,
        t.messages,
        t.bytes,
        fmt_us(t.lat_p50_us),
        fmt_us(t.lat_p99_us),
        fmt_us(t.lat_max_us),
        t.rss_bytes / (1 << 20),
        t.cpu_user + t.cpu_sys
    )
}

/// The human summary.
pub fn summary_text(s: &FloodSummary) -> String {
    let r = &s.resume;
    let resume = if *r == Default::default() {
        String::new()
    } else {
        format!(
            "\n  reconnects {} ({} failed attempts); gaps reported {}; lost {}; duplicates {}",
            r.reconnects, r.reconnect_failures, r.gaps, r.lost, r.duplicates
        )
    };
    format!(
        "flood summary: {} requested, {} attempted, {} opened (peak {} open), {} failed ({}), {} closed\n  \
         {} messages, {} bytes in {:.1} s; connect rate {:.0}/s\n  \
         latency p50 {} p99 {} max {}; flood memory {:.0} B per connection over {} process(es){}",
        s.requested,
        s.attempted,
        s.opened,
        s.peak_open,
        s.failed,
        s.failures.describe(),
        s.closed,
        s.messages,
        s.bytes,
        s.elapsed_s,
        s.connect_rate,
        fmt_us(s.lat_p50_us),
        fmt_us(s.lat_p99_us),
        fmt_us(s.lat_max_us),
        s.rss_per_conn_bytes,
        s.processes,
        resume
    )
}

fn fmt_us(us: u64) -> String {
    if us == 0 {
        "-".into()
    } else if us < 1000 {
        format!("{us}us")
    } else if us < 1_000_000 {
        format!("{:.1}ms", us as f64 / 1000.0)
    } else {
        format!("{:.2}s", us as f64 / 1e6)
    }
}
