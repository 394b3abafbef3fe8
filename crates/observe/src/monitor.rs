//! The [`Monitor`]: one sampler thread per process that turns [`ProcessMetrics`] and
//! `/proc` into a [`Sample`] every second, appends it to the CSV log, and keeps the latest
//! samples for the admin listener (see `admin`).
//!
//! Nothing here runs on the gateway's hot path: loops only bump atomics, and this thread
//! reads them once a second.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::admin::Admin;
use crate::csv::CsvWriter;
use crate::metrics::ProcessMetrics;
use crate::sample::{Sample, Sampler};
use crate::state::MonitorState;
pub use crate::state::{ChildSamples, ExtraStats};

/// Time between samples.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// Samples kept for `/history` (five minutes at one a second).
pub const HISTORY_LEN: usize = 300;

/// What the monitor writes and serves.
pub struct MonitorOptions {
    /// `--csv FILE`: one row per second (columns in the `csv` module doc).
    pub csv: Option<PathBuf>,
    /// `--admin ADDR`: `/metrics`, `/healthz`, `/stats`, `/history` and `/` (dashboard).
    pub admin: Option<SocketAddr>,
    /// Server-specific stats merged into `/stats` under `extra`.
    pub extra: ExtraStats,
    /// `GET /presence/…` answered on the admin listener's thread, off the event
    /// loops (see `admin`); `None`: 404 there.
    pub query: Option<crate::state::QueryFn>,
    /// Read the socket slab (`/proc/slabinfo`) every second; off for a supervisor's
    /// children, whose supervisor reads it for the whole server
    /// ([`Sampler::without_slab`]).
    pub slab: bool,
}

impl Default for MonitorOptions {
    fn default() -> Self {
        MonitorOptions {
            csv: None,
            admin: None,
            extra: Arc::new(|| serde_json::json!({})),
            query: None,
            slab: true,
        }
    }
}

/// Owns the sampler and admin threads; dropping it stops and joins them.
pub struct Monitor {
    shared: Arc<MonitorState>,
    admin: Option<Admin>,
    sampler: Option<JoinHandle<()>>,
}

impl Monitor {
    /// Start sampling; open the CSV file and bind the admin address if asked.
    /// Errors: the CSV file cannot be created, or the admin address cannot be bound.
    pub fn start(metrics: Arc<ProcessMetrics>, opts: MonitorOptions) -> anyhow::Result<Monitor> {
        let mut csv = match &opts.csv {
            Some(p) => Some(
                CsvWriter::create(p)
                    .with_context(|| format!("cannot create CSV file {}", p.display()))?,
            ),
            None => None,
        };
        let mut sampler = if opts.slab {
            Sampler::new(metrics.clone())
        } else {
            Sampler::without_slab(metrics.clone())
        };
        // A first sample so memory figures exist at once; its rates cover microseconds,
        // so they are zeroed rather than shown as noise.
        let mut first = sampler.sample();
        first.zero_rates();
        let shared = Arc::new(MonitorState {
            metrics,
            extra: opts.extra,
            children: Mutex::new(None),
            history: Mutex::new(VecDeque::from([first])),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let admin = match opts.admin {
            Some(addr) => Some(Admin::start(addr, shared.clone(), opts.query.clone())?),
            None => None,
        };
        if let Some(p) = &opts.csv {
            tracing::info!(path = %p.display(), "writing one CSV row per second");
        }
        let sh = shared.clone();
        let sampler = std::thread::Builder::new()
            .name("observe-sampler".into())
            .spawn(move || run_sampler(&sh, &mut sampler, &mut csv))
            .context("cannot spawn the sampler thread")?;
        Ok(Monitor {
            shared,
            admin,
            sampler: Some(sampler),
        })
    }

    /// The bound admin address (useful with port 0).
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(|a| a.addr)
    }

    /// The last one-second sample.
    pub fn latest(&self) -> Sample {
        self.shared.latest()
    }

    /// List other processes' samples after this one in `/stats` (replaces an earlier source).
    pub fn set_children(&self, source: ChildSamples) {
        *self
            .shared
            .children
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(source);
    }

    /// Up to [`HISTORY_LEN`] recent samples, oldest first.
    pub fn history(&self) -> Vec<Sample> {
        let h = self
            .shared
            .history
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        h.iter().cloned().collect()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        *self.shared.stop.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.sampler.take() {
            let _ = t.join();
        }
        // Admin's own Drop unblocks and joins its thread.
        self.admin.take();
    }
}

fn run_sampler(shared: &MonitorState, sampler: &mut Sampler, csv: &mut Option<CsvWriter>) {
    let mut next = Instant::now() + SAMPLE_INTERVAL;
    loop {
        {
            let mut stop = shared.stop.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if *stop {
                    return;
                }
                let now = Instant::now();
                if now >= next {
                    break;
                }
                stop = shared
                    .wake
                    .wait_timeout(stop, next - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        // Fixed-rate schedule; after a long stall, skip missed ticks instead of bursting.
        next += SAMPLE_INTERVAL;
        let now = Instant::now();
        if next < now {
            next = now + SAMPLE_INTERVAL;
        }
        let s = sampler.sample();
        if let Some(w) = csv.as_mut() {
            if let Err(e) = w.write(&s) {
                tracing::warn!(error = %e, "CSV write failed; CSV logging stopped");
                *csv = None;
            }
        }
        let mut h = shared.history.lock().unwrap_or_else(|p| p.into_inner());
        if h.len() >= HISTORY_LEN {
            h.pop_front();
        }
        h.push_back(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn samples_every_second_and_writes_csv() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.csv");
        let m = ProcessMetrics::new(1);
        let mon = Monitor::start(
            m.clone(),
            MonitorOptions {
                csv: Some(path.clone()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(mon.admin_addr(), None);
        m.loops[0].connections.store(42, Relaxed);
        // Wait (bounded) for two samples after the first.
        let deadline = Instant::now() + Duration::from_secs(10);
        while mon.history().len() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(mon.history().len() >= 3, "sampler did not sample");
        assert_eq!(mon.latest().connections, 42);
        drop(mon);
        let t = crate::csv::Table::read(&path).unwrap();
        assert!(t.len() >= 2);
        assert_eq!(t.column("connections").unwrap().last(), Some(&42.0));
    }

    #[test]
    fn bad_csv_path_is_an_error() {
        let opts = MonitorOptions {
            csv: Some("/nonexistent-dir/x.csv".into()),
            ..Default::default()
        };
        let err = Monitor::start(ProcessMetrics::new(1), opts)
            .err()
            .expect("must fail");
        assert!(format!("{err:#}").contains("/nonexistent-dir/x.csv"));
    }
}
