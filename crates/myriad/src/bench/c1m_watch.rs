//! What `bench c1m` watches while it runs: the mixed-transport floods (one flood per
//! transport, each spread over child processes of ≤ 20,000 files), and the supervised
//! server's processes, read once a second from the supervisor's admin `/stats`
//! (`processes`: every child's full sample). Each second becomes one live line, one row
//! of `server-total.csv` (all processes summed, loop lag the worst process's) and of
//! `router.csv`, and per-process peaks for the report's process table; and the
//! supervisor's end (SIGTERM, then its children checked gone).
//!
//! Not here: the scenario's phases and its report (`c1m`).

use super::held::{FloodState, Live};
use crate::server_process::ServerProcess;
use hdrhistogram::Histogram;
use load::flood::stats::{hist_add, new_hist};
use load::flood::{FloodArgs, FloodSummary};
use observe::sample::Sample;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One flood per transport, each in a thread of this process (its connections in
/// child processes).
pub struct Floods {
    stop: Arc<AtomicBool>,
    runs: Vec<(String, JoinHandle<anyhow::Result<FloodSummary>>)>,
    pub states: Vec<Arc<FloodState>>,
}

impl Floods {
    /// Starts every `(name, args)` flood.
    pub fn start(floods: Vec<(String, FloodArgs)>) -> Floods {
        let stop = Arc::new(AtomicBool::new(false));
        let mut runs = Vec::new();
        let mut states = Vec::new();
        for (name, args) in floods {
            let state = Arc::new(FloodState::default());
            states.push(state.clone());
            let stop = stop.clone();
            let handle = std::thread::spawn(move || {
                load::flood::run_until(args, &stop, &mut |t| {
                    state.open.store(t.open, Ordering::Relaxed);
                    state.failed.store(t.failed, Ordering::Relaxed);
                    state.closed.store(t.closed, Ordering::Relaxed);
                    state.messages.fetch_add(t.messages, Ordering::Relaxed);
                    hist_add(&mut lock(&state.hist), &t.hist);
                    state.ticks.fetch_add(1, Ordering::Relaxed);
                    state
                        .peak_client_cpu
                        .fetch_max((t.cpu_user + t.cpu_sys) as u64, Ordering::Relaxed);
                })
            });
            runs.push((name, handle));
        }
        Floods { stop, runs, states }
    }

    fn sum(&self, f: impl Fn(&FloodState) -> u64) -> u64 {
        self.states.iter().map(|s| f(s)).sum()
    }

    pub fn open(&self) -> u64 {
        self.sum(|s| s.open.load(Ordering::Relaxed))
    }

    pub fn failed(&self) -> u64 {
        self.sum(|s| s.failed.load(Ordering::Relaxed))
    }

    pub fn messages(&self) -> u64 {
        self.sum(|s| s.messages.load(Ordering::Relaxed))
    }

    /// Whether a flood thread has ended (by itself: an error or its time bound).
    pub fn any_ended(&self) -> bool {
        self.runs.iter().any(|(_, h)| h.is_finished())
    }

    /// Every latency of every flood since the previous call, merged.
    pub fn take_hist(&self) -> Histogram<u64> {
        let mut all = new_hist();
        for s in &self.states {
            let h = std::mem::replace(&mut *lock(&s.hist), new_hist());
            // Same bounds on both sides: adding cannot fail.
            let _ = all.add(&h);
        }
        all
    }

    /// Waits until `want` connections are open or failed, a flood ended, no
    /// connection opened or failed for `stall`, or `max`: a slow box still opening
    /// is waited for (how fast is the connect rate's figure, not this one's).
    pub fn wait_open(&self, want: u64, stall: Duration, max: Duration) -> u64 {
        let until = Instant::now() + max;
        let mut last = (0, Instant::now());
        while Instant::now() < until && !self.any_ended() {
            let done = self.open() + self.failed();
            if done >= want {
                break;
            }
            if done != last.0 {
                last = (done, Instant::now());
            } else if last.1.elapsed() >= stall {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.open()
    }

    /// Waits until no message arrived for two whole seconds (deliveries drained), at most `max`.
    pub fn wait_quiet(&self, max: Duration) {
        let until = Instant::now() + max;
        let mut last = (self.messages(), Instant::now());
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(250));
            let m = self.messages();
            if m != last.0 {
                last = (m, Instant::now());
            } else if last.1.elapsed() >= Duration::from_secs(2) {
                return;
            }
        }
    }

    /// Closes every connection and returns each flood's summary.
    pub fn finish(mut self) -> anyhow::Result<Vec<(String, FloodSummary)>> {
        self.stop.store(true, Ordering::Relaxed);
        std::mem::take(&mut self.runs)
            .into_iter()
            .map(|(name, h)| {
                let s = h
                    .join()
                    .map_err(|_| anyhow::anyhow!("flood {name} panicked"))??;
                Ok((name, s))
            })
            .collect()
    }
}

impl Drop for Floods {
    /// A scenario that fails half-way still closes its connections (the flood threads
    /// end by themselves once told).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A process's figures over the run, for the report's table.
#[derive(Clone, Debug, Default)]
pub struct ProcessPeak {
    pub role: String,
    pub connections_max: u64,
    pub rss_max: u64,
    /// CPU seconds at the first and last sample.
    pub cpu_first: Option<f64>,
    pub cpu_last: f64,
    pub lag_p99_max: u64,
    pub lag_max: u64,
}

/// What the watcher saw so far.
#[derive(Default)]
pub struct Seen {
    /// The latest sample of every process, supervisor first.
    pub latest: Vec<Sample>,
    /// pid → its figures over the run.
    pub peaks: BTreeMap<u32, ProcessPeak>,
    /// Every pid that ever served (supervisor, router, gateways, restarted ones).
    pub pids: Vec<u32>,
    /// Worst loop lag of any process since the last `take_lag`.
    pub lag_max_window: u64,
    /// Peak of the summed connects per second.
    pub peak_connects: f64,
}

/// The once-a-second watcher of the server and the floods.
pub struct Watch {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    pub seen: Arc<Mutex<Seen>>,
}

impl Watch {
    /// Samples the supervisor's `/stats` once a second into `dir/server-total.csv` and
    /// `dir/router.csv`, printing a live line with the floods' figures (once `floods`
    /// is set).
    pub fn start(
        server: Arc<ServerProcess>,
        floods: Arc<Mutex<Option<Arc<Floods>>>>,
        live: Arc<Live>,
        dir: &Path,
    ) -> anyhow::Result<Watch> {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut total_csv = std::fs::File::create(dir.join("server-total.csv"))?;
        let mut router_csv = std::fs::File::create(dir.join("router.csv"))?;
        total_csv.write_all(observe::csv::header().as_bytes())?;
        router_csv.write_all(observe::csv::header().as_bytes())?;
        let handle = {
            let (stop, seen) = (stop.clone(), seen.clone());
            std::thread::spawn(move || {
                let mut rss_idle: Option<u64> = None;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    if let Some((procs, roles)) = read(&server) {
                        let total = total(&procs, &mut rss_idle);
                        let _ = total_csv.write_all(observe::csv::row(&total).as_bytes());
                        if let Some(r) = procs
                            .iter()
                            .find(|s| roles.get(&s.pid).is_some_and(|r| r == "router"))
                        {
                            let _ = router_csv.write_all(observe::csv::row(r).as_bytes());
                        }
                        let f = lock(&floods).clone();
                        live.emit(line(&live, &total, f.as_deref()));
                        record(&mut lock(&seen), procs, &roles, &total);
                    }
                    std::thread::sleep(Duration::from_secs(1).saturating_sub(t.elapsed()));
                }
            })
        };
        Ok(Watch {
            stop,
            handle: Some(handle),
            seen,
        })
    }

    /// The worst loop lag of any process since the previous call, µs.
    pub fn take_lag(&self) -> u64 {
        std::mem::take(&mut lock(&self.seen).lag_max_window)
    }

    /// Summed RSS of every process of the server at the latest sample.
    pub fn rss(&self) -> u64 {
        lock(&self.seen).latest.iter().map(|s| s.rss_bytes).sum()
    }

    /// The latest sample's time (the supervisor's, seconds) and the summed CPU
    /// seconds of every process in it: two of them give the CPU between them.
    pub fn cpu_seconds(&self) -> (f64, f64) {
        let seen = lock(&self.seen);
        let time = seen.latest.first().map_or(0.0, |s| s.time);
        let cpu = seen
            .latest
            .iter()
            .map(|s| s.cpu_user_seconds_total + s.cpu_sys_seconds_total)
            .sum();
        (time, cpu)
    }

    /// Waits for the next sample (at most 3 s), so a reading after it is fresh.
    pub fn next(&self) {
        let n = |s: &Seen| s.latest.first().map_or(0.0, |x| x.time);
        let before = n(&lock(&self.seen));
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until && n(&lock(&self.seen)) == before {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every process's sample, and pid → role, from the supervisor's admin `/stats`.
fn read(server: &ServerProcess) -> Option<(Vec<Sample>, BTreeMap<u32, String>)> {
    let addr = server.admin?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    // The supervisor asks each gateway in turn (≤ 0.5 s each): on a loaded machine
    // with 50 gateways one answer takes seconds.
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    s.write_all(b"GET /stats HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut raw = String::new();
    std::io::Read::read_to_string(&mut s, &mut raw).ok()?;
    let doc: serde_json::Value = serde_json::from_str(raw.split_once("\r\n\r\n")?.1).ok()?;
    let procs: Vec<Sample> = serde_json::from_value(doc["processes"].clone()).ok()?;
    let mut roles: BTreeMap<u32, String> = doc["extra"]["processes"]
        .as_array()?
        .iter()
        .filter_map(|p| Some((p["pid"].as_u64()? as u32, p["role"].as_str()?.to_string())))
        .collect();
    roles.insert(
        doc["extra"]["supervisor"].as_u64()? as u32,
        "supervisor".into(),
    );
    Some((procs, roles))
}

/// All processes as one: counts, rates, CPU and RSS summed, lag and latency the worst
/// process's, machine figures the supervisor's.
fn total(procs: &[Sample], rss_idle: &mut Option<u64>) -> Sample {
    let mut t = procs.first().cloned().unwrap_or_default();
    for s in procs.iter().skip(1) {
        t.cpu_user += s.cpu_user;
        t.cpu_sys += s.cpu_sys;
        t.rss_bytes += s.rss_bytes;
        t.connections += s.connections;
        t.connects_per_s += s.connects_per_s;
        t.closes_per_s += s.closes_per_s;
        t.messages_in_per_s += s.messages_in_per_s;
        t.messages_out_per_s += s.messages_out_per_s;
        t.bytes_out_per_s += s.bytes_out_per_s;
        t.queued_bytes += s.queued_bytes;
        t.slow_drops += s.slow_drops;
        t.lag_avg_us = t.lag_avg_us.max(s.lag_avg_us);
        t.lag_p90_us = t.lag_p90_us.max(s.lag_p90_us);
        t.lag_max_us = t.lag_max_us.max(s.lag_max_us);
        t.latency_p50_us = t.latency_p50_us.max(s.latency_p50_us);
        t.latency_p99_us = t.latency_p99_us.max(s.latency_p99_us);
        t.latency_max_us = t.latency_max_us.max(s.latency_max_us);
    }
    // User space per connection against the server's RSS before the first connection.
    let idle = *rss_idle.get_or_insert(t.rss_bytes);
    t.user_bytes_per_conn = if t.connections > 0 {
        t.rss_bytes.saturating_sub(idle) as f64 / t.connections as f64
    } else {
        0.0
    };
    t
}

fn record(seen: &mut Seen, procs: Vec<Sample>, roles: &BTreeMap<u32, String>, total: &Sample) {
    for s in &procs {
        if !seen.pids.contains(&s.pid) {
            seen.pids.push(s.pid);
        }
        let p = seen.peaks.entry(s.pid).or_default();
        p.role = roles.get(&s.pid).cloned().unwrap_or_else(|| "?".into());
        p.connections_max = p.connections_max.max(s.connections);
        p.rss_max = p.rss_max.max(s.rss_bytes);
        let cpu = s.cpu_user_seconds_total + s.cpu_sys_seconds_total;
        p.cpu_first.get_or_insert(cpu);
        p.cpu_last = cpu;
        p.lag_p99_max = p.lag_p99_max.max(s.lag_p99_us);
        p.lag_max = p.lag_max.max(s.lag_max_us);
    }
    seen.lag_max_window = seen.lag_max_window.max(total.lag_max_us);
    seen.peak_connects = seen.peak_connects.max(total.connects_per_s);
    seen.latest = procs;
}

fn line(live: &Live, t: &Sample, floods: Option<&Floods>) -> String {
    let client = floods.map_or("-".into(), |f| {
        format!(
            "open {:>8} failed {:>5} recv {:>9}",
            f.open(),
            f.failed(),
            f.messages()
        )
    });
    format!(
        "{:>5.0}s | {client} | server: conns {:>8} conn+/s {:>6.0} out/s {:>7.0} RSS {:>7.1} MB CPU {:>4.0}% lag max {:>6.1} ms | machine {:>3.0}%",
        live.t0.elapsed().as_secs_f64(),
        t.connections,
        t.connects_per_s,
        t.messages_out_per_s,
        t.rss_bytes as f64 / 1e6,
        (t.cpu_user + t.cpu_sys) * 100.0,
        t.lag_max_us as f64 / 1000.0,
        t.machine.cpu_total * 100.0 / t.machine.cpus.max(1) as f64,
    )
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long the supervisor may take to stop its children and nats-server.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// SIGTERM to the supervisor (it stops gateways, router and nats-server), then waits
/// until it has exited; seconds taken.
pub fn stop_supervisor(server: &ServerProcess) -> anyhow::Result<f64> {
    let pid = server.child.id();
    let t = Instant::now();
    // SAFETY: kill(2) on our child, not reaped yet (only `ServerProcess::drop` reaps it).
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    while t.elapsed() < STOP_TIMEOUT {
        if !alive(pid) {
            return Ok(t.elapsed().as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    anyhow::bail!("the supervisor (pid {pid}) did not stop within {STOP_TIMEOUT:?} of SIGTERM")
}

/// Whether `pid` runs (a zombie, exited but not reaped, does not).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

/// Direct children of `pid` (the supervisor's: router, gateways, nats-server).
pub fn children_of(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}
