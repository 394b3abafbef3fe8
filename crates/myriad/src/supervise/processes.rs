//! Every process of a supervised server in one table, for the supervisor's admin
//! listener: `/stats` lists each child (pid, role, connections, CPU, RSS, loop lag,
//! restarts) with totals, and the children's [`Sample`]s go to the monitor, which
//! lists them in `processes` and labels them in `/metrics`. Gateways are read from
//! their own admin `/stats`, and so is the router (it holds no connections and runs
//! no event loop); a child whose admin address is not known yet is read from `/proc`
//! (CPU and RSS).

use super::child::{Member, Role};
use super::lock;
use observe::sample::Sample;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A gateway's admin answer may take this long before its row is left empty.
const FETCH_TIMEOUT: Duration = Duration::from_millis(500);
/// `/stats` and the monitor's sampler both ask within a second: one fetch serves both.
const FRESH: Duration = Duration::from_millis(200);

/// One child as last read.
#[derive(Clone)]
struct Row {
    role: Role,
    restarts: u32,
    sample: Sample,
}

pub struct Table {
    members: Arc<Mutex<Vec<Member>>>,
    cache: Mutex<Option<(Instant, Vec<Row>)>>,
    /// The router's last CPU reading (pid, user ticks, system ticks, when), for rates.
    cpu: Mutex<HashMap<u32, (u64, u64, Instant)>>,
}

impl Table {
    pub fn new(members: Arc<Mutex<Vec<Member>>>) -> Arc<Table> {
        Arc::new(Table {
            members,
            cache: Mutex::new(None),
            cpu: Mutex::new(HashMap::new()),
        })
    }

    /// For the monitor's `set_children`: every child's sample.
    pub fn samples_fn(self: &Arc<Self>) -> observe::monitor::ChildSamples {
        let table = self.clone();
        Arc::new(move || table.rows().into_iter().map(|r| r.sample).collect())
    }

    /// For the monitor's `extra`: the process table with totals.
    pub fn stats_fn(self: &Arc<Self>) -> observe::monitor::ExtraStats {
        let table = self.clone();
        Arc::new(move || table.stats())
    }

    fn stats(&self) -> serde_json::Value {
        let rows = self.rows();
        let list: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                let s = &r.sample;
                serde_json::json!({
                    "pid": s.pid,
                    "role": r.role.name(),
                    "connections": s.connections,
                    "cpu": s.cpu_user + s.cpu_sys,
                    "rss_bytes": s.rss_bytes,
                    "lag_p99_us": s.lag_p99_us,
                    "lag_max_us": s.lag_max_us,
                    "restarts": r.restarts,
                })
            })
            .collect();
        let sum = |f: fn(&Sample) -> f64| rows.iter().map(|r| f(&r.sample)).sum::<f64>();
        serde_json::json!({
            "supervisor": std::process::id(),
            "gateways": rows.iter().filter(|r| matches!(r.role, Role::Gateway(_))).count(),
            "connections": sum(|s| s.connections as f64) as u64,
            "cpu": sum(|s| s.cpu_user + s.cpu_sys),
            "rss_bytes": sum(|s| s.rss_bytes as f64) as u64,
            "lag_max_us": rows.iter().map(|r| r.sample.lag_max_us).max().unwrap_or(0),
            "processes": list,
        })
    }

    fn rows(&self) -> Vec<Row> {
        let mut cache = lock(&self.cache);
        if let Some((at, rows)) = cache.as_ref() {
            if at.elapsed() < FRESH {
                return rows.clone();
            }
        }
        // Copy what is needed and let the supervisor's restart loop have the lock back
        // before any network round trip.
        let children: Vec<(Role, u32, u32, Option<SocketAddr>)> = lock(&self.members)
            .iter()
            .map(|m| (m.role, m.restarts, m.pid(), m.admin_addr()))
            .collect();
        // All children at once: one after another, 50 gateways on a loaded machine
        // took longer than the second between two samples (`bench c1m`).
        let rows: Vec<Row> = std::thread::scope(|scope| {
            let fetches: Vec<_> = children
                .into_iter()
                .map(|(role, restarts, pid, admin)| {
                    let fetch = admin.map(|addr| scope.spawn(move || fetch_sample(addr)));
                    (role, restarts, pid, fetch)
                })
                .collect();
            fetches
                .into_iter()
                .map(|(role, restarts, pid, fetch)| {
                    let sample = match fetch {
                        Some(f) => f.join().ok().flatten().unwrap_or_else(|| empty(pid)),
                        None => self.proc_sample(pid),
                    };
                    Row {
                        role,
                        restarts,
                        sample,
                    }
                })
                .collect()
        });
        *cache = Some((Instant::now(), rows.clone()));
        rows
    }

    /// CPU (as a rate since the last reading) and RSS of a process without an admin
    /// listener.
    fn proc_sample(&self, pid: u32) -> Sample {
        let mut sample = empty(pid);
        let Ok(stat) = observe::procfs::read_proc_stat(pid) else {
            return sample;
        };
        let hz = observe::procfs::clock_ticks() as f64;
        sample.threads = stat.threads;
        sample.rss_bytes = stat.rss_pages * observe::procfs::page_size();
        sample.cpu_user_seconds_total = stat.utime_ticks as f64 / hz;
        sample.cpu_sys_seconds_total = stat.stime_ticks as f64 / hz;
        let now = Instant::now();
        let mut cpu = lock(&self.cpu);
        if let Some((u, s, at)) = cpu.insert(pid, (stat.utime_ticks, stat.stime_ticks, now)) {
            let secs = now.duration_since(at).as_secs_f64().max(1e-3);
            sample.cpu_user = stat.utime_ticks.saturating_sub(u) as f64 / hz / secs;
            sample.cpu_sys = stat.stime_ticks.saturating_sub(s) as f64 / hz / secs;
        }
        sample
    }
}

fn empty(pid: u32) -> Sample {
    Sample {
        pid,
        ..Sample::default()
    }
}

/// The `sample` of a gateway's admin `/stats`, with its live connection count.
fn fetch_sample(addr: SocketAddr) -> Option<Sample> {
    let mut s = TcpStream::connect_timeout(&addr, FETCH_TIMEOUT).ok()?;
    s.set_read_timeout(Some(FETCH_TIMEOUT)).ok()?;
    s.write_all(b"GET /stats HTTP/1.1\r\nHost: supervisor\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let body = text.split_once("\r\n\r\n")?.1;
    let doc: serde_json::Value = serde_json::from_str(body).ok()?;
    let mut sample: Sample = serde_json::from_value(doc.get("sample")?.clone()).ok()?;
    // The live count, not the last one-second sample's.
    if let Some(n) = doc["extra"]["connections"].as_u64() {
        sample.connections = n;
    }
    Some(sample)
}
