//! `myriad doctor` (SPEC G6): read the process and kernel limits that decide how many
//! connections this machine can hold, say which of them block a target N, and print
//! the exact lines to change. Reads only; it changes nothing.
//!
//! The figures assume the load client and the server run on this machine, as in the
//! benchmarks: N connections are 2·N sockets and 2·N file descriptors.

use crate::sys::{self, read_proc};
use anyhow::bail;
use serde::Serialize;

/// Kernel memory of one established TCP socket, bytes (measured here: ≈ 4.2 KB).
pub const KERNEL_BYTES_PER_SOCKET: u64 = 4_200;
/// User-space budget per connection on each side (flood and server), bytes.
pub const USER_BYTES_PER_CONN: u64 = 256;
/// Backlog values below this drop SYNs during connect storms.
pub const MIN_BACKLOG: u64 = 4096;
/// Descriptors each process keeps for itself (see `flood::FD_MARGIN`).
const FD_MARGIN: u64 = crate::flood::FD_MARGIN;

/// Flags of `myriad doctor`.
#[derive(clap::Args, Clone, Debug)]
pub struct DoctorArgs {
    /// The connection count to check for.
    #[arg(long, short = 'n', default_value_t = 1_000_000)]
    pub connections: u64,
    /// Print the checks as JSON.
    #[arg(long)]
    pub json: bool,
    /// Exit with an error when something blocks N.
    #[arg(long)]
    pub strict: bool,
}

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Level {
    Ok,
    Warn,
    Block,
}

/// One finding, with the change that fixes it (if any).
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub level: Level,
    pub name: &'static str,
    pub detail: String,
    /// Shell or config lines that fix it.
    pub fix: Vec<String>,
}

fn check(level: Level, name: &'static str, detail: String, fix: Vec<String>) -> Check {
    Check {
        level,
        name,
        detail,
        fix,
    }
}

fn num(path: &str) -> Option<u64> {
    read_proc(path).and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
}

fn nums(path: &str) -> Vec<u64> {
    read_proc(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect()
}

/// All checks for `n` connections.
pub fn checks(n: u64) -> Vec<Check> {
    let mut out = Vec::new();
    let (soft, hard) = sys::nofile();
    let per_proc = hard.saturating_sub(FD_MARGIN).max(1);
    let procs = n.div_ceil(per_proc);
    out.push(if hard > n + FD_MARGIN {
        check(Level::Ok, "nofile", format!("soft {soft}, hard {hard}: one process can hold {n}"), vec![])
    } else {
        check(
            Level::Warn,
            "nofile",
            format!(
                "soft {soft}, hard {hard}: one process holds at most {per_proc}; flood and serve shard over {procs} processes per side"
            ),
            vec![
                format!("ulimit -n {}", n + 10_000),
                format!("# /etc/security/limits.conf:  *  soft  nofile  {}", n + 10_000),
                format!("# /etc/security/limits.conf:  *  hard  nofile  {}", n + 10_000),
                format!("# systemd unit:  LimitNOFILE={}", n + 10_000),
            ],
        )
    });
    if let Some(nr_open) = num("/proc/sys/fs/nr_open") {
        out.push(if nr_open > n + FD_MARGIN {
            check(
                Level::Ok,
                "fs.nr_open",
                format!("{nr_open}: a process may be allowed {n} files"),
                vec![],
            )
        } else {
            check(
                Level::Warn,
                "fs.nr_open",
                format!("{nr_open}: no process can get {n} files (sharding still works)"),
                vec![format!("sysctl -w fs.nr_open={}", n + 10_000)],
            )
        });
    }
    let need_files = 2 * n + 10_000;
    if let Some(file_max) = num("/proc/sys/fs/file-max") {
        let used = num("/proc/sys/fs/file-nr").unwrap_or(0);
        out.push(if file_max >= need_files + used {
            check(Level::Ok, "fs.file-max", format!("{file_max} ({used} in use), need {need_files}"), vec![])
        } else {
            check(
                Level::Block,
                "fs.file-max",
                format!("{file_max} ({used} in use): {n} connections with client and server here need {need_files}"),
                vec![format!("sysctl -w fs.file-max={}", need_files * 2)],
            )
        });
    }
    let range = nums("/proc/sys/net/ipv4/ip_local_port_range");
    if range.len() == 2 && range[1] >= range[0] {
        let ports = range[1] - range[0] + 1;
        let sources = n.div_ceil(ports * 4 / 5);
        let last = 1 + sources.min(250);
        let mut fix = vec![format!("myriad flood --source 127.0.0.2-127.0.0.{last} ...   # {sources} source address(es) for one target port")];
        let level = if ports < 28_000 {
            fix.insert(
                0,
                "sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"".into(),
            );
            Level::Warn
        } else {
            Level::Ok
        };
        out.push(check(
            level,
            "ip_local_port_range",
            format!("{} {}: {ports} ports per source address and destination; {n} connections to one port need {sources} source address(es)", range[0], range[1]),
            fix,
        ));
    }
    for (name, path, sysctl) in [
        (
            "somaxconn",
            "/proc/sys/net/core/somaxconn",
            "net.core.somaxconn",
        ),
        (
            "tcp_max_syn_backlog",
            "/proc/sys/net/ipv4/tcp_max_syn_backlog",
            "net.ipv4.tcp_max_syn_backlog",
        ),
        (
            "netdev_max_backlog",
            "/proc/sys/net/core/netdev_max_backlog",
            "net.core.netdev_max_backlog",
        ),
    ] {
        if let Some(v) = num(path) {
            out.push(if v >= MIN_BACKLOG {
                check(Level::Ok, name, format!("{v}"), vec![])
            } else {
                check(
                    Level::Warn,
                    name,
                    format!("{v}: connect storms overflow it (refused or retried SYNs)"),
                    vec![format!("sysctl -w {sysctl}=65535")],
                )
            });
        }
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    let tcp_mem = nums("/proc/sys/net/ipv4/tcp_mem");
    let kernel_need = 2 * n * KERNEL_BYTES_PER_SOCKET;
    if tcp_mem.len() == 3 {
        let high = tcp_mem[2] * page;
        out.push(if high >= kernel_need {
            check(Level::Ok, "tcp_mem", format!("high {} MB, {n} connections need ~{} MB", high >> 20, kernel_need >> 20), vec![])
        } else {
            let p = kernel_need.div_ceil(page) * 2;
            check(
                Level::Warn,
                "tcp_mem",
                format!("high {} MB < ~{} MB for {n} connections (2 sockets × {KERNEL_BYTES_PER_SOCKET} B)", high >> 20, kernel_need >> 20),
                vec![format!("sysctl -w net.ipv4.tcp_mem=\"{} {} {}\"", p / 2, p * 3 / 4, p)],
            )
        });
    }
    // One conntrack entry covers both directions of a connection; keep a tenth spare
    // for TIME_WAIT entries and the rest of the machine.
    let track_need = n + n / 10;
    let tracked = num("/proc/sys/net/netfilter/nf_conntrack_count").unwrap_or(0);
    let sockstat = read_proc("/proc/net/sockstat").unwrap_or_default();
    let tcp_inuse = sockstat
        .lines()
        .find(|l| l.starts_with("TCP:"))
        .and_then(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok())
        .unwrap_or(0);
    match num("/proc/sys/net/netfilter/nf_conntrack_max") {
        // Loaded, yet none of the open TCP sockets is tracked: no rule uses conntrack.
        Some(max) if tracked == 0 && tcp_inuse > 100 => out.push(check(
            Level::Ok,
            "nf_conntrack_max",
            format!("{max}, but 0 of {tcp_inuse} TCP sockets are tracked (no rule uses conntrack); if rules change, {track_need} are needed"),
            vec![],
        )),
        Some(max) if max < track_need => out.push(check(
            Level::Block,
            "nf_conntrack_max",
            format!("{max}: conntrack is loaded and tracks loopback too; {track_need} entries needed, new connections are dropped past it"),
            vec![
                format!("sysctl -w net.netfilter.nf_conntrack_max={}", 4 * n),
                "# or skip tracking: iptables -t raw -A PREROUTING -i lo -j NOTRACK; iptables -t raw -A OUTPUT -o lo -j NOTRACK".into(),
            ],
        )),
        Some(max) => out.push(check(Level::Ok, "nf_conntrack_max", format!("{max}, need {track_need}"), vec![])),
        None => out.push(check(Level::Ok, "nf_conntrack", "not loaded".into(), vec![])),
    }
    let meminfo = read_proc("/proc/meminfo").unwrap_or_default();
    let avail_kb = meminfo
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    let mem_need = kernel_need + 2 * n * USER_BYTES_PER_CONN;
    let avail = avail_kb * 1024;
    let level = if avail >= mem_need {
        Level::Ok
    } else if avail * 2 >= mem_need {
        Level::Warn
    } else {
        Level::Block
    };
    out.push(check(
        level,
        "memory",
        format!("{} MB available, {n} connections need ~{} MB (kernel sockets + {USER_BYTES_PER_CONN} B per side)", avail >> 20, mem_need >> 20),
        vec![],
    ));
    out
}

/// `myriad doctor`.
pub fn run(args: DoctorArgs) -> anyhow::Result<()> {
    let all = checks(args.connections);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        println!(
            "myriad doctor: can this machine hold {} connections (client and server here)?",
            args.connections
        );
        for c in &all {
            let tag = match c.level {
                Level::Ok => "OK   ",
                Level::Warn => "WARN ",
                Level::Block => "BLOCK",
            };
            println!("{tag} {:<20} {}", c.name, c.detail);
        }
        let fixes: Vec<&String> = all
            .iter()
            .filter(|c| c.level > Level::Ok || c.name == "ip_local_port_range")
            .flat_map(|c| &c.fix)
            .collect();
        if !fixes.is_empty() {
            println!("\nto change for {} connections:", args.connections);
            for f in fixes {
                println!("  {f}");
            }
        }
    }
    let blocked = all.iter().filter(|c| c.level == Level::Block).count();
    if args.strict && blocked > 0 {
        bail!("{blocked} check(s) block {} connections", args.connections);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_targets_pass_and_huge_ones_need_changes() {
        let small = checks(100);
        assert!(small
            .iter()
            .any(|c| c.name == "nofile" && c.level == Level::Ok));
        assert!(small
            .iter()
            .any(|c| c.name == "memory" && c.level == Level::Ok));
        let huge = checks(1 << 40);
        let mem = huge
            .iter()
            .find(|c| c.name == "memory")
            .expect("memory is always checked");
        assert_eq!(mem.level, Level::Block);
        let nofile = huge
            .iter()
            .find(|c| c.name == "nofile")
            .expect("nofile is always checked");
        assert_eq!(nofile.level, Level::Warn);
        assert!(nofile.fix.iter().any(|f| f.starts_with("ulimit -n")));
    }
}
