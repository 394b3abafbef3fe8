//! The churn soak's bookkeeping (issue 10): the server's RSS and open descriptors per
//! `--sample-every` interval, judged flat within ±5 % of their median after the
//! warm-up, and the leak check (descriptors no connection explains must not grow).
//!
//! Open descriptors follow the connections open at the moment of reading, and churn
//! makes that swing by thousands within each cycle (open, hold, close every few
//! seconds). One reading per second falls on the same few phases of a 3-s cycle, so
//! an interval's median moved with where the readings landed (a first hour showed
//! ±100 %), not with the server. The interval's level is therefore the **mean of
//! [`FD_READINGS_PER_S`] readings a second**; RSS, connections and the leak check stay
//! medians of the once-a-second readings (paired with the server's count).

use super::report::{bytes, count, met, Report};

/// How far an interval's RSS or fds may stray from the median of all intervals (the
/// issue's soak criterion: flat within ±5 %).
const SOAK_FLAT: f64 = 0.05;
/// How many more descriptors than connections an interval may show beyond the first
/// judged one (the bench's own leak criterion: what no connection explains must not
/// grow).
const SPARE_FDS_GROWTH: u64 = 64;
/// Descriptor readings per second (a `/proc/PID/fd` listing: ~1 ms at 10,000 fds).
pub const FD_READINGS_PER_S: u32 = 10;

/// Open file descriptors of process `pid` (0 if it is gone).
pub fn open_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

/// One interval's readings.
#[derive(Default)]
struct Interval {
    /// Once a second: (RSS, open fds, the server's connections).
    paired: Vec<(u64, u64, u64)>,
    /// [`FD_READINGS_PER_S`] a second: open fds.
    fds: Vec<u64>,
}

/// The soak's readings, by interval.
#[derive(Default)]
pub struct Soak {
    intervals: Vec<Interval>,
}

impl Soak {
    fn at(&mut self, slot: usize) -> &mut Interval {
        if self.intervals.len() <= slot {
            self.intervals.resize_with(slot + 1, Interval::default);
        }
        &mut self.intervals[slot]
    }

    /// A once-a-second reading.
    pub fn push(&mut self, slot: usize, rss: u64, fds: u64, connections: u64) {
        self.at(slot).paired.push((rss, fds, connections));
    }

    /// A frequent descriptor reading.
    pub fn push_fds(&mut self, slot: usize, fds: u64) {
        self.at(slot).fds.push(fds);
    }

    /// The intervals with once-a-second readings, as (RSS, fds level, connections,
    /// fds − connections).
    fn rows(&self) -> Vec<(u64, u64, u64, u64)> {
        self.intervals
            .iter()
            .filter(|i| !i.paired.is_empty())
            .map(|i| {
                let median = |col: fn(&(u64, u64, u64)) -> u64| {
                    let mut v: Vec<u64> = i.paired.iter().map(col).collect();
                    v.sort_unstable();
                    v[v.len() / 2]
                };
                let fds = if i.fds.is_empty() {
                    median(|r| r.1)
                } else {
                    (i.fds.iter().sum::<u64>() as f64 / i.fds.len() as f64).round() as u64
                };
                (
                    median(|r| r.0),
                    fds,
                    median(|r| r.2),
                    median(|r| r.1.saturating_sub(r.2)),
                )
            })
            .collect()
    }

    /// The table, `soak.csv`, and the flatness and leak rows over the intervals that
    /// end after `warmup` s (at least the last two are judged).
    pub fn report(
        &self,
        report: &mut Report,
        dir: &std::path::Path,
        every: f64,
        warmup: f64,
    ) -> anyhow::Result<()> {
        let every = every.max(1.0);
        let rows = self.rows();
        if rows.is_empty() {
            return Ok(());
        }
        let mut csv =
            String::from("interval_end_s,rss_bytes,open_fds,connections,fds_minus_connections\n");
        let mut table = String::from(
            "| until | RSS (median) | open fds (mean of 10/s) | connections (median) | fds − connections (median) |\n|---|---|---|---|---|\n",
        );
        for (i, (rss, fds, conns, spare)) in rows.iter().enumerate() {
            let end = (i + 1) as f64 * every;
            csv.push_str(&format!("{end:.0},{rss},{fds},{conns},{spare}\n"));
            table.push_str(&format!(
                "| {end:.0} s{} | {} | {} | {} | {} |\n",
                if end <= warmup { " (warm-up)" } else { "" },
                bytes(*rss as f64),
                count(*fds as f64),
                count(*conns as f64),
                count(*spare as f64)
            ));
        }
        std::fs::write(dir.join("soak.csv"), csv)?;
        report
            .sections
            .push((format!("Soak: every {every:.0} s"), table));
        let judged = ((warmup / every).round() as usize).min(rows.len().saturating_sub(2));
        let judged_rows = &rows[judged..];
        for (what, col) in [
            ("RSS", (|r: &(u64, u64, u64, u64)| r.0) as fn(&_) -> u64),
            ("open fds", |r| r.1),
        ] {
            let v: Vec<u64> = judged_rows.iter().map(col).collect();
            let (worst, mid) = worst_from_median(&v);
            report.row(
                &format!("soak: {what} per {every:.0} s interval vs their median"),
                format!(
                    "worst {:+.1} % over {} intervals after {:.0} s of warm-up (median {})",
                    worst * 100.0,
                    v.len(),
                    judged as f64 * every,
                    if what == "RSS" {
                        bytes(mid)
                    } else {
                        count(mid)
                    }
                ),
                "flat within ±5 %",
                met(worst.abs() <= SOAK_FLAT),
            );
        }
        let spare: Vec<u64> = judged_rows.iter().map(|r| r.3).collect();
        let (lo, hi) = (
            spare.iter().copied().min().unwrap_or(0),
            spare.iter().copied().max().unwrap_or(0),
        );
        report.row(
            &format!("soak: fds − connections per {every:.0} s interval (leak check)"),
            format!(
                "{} → {} (range {lo}–{hi}) over {} intervals",
                spare[0],
                spare[spare.len() - 1],
                spare.len()
            ),
            &format!("not growing (≤ +{SPARE_FDS_GROWTH}, bench's own criterion)"),
            met(hi <= spare[0] + SPARE_FDS_GROWTH),
        );
        Ok(())
    }
}

/// The largest relative departure of `v` from its median (signed), and the median.
fn worst_from_median(v: &[u64]) -> (f64, f64) {
    let mut sorted = v.to_vec();
    sorted.sort_unstable();
    let mid = sorted[sorted.len() / 2].max(1) as f64;
    let worst = v
        .iter()
        .map(|&x| x as f64 / mid - 1.0)
        .fold(0.0f64, |a, d| if d.abs() > a.abs() { d } else { a });
    (worst, mid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts(soak: &Soak) -> Vec<(String, String)> {
        let dir = tempfile::tempdir().unwrap();
        let mut report = Report::new("churn", "t", dir.path());
        soak.report(&mut report, dir.path(), 60.0, 60.0).unwrap();
        report.rows.into_iter().map(|r| (r.figure, r.met)).collect()
    }

    /// Churn's descriptors swing within every cycle; one reading a second caught a
    /// different phase each interval. The mean of frequent readings is the level.
    #[test]
    fn descriptors_swinging_within_a_cycle_are_judged_by_their_level() {
        let mut soak = Soak::default();
        for slot in 0..6 {
            for s in 0..60u64 {
                // Once a second lands on a phase that differs per interval.
                let phase_fds = if slot % 2 == 0 { 9_000 } else { 3_000 };
                soak.push(slot, 50 << 20, phase_fds, phase_fds - 20);
                for k in 0..10u64 {
                    // A 3-s cycle: 3,000, 6,000, 9,000 open in turn.
                    soak.push_fds(slot, 3_000 * (1 + (s * 10 + k) / 10 % 3));
                }
            }
        }
        let v = verdicts(&soak);
        assert_eq!(v[0].0, "soak: RSS per 60 s interval vs their median");
        assert_eq!(v[0].1, met(true));
        assert_eq!(v[1].0, "soak: open fds per 60 s interval vs their median");
        assert_eq!(v[1].1, met(true), "{v:?}");
        assert_eq!(v[2].1, met(true), "{v:?}");
    }

    #[test]
    fn growing_memory_and_leaking_descriptors_fail() {
        let mut soak = Soak::default();
        for slot in 0..6u64 {
            for _ in 0..60 {
                let fds = 6_000 + slot * 500;
                soak.push(slot as usize, (50 + slot * 2) << 20, fds, 6_000);
                soak.push_fds(slot as usize, fds);
            }
        }
        let v = verdicts(&soak);
        assert_eq!(v[0].1, met(false), "RSS +4 % a minute: {v:?}");
        assert_eq!(v[1].1, met(false), "fds growing: {v:?}");
        assert_eq!(v[2].1, met(false), "fds − connections growing: {v:?}");
    }
}
