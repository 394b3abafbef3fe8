//! Every process of a supervised server in one table, for the supervisor's admin
//! listener: `/stats` lists each child (pid, role, connections, CPU, RSS, loop lag,
//! restarts) with totals, and the children's [`Sample`]s go to the monitor, which
//! lists them in `processes` and labels them in `/metrics`; the totals (connections,
//! connects, closes, deliveries) are what a bench reads of the whole server. Gateways are read from
//! their own admin `/sample`, and so is the router (it holds no connections and runs
//! no event loop); a child whose admin address is not known yet is read from `/proc`
//! (CPU and RSS). A gateway too busy to answer in time (50 gateways at load 100+ while
//! holding a million) keeps its row: CPU and RSS from `/proc`, connections and lag from
//! its last answer, and `stale_ms` saying how old that answer is — an empty row there
//! made `bench c1m` read 0 connections and no memory at the moment that mattered.

use super::child::{Member, Role};
use super::lock;
use observe::sample::Sample;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A gateway's admin answer may take this long before its row falls back to `/proc`
/// and its last answer.
const FETCH_TIMEOUT: Duration = Duration::from_millis(800);
/// `/stats` and the monitor's sampler both ask within a second: one fetch serves both.
const FRESH: Duration = Duration::from_millis(200);
/// A last answer older than this is dropped (its child is gone or restarted).
const FORGET_ANSWER: Duration = Duration::from_secs(600);

/// One child as last read.
#[derive(Clone)]
struct Row {
    role: Role,
    /// Its admin listener, where its own `/stats` (and a router's presence) is.
    admin: Option<SocketAddr>,
    restarts: u32,
    sample: Sample,
    /// How old the answer behind `connections` and lag is (0: answered just now).
    stale: Duration,
}

pub struct Table {
    members: Arc<Mutex<Vec<Member>>>,
    cache: Mutex<Option<(Instant, Vec<Row>)>>,
    /// The router's last CPU reading (pid, user ticks, system ticks, when), for rates.
    cpu: Mutex<HashMap<u32, (u64, u64, Instant)>>,
    /// Each child's last admin answer, for when it does not answer in time.
    answered: Mutex<HashMap<u32, (Instant, Sample)>>,
}

impl Table {
    pub fn new(members: Arc<Mutex<Vec<Member>>>) -> Arc<Table> {
        Arc::new(Table {
            members,
            cache: Mutex::new(None),
            cpu: Mutex::new(HashMap::new()),
            answered: Mutex::new(HashMap::new()),
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
                    "admin": r.admin.map(|a| a.to_string()),
                    "connections": s.connections,
                    "cpu": s.cpu_user + s.cpu_sys,
                    "rss_bytes": s.rss_bytes,
                    "lag_p99_us": s.lag_p99_us,
                    "lag_max_us": s.lag_max_us,
                    "restarts": r.restarts,
                    "stale_ms": r.stale.as_millis() as u64,
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
            // Since each child's start (a restarted child counts from 0 again).
            "connects": rows.iter().map(|r| r.sample.connects_total).sum::<u64>(),
            "closes": rows.iter().map(|r| r.sample.closes_total).sum::<u64>(),
            "messages_out": rows.iter().map(|r| r.sample.messages_out_total).sum::<u64>(),
            "lag_max_us": rows.iter().map(|r| r.sample.lag_max_us).max().unwrap_or(0),
            "stale_max_ms": rows.iter().map(|r| r.stale.as_millis() as u64).max().unwrap_or(0),
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
                    (role, restarts, pid, admin, fetch)
                })
                .collect();
            fetches
                .into_iter()
                .map(|(role, restarts, pid, admin, fetch)| {
                    let answer = fetch.and_then(|f| f.join().ok().flatten());
                    let (sample, stale) = match answer {
                        Some(sample) => {
                            lock(&self.answered).insert(pid, (Instant::now(), sample.clone()));
                            (sample, Duration::ZERO)
                        }
                        None => self.unanswered(pid),
                    };
                    Row {
                        role,
                        admin,
                        restarts,
                        sample,
                        stale,
                    }
                })
                .collect()
        });
        *cache = Some((Instant::now(), rows.clone()));
        rows
    }

    /// A child that did not answer (or has no admin listener): CPU and RSS from
    /// `/proc`, the rest from its last answer if it ever gave one.
    fn unanswered(&self, pid: u32) -> (Sample, Duration) {
        let now = self.proc_sample(pid);
        let mut answered = lock(&self.answered);
        // A restarted child has a new pid; forget answers of pids no longer read.
        answered.retain(|_, (at, _)| at.elapsed() < FORGET_ANSWER);
        match answered.get(&pid) {
            Some((at, last)) => {
                let sample = Sample {
                    pid,
                    cpu_user: now.cpu_user,
                    cpu_sys: now.cpu_sys,
                    cpu_user_seconds_total: now.cpu_user_seconds_total,
                    cpu_sys_seconds_total: now.cpu_sys_seconds_total,
                    rss_bytes: now.rss_bytes,
                    threads: now.threads,
                    ..last.clone()
                };
                (sample, at.elapsed())
            }
            None => (now, Duration::ZERO),
        }
    }

    /// CPU (as a rate since the last reading) and RSS of a process from `/proc`.
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

/// A child's last sample from its admin `/sample`, with its live connection count.
fn fetch_sample(addr: SocketAddr) -> Option<Sample> {
    let mut s = TcpStream::connect_timeout(&addr, FETCH_TIMEOUT).ok()?;
    s.set_read_timeout(Some(FETCH_TIMEOUT)).ok()?;
    // `/sample`, not `/stats`: the child's `extra` (its link's and the router's
    // counters) is not needed here, and building it every second in 53 gateways was
    // about a third of what their admin threads cost.
    s.write_all(b"GET /sample HTTP/1.1\r\nHost: supervisor\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let body = text.split_once("\r\n\r\n")?.1;
    // The child's last sample with its live connection count.
    serde_json::from_str(body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A stand-in gateway admin listener: answers the first `/sample` with
    /// `connections` and then accepts without ever answering (a gateway too busy to
    /// reply in time). Any other first request is answered 404.
    fn admin_that_goes_quiet(connections: u64) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for (i, conn) in listener.incoming().take(4).enumerate() {
                let mut conn = conn.unwrap();
                let mut buf = [0u8; 1024];
                let n = conn.read(&mut buf).unwrap_or(0);
                if i == 0 && !buf[..n].starts_with(b"GET /sample ") {
                    let _ = write!(conn, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                } else if i == 0 {
                    let sample = Sample {
                        connections,
                        lag_max_us: 1234,
                        ..Sample::default()
                    };
                    let body = serde_json::to_string(&sample).unwrap();
                    let _ = write!(
                        conn,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                } else {
                    held.push(conn);
                }
            }
        });
        addr
    }

    #[test]
    fn a_gateway_that_stops_answering_keeps_its_row_from_proc_and_its_last_answer() {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let member = Member {
            role: Role::Gateway(0),
            child,
            started: Instant::now(),
            admin: Arc::new(Mutex::new(Some(admin_that_goes_quiet(7)))),
            ready: Arc::new(Mutex::new(true)),
            restarts: 0,
        };
        let members = Arc::new(Mutex::new(vec![member]));
        let table = Table::new(members.clone());

        let first = table.stats();
        assert_eq!(first["connections"], 7, "{first}");
        assert_eq!(first["processes"][0]["stale_ms"], 0, "{first}");

        std::thread::sleep(FRESH);
        let second = table.stats();
        let row = &second["processes"][0];
        assert_eq!(row["pid"], pid, "{second}");
        assert_eq!(
            second["connections"], 7,
            "the last answer's count: {second}"
        );
        assert_eq!(row["lag_max_us"], 1234, "{second}");
        assert!(
            row["rss_bytes"].as_u64().unwrap() > 0,
            "RSS from /proc: {second}"
        );
        assert!(
            row["stale_ms"].as_u64().unwrap() >= FRESH.as_millis() as u64,
            "{second}"
        );

        let mut members = lock(&members);
        let _ = members[0].child.kill();
        let _ = members[0].child.wait();
    }
}
