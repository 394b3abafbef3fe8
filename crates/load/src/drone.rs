//! `myriad drone` (SPEC G4): a flood agent with a control port, so load can come from
//! many machines (or several agents on one) and be steered at run time.
//!
//! Control protocol: TCP, one command per line, one JSON object per reply line.
//!
//! | command | effect |
//! |---|---|
//! | `status` | `{"ok":true,"state":"idle"\|"running","urls":[..],"n":..,"rate":..,"transport":..,"runs":k,"active_urls":[..],"active_n":..,"tick":{..},"summary":{..}}` (`urls`, `n`, ...: the next start; `active_*`: the current run) |
//! | `set url URL [URL..]` | targets for the next start |
//! | `set n N` / `set rate R` / `set transport T` / `set hold S` | settings for the next start |
//! | `start`, `restart` | stop the running flood (if any), start one with the settings |
//! | `stop` | stop the running flood (closes its connections) |
//! | `quit` | stop and end the drone |
//!
//! Errors reply `{"ok":false,"error":"..."}`. Not here: authentication — bind the
//! control port to a trusted interface.

use crate::flood::{self, FloodArgs, FloodSummary, FloodTick, Transport};
use anyhow::Context;
use clap::ValueEnum;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest control line accepted.
const MAX_LINE: usize = 64 * 1024;

/// Flags of `myriad drone`. The flood flags are the initial settings; with a --url the
/// drone starts flooding at once, without one it waits for `set url` and `start`.
#[derive(clap::Args, Clone, Debug)]
pub struct DroneArgs {
    /// Control address (line protocol, see the module doc).
    #[arg(long, default_value = "127.0.0.1:7001")]
    pub control: String,
    /// The drone ends by itself after this many seconds.
    #[arg(long, default_value_t = 3600.0)]
    pub lifetime: f64,
    #[command(flatten)]
    pub flood: FloodArgs,
}

#[derive(Default)]
struct State {
    /// Settings for the next start.
    settings: FloodArgs,
    /// Settings of the flood running now (or last run).
    active: Option<FloodArgs>,
    running: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
    runs: u64,
    tick: Option<FloodTick>,
    summary: Option<FloodSummary>,
    error: Option<String>,
    quit: bool,
}

/// A drone bound to its control port.
pub struct Drone {
    listener: TcpListener,
    state: Arc<Mutex<State>>,
    lifetime: Duration,
}

impl Drone {
    /// Bind the control port (use port 0 in tests, then [`Drone::addr`]).
    pub fn bind(args: DroneArgs) -> anyhow::Result<Drone> {
        let listener = TcpListener::bind(&args.control)
            .with_context(|| format!("cannot bind control port {}", args.control))?;
        let start = !args.flood.urls.is_empty();
        let drone = Drone {
            listener,
            state: Arc::new(Mutex::new(State {
                settings: args.flood,
                ..Default::default()
            })),
            lifetime: Duration::from_secs_f64(args.lifetime.max(0.0)),
        };
        if start {
            start_flood(&drone.state);
        }
        Ok(drone)
    }

    pub fn addr(&self) -> SocketAddr {
        // A bound listener always has a local address.
        self.listener.local_addr().expect("bound listener")
    }

    /// Serve control connections until `quit`, Ctrl-C or the lifetime ends.
    pub fn run(self) -> anyhow::Result<()> {
        self.listener.set_nonblocking(true)?;
        let end = std::time::Instant::now() + self.lifetime;
        loop {
            if lock(&self.state).quit
                || host::sys::interrupted()
                || std::time::Instant::now() >= end
            {
                break;
            }
            match self.listener.accept() {
                Ok((sock, _)) => {
                    let state = self.state.clone();
                    std::thread::spawn(move || {
                        let _ = serve_client(sock, &state);
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => return Err(e).context("control accept"),
            }
        }
        stop_flood(&self.state);
        Ok(())
    }
}

/// `myriad drone`.
pub fn run(args: DroneArgs) -> anyhow::Result<()> {
    host::sys::catch_interrupt();
    let drone = Drone::bind(args)?;
    eprintln!("drone: control on {} (commands: status, set url|n|rate|transport|hold, start, restart, stop, quit)", drone.addr());
    drone.run()
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    // A panicking flood thread must not take the control port down with it.
    state.lock().unwrap_or_else(|p| p.into_inner())
}

fn serve_client(sock: TcpStream, state: &Arc<Mutex<State>>) -> anyhow::Result<()> {
    sock.set_nonblocking(false)?;
    let mut out = sock.try_clone()?;
    let mut reader = BufReader::new(sock);
    let mut line = String::new();
    loop {
        line.clear();
        if (&mut reader).take(MAX_LINE as u64).read_line(&mut line)? == 0 {
            return Ok(());
        }
        let reply = match handle_command(line.trim(), state) {
            Ok(v) => v,
            Err(e) => json!({"ok": false, "error": format!("{e:#}")}),
        };
        writeln!(out, "{reply}")?;
    }
}

/// Apply one control command; the reply object.
fn handle_command(line: &str, state: &Arc<Mutex<State>>) -> anyhow::Result<Value> {
    let mut words = line.split_whitespace();
    match (words.next(), words.next()) {
        (Some("status"), _) => Ok(status(&lock(state))),
        (Some("set"), Some(key)) => {
            let rest: Vec<&str> = words.collect();
            let value = rest
                .first()
                .copied()
                .with_context(|| format!("set {key}: missing value"))?;
            let mut st = lock(state);
            let s = &mut st.settings;
            match key {
                "url" => s.urls = rest.iter().map(|u| u.to_string()).collect(),
                "n" => s.connections = value.parse().context("set n: expected a number")?,
                "rate" => s.rate = value.parse().context("set rate: expected a number")?,
                "hold" => s.hold = Some(value.parse().context("set hold: expected seconds")?),
                "transport" => {
                    s.transport = Transport::from_str(value, true)
                        .map_err(|e| anyhow::anyhow!("set transport: {e}"))?
                }
                _ => anyhow::bail!("unknown setting {key:?} (url, n, rate, transport, hold)"),
            }
            Ok(json!({"ok": true}))
        }
        (Some("start" | "restart"), _) => {
            stop_flood(state);
            if lock(state).settings.urls.is_empty() {
                anyhow::bail!("no target: send `set url URL` first");
            }
            start_flood(state);
            Ok(json!({"ok": true}))
        }
        (Some("stop"), _) => {
            stop_flood(state);
            Ok(json!({"ok": true}))
        }
        (Some("quit"), _) => {
            stop_flood(state);
            lock(state).quit = true;
            Ok(json!({"ok": true}))
        }
        _ => anyhow::bail!("unknown command {line:?} (status, set, start, restart, stop, quit)"),
    }
}

fn status(st: &State) -> Value {
    let running = st.running.as_ref().is_some_and(|(_, h)| !h.is_finished());
    let s = &st.settings;
    json!({
        "ok": true,
        "state": if running { "running" } else { "idle" },
        "urls": s.urls,
        "n": s.connections,
        "rate": s.rate,
        "transport": s.transport,
        "runs": st.runs,
        "active_urls": st.active.as_ref().map(|a| a.urls.clone()),
        "active_n": st.active.as_ref().map(|a| a.connections),
        "tick": st.tick.as_ref().map(|t| json!({
            "elapsed_s": t.elapsed.as_secs_f64(), "open": t.open, "failed": t.failed, "closed": t.closed,
            "messages": t.messages, "bytes": t.bytes, "lat_p50_us": t.lat_p50_us, "lat_p99_us": t.lat_p99_us,
            "lat_max_us": t.lat_max_us, "rss_bytes": t.rss_bytes,
        })),
        "summary": st.summary,
        "error": st.error,
    })
}

fn start_flood(state: &Arc<Mutex<State>>) {
    let mut st = lock(state);
    let mut args = st.settings.clone();
    // A drone's runs are steered over the control port: no stdout JSON, no CSV clash.
    args.json = false;
    args.csv = None;
    let stop = Arc::new(AtomicBool::new(false));
    let (flag, shared) = (stop.clone(), state.clone());
    st.runs += 1;
    st.active = Some(args.clone());
    st.tick = None;
    st.error = None;
    let handle = std::thread::spawn(move || {
        let mut on_tick = |t: &FloodTick| lock(&shared).tick = Some(t.clone());
        let result = flood::run_until(args, &flag, &mut on_tick);
        let mut st = lock(&shared);
        match result {
            Ok(s) => st.summary = Some(s),
            Err(e) => st.error = Some(format!("{e:#}")),
        }
    });
    st.running = Some((stop, handle));
}

fn stop_flood(state: &Arc<Mutex<State>>) {
    let running = lock(state).running.take();
    if let Some((stop, handle)) = running {
        stop.store(true, Ordering::Relaxed);
        let _ = handle.join();
    }
}

/// Send one control command to a drone and read its reply (used by `fleet` and tests).
pub fn send(addr: &str, command: &str) -> anyhow::Result<Value> {
    let sock_addr: SocketAddr = addr
        .parse()
        .with_context(|| format!("bad drone address {addr:?}"))?;
    let mut sock = TcpStream::connect_timeout(&sock_addr, Duration::from_secs(2))
        .with_context(|| format!("drone {addr}"))?;
    sock.set_read_timeout(Some(Duration::from_secs(60)))?;
    writeln!(sock, "{command}")?;
    let mut line = String::new();
    BufReader::new(sock)
        .read_line(&mut line)
        .with_context(|| format!("drone {addr}: no reply"))?;
    serde_json::from_str(&line).with_context(|| format!("drone {addr}: bad reply {line:?}"))
}
