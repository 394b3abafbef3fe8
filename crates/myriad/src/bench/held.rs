//! Live measurement shared by the scenarios: a flood held in a thread (its per-second
//! callback prints the live line and keeps running totals the scenario reads), a probe
//! of the servers' `/stats`, RSS and CPU, and the live log that goes into the report.
//!
//! Not here: what a scenario does with the numbers.

use crate::server_process::ServerProcess;
use hdrhistogram::Histogram;
use load::flood::stats::{hist_add, new_hist};
use load::flood::{FloodArgs, FloodSummary, FloodTick};
use observe::procfs::CpuTimes;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The live lines of one scenario: printed on stderr and kept for the report.
pub struct Live {
    pub tag: String,
    pub t0: Instant,
    pub lines: Mutex<Vec<String>>,
}

impl Live {
    pub fn new(tag: &str) -> Arc<Live> {
        let live = Arc::new(Live {
            tag: tag.to_string(),
            t0: Instant::now(),
            lines: Mutex::new(Vec::new()),
        });
        live.emit(
            "  time | client: open failed  recv/s  p99 lat | server: conns      RSS   CPU   out/s  conn+/s  conn-/s | machine CPU"
                .to_string(),
        );
        live
    }

    pub fn emit(&self, line: String) {
        eprintln!("{}: {line}", self.tag);
        // A poisoned lock only means a panicking writer: keep the lines anyway.
        let mut l = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        l.push(line);
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// One line from a flood tick (if any) and a server sample.
    pub fn line(&self, tick: Option<&FloodTick>, s: &ServerSample) {
        let client = match tick {
            Some(t) => format!(
                "{:>6} {:>6} {:>7} {:>8}",
                t.open,
                t.failed,
                t.messages,
                if t.lat_p99_us == 0 {
                    "-".to_string()
                } else {
                    format!("{:.2}ms", t.lat_p99_us as f64 / 1000.0)
                }
            ),
            None => format!("{:>6} {:>6} {:>7} {:>8}", "-", "-", "-", "-"),
        };
        self.emit(format!(
            "{:>5.0}s | {client} | {:>13} {:>6.1}MB {:>4.0}% {:>7.0} {:>8.0} {:>8.0} | {:>5.0}%",
            self.t0.elapsed().as_secs_f64(),
            s.connections,
            s.rss as f64 / 1e6,
            s.cpu_pct,
            s.out_per_s,
            s.connects_per_s,
            s.closes_per_s,
            s.machine_pct
        ));
    }
}

/// The servers' figures at one moment (summed over all servers).
#[derive(Clone, Debug, Default)]
pub struct ServerSample {
    pub connections: u64,
    pub rss: u64,
    /// CPU since the previous sample, percent of one core.
    pub cpu_pct: f64,
    pub out_per_s: f64,
    pub connects_per_s: f64,
    pub closes_per_s: f64,
    /// The whole machine's busy CPU since the previous sample, percent of all cores:
    /// shows when something else (a build) competes with the benchmark.
    pub machine_pct: f64,
    /// Running totals.
    pub messages_out: u64,
    pub connects: u64,
    pub closes: u64,
}

/// Shortest time between samples that rates are computed over, seconds.
const MIN_RATE_WINDOW_S: f64 = 0.25;

/// Samples servers; rates are since the previous sample.
pub struct Probe {
    pub servers: Vec<Arc<ServerProcess>>,
    last: Option<(Instant, f64, ServerSample)>,
    last_machine: CpuTimes,
}

fn machine_times() -> CpuTimes {
    observe::procfs::read_cpu_times().unwrap_or_default()
}

impl Probe {
    pub fn new(servers: Vec<Arc<ServerProcess>>) -> Probe {
        Probe {
            servers,
            last: None,
            last_machine: machine_times(),
        }
    }

    /// CPU seconds (user + system) of all servers so far.
    pub fn cpu(&self) -> f64 {
        self.servers
            .iter()
            .map(|s| {
                let (u, k) = s.cpu();
                u + k
            })
            .sum()
    }

    pub fn rss(&self) -> u64 {
        self.servers.iter().map(|s| s.rss()).sum()
    }

    pub fn sample(&mut self) -> ServerSample {
        let mut s = ServerSample::default();
        for server in &self.servers {
            let st = server.stats().unwrap_or(serde_json::Value::Null);
            let n = |k: &str| st[k].as_u64().unwrap_or(0);
            // The /stats request's own connection is one of them.
            s.connections += n("connections").saturating_sub(1);
            s.messages_out += n("messages_out");
            s.connects += n("connects");
            s.closes += n("closes");
            s.rss += server.rss();
        }
        let now = Instant::now();
        let cpu = self.cpu();
        if let Some((at, cpu0, prev)) = &self.last {
            let dt = now.duration_since(*at).as_secs_f64();
            if dt < MIN_RATE_WINDOW_S {
                // Too soon after the previous sample for rates to mean anything.
                return s;
            }
            s.cpu_pct = (cpu - cpu0) / dt * 100.0;
            s.out_per_s = s.messages_out.saturating_sub(prev.messages_out) as f64 / dt;
            s.connects_per_s = s.connects.saturating_sub(prev.connects) as f64 / dt;
            s.closes_per_s = s.closes.saturating_sub(prev.closes) as f64 / dt;
        }
        let m = machine_times();
        let cores = m.cores_busy_since(&self.last_machine).unwrap_or(0.0);
        s.machine_pct = cores * 100.0 / m.cpus.max(1) as f64;
        self.last_machine = m;
        self.last = Some((now, cpu, s.clone()));
        s
    }
}

/// Running totals of a held flood, updated once per second by its callback.
pub struct FloodState {
    pub open: AtomicU64,
    pub failed: AtomicU64,
    pub closed: AtomicU64,
    /// Messages received since the flood started.
    pub messages: AtomicU64,
    /// Ticks so far, and the last tick that carried messages.
    pub ticks: AtomicU64,
    pub last_busy_tick: AtomicU64,
    /// The servers' best second of accepted connections so far.
    pub peak_connects_per_s: AtomicU64,
    /// flood's busiest second so far, percent of one core (all its processes).
    pub peak_client_cpu: AtomicU64,
    /// Every latency since the last `take_hist`: exact percentiles over a bench step.
    pub hist: Mutex<Histogram<u64>>,
    /// Sum over ticks of the client's CPU (this process and flood's children), in
    /// hundredths of a percent of one core: a step's average is Δsum / Δticks.
    pub client_cpu_sum: AtomicU64,
}

impl Default for FloodState {
    fn default() -> Self {
        FloodState {
            open: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            messages: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
            last_busy_tick: AtomicU64::new(0),
            peak_connects_per_s: AtomicU64::new(0),
            peak_client_cpu: AtomicU64::new(0),
            hist: Mutex::new(new_hist()),
            client_cpu_sum: AtomicU64::new(0),
        }
    }
}

/// A flood running in a thread until stopped.
pub struct Held {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<anyhow::Result<FloodSummary>>,
    pub state: Arc<FloodState>,
}

impl Held {
    /// Starts `args` in a thread; each second a second thread prints a live line with
    /// the flood's tick and the servers' figures. The flood's callback only stores and
    /// forwards: asking a busy server for `/stats` there would stall the client's event
    /// loop and inflate the latencies it measures.
    pub fn start(args: FloodArgs, live: Arc<Live>, servers: Vec<Arc<ServerProcess>>) -> Held {
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(FloodState::default());
        let (tx, rx) = std::sync::mpsc::channel::<FloodTick>();
        let printer_state = state.clone();
        std::thread::spawn(move || {
            let mut probe = Probe::new(servers);
            probe.sample();
            // Ends when the flood thread drops its sender.
            while let Ok(mut tick) = rx.recv() {
                // Behind by several ticks (a slow /stats): print the latest only.
                while let Ok(newer) = rx.try_recv() {
                    tick = newer;
                }
                let s = probe.sample();
                printer_state
                    .peak_connects_per_s
                    .fetch_max(s.connects_per_s as u64, Ordering::Relaxed);
                live.line(Some(&tick), &s);
            }
        });
        let handle = {
            let (stop, state) = (stop.clone(), state.clone());
            std::thread::spawn(move || {
                load::flood::run_until(args, &stop, &mut |t| {
                    state.open.store(t.open, Ordering::Relaxed);
                    state.failed.store(t.failed, Ordering::Relaxed);
                    state.closed.store(t.closed, Ordering::Relaxed);
                    state.messages.fetch_add(t.messages, Ordering::Relaxed);
                    hist_add(
                        &mut state.hist.lock().unwrap_or_else(|e| e.into_inner()),
                        &t.hist,
                    );
                    state
                        .peak_client_cpu
                        .fetch_max((t.cpu_user + t.cpu_sys) as u64, Ordering::Relaxed);
                    state
                        .client_cpu_sum
                        .fetch_add(((t.cpu_user + t.cpu_sys) * 100.0) as u64, Ordering::Relaxed);
                    let n = state.ticks.fetch_add(1, Ordering::Relaxed) + 1;
                    if t.messages > 0 {
                        state.last_busy_tick.store(n, Ordering::Relaxed);
                    }
                    let _ = tx.send(t.clone());
                })
            })
        };
        Held {
            stop,
            handle,
            state,
        }
    }

    /// Waits until `want` connections are open or failed (or the flood ended, or
    /// `timeout`); returns how many are open.
    pub fn wait_open(&self, want: u64, timeout: Duration) -> u64 {
        let until = Instant::now() + timeout;
        while Instant::now() < until && !self.handle.is_finished() {
            let s = &self.state;
            if s.open.load(Ordering::Relaxed) + s.failed.load(Ordering::Relaxed) >= want {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.state.open.load(Ordering::Relaxed)
    }

    /// Waits until a whole tick that started after now carried no message (all
    /// deliveries landed), at most `max`.
    pub fn wait_quiet(&self, max: Duration) {
        let start_tick = self.state.ticks.load(Ordering::Relaxed);
        let until = Instant::now() + max;
        while Instant::now() < until && !self.handle.is_finished() {
            let ticks = self.state.ticks.load(Ordering::Relaxed);
            let busy = self.state.last_busy_tick.load(Ordering::Relaxed);
            // Tick start_tick+1 may straddle "now"; a later empty tick proves quiet.
            if ticks >= start_tick + 2 && busy < ticks {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn messages(&self) -> u64 {
        self.state.messages.load(Ordering::Relaxed)
    }

    /// The servers' best second of accepts seen by the live probe.
    pub fn peak_accepts(&self) -> u64 {
        self.state.peak_connects_per_s.load(Ordering::Relaxed)
    }

    /// flood's busiest second, percent of one core (over its processes).
    pub fn peak_client_cpu(&self) -> u64 {
        self.state.peak_client_cpu.load(Ordering::Relaxed)
    }

    pub fn open(&self) -> u64 {
        self.state.open.load(Ordering::Relaxed)
    }

    /// A mark for [`Held::client_cpu_since`].
    pub fn cpu_mark(&self) -> (u64, u64) {
        (
            self.state.client_cpu_sum.load(Ordering::Relaxed),
            self.state.ticks.load(Ordering::Relaxed),
        )
    }

    /// The client's average CPU (percent of one core) over the ticks since `mark`:
    /// flood's ticks cover this process (flood, msggen) and flood's child processes.
    pub fn client_cpu_since(&self, mark: (u64, u64)) -> f64 {
        let (sum, ticks) = self.cpu_mark();
        let n = ticks.saturating_sub(mark.1);
        if n == 0 {
            return 0.0;
        }
        sum.saturating_sub(mark.0) as f64 / 100.0 / n as f64
    }

    /// Every latency recorded since the previous call (or the start).
    pub fn take_hist(&self) -> Histogram<u64> {
        let mut h = self.state.hist.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *h, new_hist())
    }

    /// Closes every connection at once and returns the summary.
    pub fn finish(self) -> anyhow::Result<FloodSummary> {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }

    /// Waits for the flood to end by itself.
    pub fn join(self) -> anyhow::Result<FloodSummary> {
        self.handle
            .join()
            .map_err(|_| anyhow::anyhow!("flood thread panicked"))?
    }
}

/// CPU seconds this process (flood and msggen threads, the client side) used so far.
pub fn client_cpu() -> f64 {
    let (u, s) = host::sys::cpu_times();
    (u + s).as_secs_f64()
}

/// Loopback source addresses of the scenarios' floods: one address has ~28,000 ports,
/// and the TIME_WAIT sockets of the previous scenario (60 s) would leave too few of them
/// for the next 15,000 connects.
pub const SOURCES: &str = "127.0.0.2-127.0.0.9";

/// Flood flags of the scenarios: as fast as possible, quiet (the live line replaces
/// flood's own), from [`SOURCES`] when the target is loopback, bounded by `max_time`.
pub fn flood_args(
    urls: Vec<String>,
    n: u64,
    transport: load::flood::Transport,
    csv: Option<std::path::PathBuf>,
) -> FloodArgs {
    let urls_loopback = urls.iter().all(|u| u.contains("://127."));
    FloodArgs {
        urls,
        connections: n,
        rate: 0.0,
        transport,
        csv,
        quiet: true,
        max_time: 600.0,
        ca: super::context::tls_ca(),
        h2: super::context::h2_streams().is_some(),
        streams_per_connection: super::context::h2_streams().unwrap_or(1),
        sources: if urls_loopback {
            vec![SOURCES.to_string()]
        } else {
            Vec::new()
        },
        ..Default::default()
    }
}

/// `http://ADDR/sub/%d` of a server (`https://` with `--tls`).
pub fn sub_url(server: &ServerProcess) -> String {
    format!("{}/sub/%d", base_url(server))
}

/// `http://ADDR` of a server (`https://` with `--tls`).
pub fn base_url(server: &ServerProcess) -> String {
    format!("{}://{}", super::context::scheme(), server.addr)
}

/// Prints a line per second for `secs` with no flood running (e.g. after everyone
/// left); returns when `done()` is true or the time is up.
pub fn watch(
    live: &Live,
    probe: &mut Probe,
    secs: f64,
    done: &mut dyn FnMut(&ServerSample) -> bool,
) {
    let until = Instant::now() + Duration::from_secs_f64(secs.max(0.0));
    loop {
        let s = probe.sample();
        live.line(None, &s);
        if done(&s) || Instant::now() >= until {
            return;
        }
        let left = until.saturating_duration_since(Instant::now());
        std::thread::sleep(left.min(Duration::from_secs(1)));
    }
}

/// `POST path` with `body` to a server; returns status and body.
pub fn post(server: &ServerProcess, path: &str, body: &[u8]) -> anyhow::Result<(u16, String)> {
    use std::io::{Read, Write};
    let roots = tls::Roots::CaFile(super::context::tls_ca().unwrap_or_default());
    let mut s =
        load::dial::Dialer::new(&base_url(server), &roots)?.connect(Duration::from_secs(30))?;
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    s.write_all(body)?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|x| x.1).unwrap_or_default();
    Ok((status, body.to_string()))
}
