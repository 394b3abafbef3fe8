//! How long runnable threads waited for a CPU, from each thread's
//! `/proc/<pid>/task/<tid>/schedstat` (time run, time waiting on a run queue, runs).
//! On this box ~55 server processes and ~56 load processes share two vCPUs: past its
//! median, a message's latency is mostly this wait, paid once per hop (the publisher,
//! the gateway's loop and link, nats-server, the router, the other gateway, the
//! client). The report gives it per phase so that a tail can be told from a queue in
//! myriad, with the CPU each group ran — and the rest of the machine's, which on this
//! box includes its own monitor (busier as open files grow).

use observe::procfs::CpuTimes;
use std::collections::HashMap;

/// CPU time, run-queue wait and runs summed over the threads of one group of
/// processes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Wait {
    pub run_ns: u64,
    pub wait_ns: u64,
    pub runs: u64,
}

/// The server's threads (the supervisor and everything it started: router, gateways,
/// nats-server) and the load's (this process and its other descendants: the floods'
/// drones, msggen), and every other thread of the machine (kernel threads too).
#[derive(Clone, Copy, Debug, Default)]
pub struct Waits {
    pub server: Wait,
    pub load: Wait,
    pub other: Wait,
}

/// What every thread of the server (processes under `server_root`) and of the load
/// (the rest under this process) has waited so far.
fn read(server_root: u32) -> Waits {
    let parents = parents();
    let me = std::process::id();
    let mut waits = Waits::default();
    for &pid in parents.keys() {
        let group = if descends(pid, server_root, &parents) {
            &mut waits.server
        } else if descends(pid, me, &parents) {
            &mut waits.load
        } else {
            &mut waits.other
        };
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let path = task.path().join("schedstat");
            if let Some((run_ns, wait_ns, runs)) = std::fs::read_to_string(path)
                .ok()
                .and_then(|s| parse_schedstat(&s))
            {
                group.run_ns += run_ns;
                group.wait_ns += wait_ns;
                group.runs += runs;
            }
        }
    }
    waits
}

impl Wait {
    /// Mean wait per run (ms) and the mean number of threads waiting, between
    /// `before` and `self`, `secs` apart. None without runs (a thread that exited
    /// took its counts with it, so the sums may also shrink: then None too).
    fn since(&self, before: &Wait, secs: f64) -> Option<(f64, f64)> {
        let wait = self.wait_ns.checked_sub(before.wait_ns)?;
        let runs = self.runs.checked_sub(before.runs).filter(|&r| r > 0)?;
        Some((
            wait as f64 / runs as f64 / 1e6,
            wait as f64 / 1e9 / secs.max(1e-3),
        ))
    }
}

/// A stretch of the run (holding, a phase): the reads at its start and end.
pub struct Window {
    server_root: u32,
    start: Waits,
    machine: Option<CpuTimes>,
    at: std::time::Instant,
}

/// What a finished [`Window`] saw.
pub struct Stretch {
    /// Threads' wait for a CPU, server / load ([`describe`]).
    pub wait: String,
    /// CPU of server / load / the rest of the machine ([`cpu`]).
    pub groups: String,
    /// The same as numbers, percent of a core each.
    pub shares: Shares,
    /// The whole machine's busy time, every group and the kernel's softirqs
    /// together. None where `/proc/stat` was not readable.
    pub machine: Option<Machine>,
    pub secs: f64,
}

/// CPU of each group over a stretch, percent of one core.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Shares {
    pub server: f64,
    pub load: f64,
    pub other: f64,
}

/// The whole machine over a stretch, percent of one core.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Machine {
    /// Not idle (steal counts: time the box did not have).
    pub busy: f64,
    /// What the box has: 100 × CPUs.
    pub of: f64,
}

impl Window {
    pub fn start(server_root: u32) -> Window {
        Window {
            server_root,
            start: read(server_root),
            machine: observe::procfs::read_cpu_times().ok(),
            at: std::time::Instant::now(),
        }
    }

    pub fn finish(self) -> Stretch {
        let (end, secs) = (read(self.server_root), self.at.elapsed().as_secs_f64());
        let machine_end = observe::procfs::read_cpu_times().ok();
        Stretch {
            wait: describe(&self.start, &end, secs),
            groups: cpu(&self.start, &end, secs),
            shares: shares(&self.start, &end, secs),
            machine: self.machine.zip(machine_end).and_then(|(a, b)| {
                Some(Machine {
                    busy: b.cores_busy_since(&a)? * 100.0,
                    of: b.cpus.max(1) as f64 * 100.0,
                })
            }),
            secs,
        }
    }
}

/// The CPU each group ran between `before` and `after`, `secs` apart, percent of
/// a core: server / load / the rest of the machine. A short-lived process that
/// ended in between took its time with it (then a group may read low).
fn cpu(before: &Waits, after: &Waits, secs: f64) -> String {
    let s = shares(before, after, secs);
    format!(
        "{:.0} % / {:.0} % / {:.0} % of a core",
        s.server, s.load, s.other
    )
}

fn shares(before: &Waits, after: &Waits, secs: f64) -> Shares {
    let pct = |a: &Wait, b: &Wait| {
        let ns = a.run_ns.saturating_sub(b.run_ns);
        ns as f64 / 1e9 / secs.max(1e-3) * 100.0
    };
    Shares {
        server: pct(&after.server, &before.server),
        load: pct(&after.load, &before.load),
        other: pct(&after.other, &before.other),
    }
}

/// The report's text for `after` against `before`, `secs` apart: per run, server
/// threads then load threads, and how many of each waited on average.
fn describe(before: &Waits, after: &Waits, secs: f64) -> String {
    match (
        after.server.since(&before.server, secs),
        after.load.since(&before.load, secs),
    ) {
        (Some((server, server_n)), Some((load, load_n))) => format!(
            "{server:.2} ms / {load:.2} ms per run ({server_n:.1} / {load_n:.1} threads waiting on average)"
        ),
        _ => "— (no schedstat)".into(),
    }
}

/// `time run (ns)`, `time waiting (ns)`, `runs`.
fn parse_schedstat(s: &str) -> Option<(u64, u64, u64)> {
    let mut fields = s.split_ascii_whitespace().map(str::parse);
    let run = fields.next()?.ok()?;
    let wait = fields.next()?.ok()?;
    let runs = fields.next()?.ok()?;
    Some((run, wait, runs))
}

/// pid → parent pid, for every process. Not `c1m_watch::children_of` walked down:
/// a process's `children` file lists only one thread's children, and the floods'
/// drones are started from the bench's flood threads.
fn parents() -> HashMap<u32, u32> {
    let mut parents = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return parents;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        if let Ok(stat) = observe::procfs::read_proc_stat(pid) {
            parents.insert(pid, stat.ppid);
        }
    }
    parents
}

/// Whether `pid` is `root` or below it.
fn descends(mut pid: u32, root: u32, parents: &HashMap<u32, u32>) -> bool {
    for _ in 0..64 {
        if pid == root {
            return true;
        }
        match parents.get(&pid) {
            Some(&p) if p != 0 && p != pid => pid = p,
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_gives_the_wait_and_the_runs() {
        assert_eq!(
            parse_schedstat("191238748 2129054536 477\n"),
            Some((191238748, 2129054536, 477))
        );
        assert_eq!(parse_schedstat("12 x 3"), None);
    }

    #[test]
    fn a_wait_per_run_is_the_difference_over_the_runs() {
        let before = Wait {
            run_ns: 0,
            wait_ns: 1_000_000,
            runs: 10,
        };
        let after = Wait {
            run_ns: 500_000_000,
            wait_ns: 5_000_000,
            runs: 18,
        };
        // 4 ms over 8 runs, and over 2 s on average 0.002 threads waiting.
        assert_eq!(after.since(&before, 2.0), Some((0.5, 0.002)));
        assert_eq!(before.since(&after, 2.0), None);
        assert_eq!(after.since(&after, 2.0), None);
        // 0.5 s of CPU over 2 s in the load: a quarter of a core.
        let (b, a) = (
            Waits {
                load: before,
                ..Waits::default()
            },
            Waits {
                load: after,
                ..Waits::default()
            },
        );
        assert_eq!(cpu(&b, &a, 2.0), "0 % / 25 % / 0 % of a core");
    }

    /// A child that spins is this process's descendant, counted as load, with
    /// its runs; a server root that is the child puts it in the server's group.
    #[test]
    fn the_groups_follow_the_process_tree() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let as_server = read(child.id());
        let as_load = read(u32::MAX);
        child.wait().unwrap();
        assert!(as_server.server.runs > 0, "{as_server:?}");
        assert!(as_server.server.run_ns > 0, "{as_server:?}");
        // pid 1 and the kernel's threads are the rest of the machine.
        assert!(as_load.other.runs > 0, "{as_load:?}");
        assert_eq!(as_load.server, Wait::default());
        // Read later, the load now holds this process's runs and the child's.
        assert!(
            as_load.load.runs >= as_server.load.runs + as_server.server.runs,
            "{as_server:?} then {as_load:?}"
        );
    }
}
