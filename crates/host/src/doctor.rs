//! `myriad doctor` (SPEC G6): read the process and kernel limits that decide how many
//! connections this machine can hold, say which of them block a target N, and print
//! the exact lines to change. Reads only; it changes nothing. `--print-sysctl` prints
//! the sysctl drop-in of `deploy/99-myriad.conf` (made here, by [`sysctl_dropin`]).
//!
//! The figures assume the load client and the server run on this machine, as in the
//! benchmarks: N connections are 2·N sockets and 2·N file descriptors.

use crate::sys::{self, FD_MARGIN};
use anyhow::bail;
use observe::procfs::{self, read_sysctl_number};
use serde::Serialize;

/// All kernel memory one established idle TCP socket costs, bytes: every slab cache it
/// grows (socket, inode, file, dentry, epoll item: `Slab:` of /proc/meminfo) plus its
/// buffers. Measured here ≈ 4.2 KB. It plans memory; `tcp_mem` limits only the buffers.
pub const KERNEL_BYTES_PER_SOCKET: u64 = 4_200;
/// TCP buffer memory to plan per socket, bytes: the part `net.ipv4.tcp_mem` limits
/// (`mem` pages of /proc/net/sockstat). Idle sockets hold little (≈ 52 B each during
/// `myriad demo`, 20,000 sockets; 33,919 pages for 1.36 M sockets while `bench c1m`
/// connected), but the kernel charges buffers to the limit in whole pages and a socket
/// whose reader falls behind keeps its page: when the machine saturated at 717 k
/// connections (2026-11-23) the charge rose to 507,006 pages for 1.43 M sockets and
/// went on rising past the default pressure mark. One page per socket is the plan.
pub const TCP_BUFFER_BYTES_PER_SOCKET: u64 = 4_096;
/// What the backlog sysctls are raised to: a burst of this many connects is queued, not
/// refused (every client reconnecting after a restart, a load test's connect storm).
pub const RECOMMENDED_BACKLOG: u64 = 65_535;
/// The backlog sysctls, checked here and set by the drop-in: (check name, sysctl key).
pub const BACKLOG_SYSCTLS: [(&str, &str); 3] = [
    ("somaxconn", "net.core.somaxconn"),
    ("tcp_max_syn_backlog", "net.ipv4.tcp_max_syn_backlog"),
    ("netdev_max_backlog", "net.core.netdev_max_backlog"),
];
/// User-space budget per connection on each side (flood and server), bytes.
pub const USER_BYTES_PER_CONN: u64 = 256;
/// Backlog values below this drop SYNs during connect storms.
pub const MIN_BACKLOG: u64 = 4096;

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
    /// Print the sysctl drop-in for /etc/sysctl.d/ (deploy/99-myriad.conf) and exit.
    #[arg(long)]
    pub print_sysctl: bool,
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

/// Whether conntrack tracks this network namespace's loopback connections. Its
/// count is per namespace: any entry says yes; with none, one loopback connection
/// is opened and the count read while it is open (a fresh namespace, such as the
/// one `bench c1m` makes, has no rule that tracks, whatever the module's maximum).
fn conntrack_tracks_loopback() -> bool {
    let count = || read_sysctl_number("net.netfilter.nf_conntrack_count").unwrap_or(0);
    if count() > 0 {
        return true;
    }
    let probe = || -> std::io::Result<bool> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let _client = std::net::TcpStream::connect(listener.local_addr()?)?;
        let _server = listener.accept()?;
        Ok(count() > 0)
    };
    // Without loopback to probe, assume the worst: the limit is checked.
    probe().unwrap_or(true)
}

fn nums(key: &str) -> Vec<u64> {
    procfs::read_sysctl(key)
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
                "soft {soft}, hard {hard}: one process holds at most {per_proc} connections; flood spreads {n} over {procs} child processes by itself, a server needs one process per {per_proc} connections unless the limit is raised"
            ),
            vec![
                format!("ulimit -n {}", n + 10_000),
                format!("# /etc/security/limits.conf:  *  soft  nofile  {}", n + 10_000),
                format!("# /etc/security/limits.conf:  *  hard  nofile  {}", n + 10_000),
                format!("# systemd unit:  LimitNOFILE={}", n + 10_000),
            ],
        )
    });
    if let Some(nr_open) = read_sysctl_number("fs.nr_open") {
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
                format!("{nr_open}: no process can get {n} files (spreading over processes still works)"),
                vec![format!("sysctl -w fs.nr_open={}", n + 10_000)],
            )
        });
    }
    let need_files = 2 * n + 10_000;
    if let Some(file_max) = read_sysctl_number("fs.file-max") {
        let used = read_sysctl_number("fs.file-nr").unwrap_or(0);
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
    let range = nums("net.ipv4.ip_local_port_range");
    if range.len() == 2 && range[1] >= range[0] {
        let ports = range[1] - range[0] + 1;
        let sources = n.div_ceil(connections_per_source());
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
            format!("{} {}: {ports} ports per source address and destination, of which connect() uses the even half; {n} connections to one port need {sources} source address(es)", range[0], range[1]),
            fix,
        ));
    }
    for (name, sysctl) in BACKLOG_SYSCTLS {
        if let Some(v) = read_sysctl_number(sysctl) {
            out.push(if v >= MIN_BACKLOG {
                check(Level::Ok, name, format!("{v}"), vec![])
            } else {
                check(
                    Level::Warn,
                    name,
                    format!("{v}: connect storms overflow it (refused or retried SYNs)"),
                    vec![format!("sysctl -w {sysctl}={RECOMMENDED_BACKLOG}")],
                )
            });
        }
    }
    // Several gateway processes share a port (`serve --processes`) once N exceeds one
    // process's file limit; a full one closes its listener, and without migration the
    // connections still queued in it are reset (docs/decisions/supervisor-and-listening-group.md).
    if let Some(v) = read_sysctl_number(MIGRATE_SYSCTL) {
        out.push(if v == 1 {
            check(Level::Ok, "tcp_migrate_req", "1".into(), vec![])
        } else {
            check(
                Level::Warn,
                "tcp_migrate_req",
                format!(
                    "{v}: a full gateway process leaving the port resets the clients queued at it"
                ),
                vec![format!("sysctl -w {MIGRATE_SYSCTL}=1")],
            )
        });
    }
    if let Some(c) = tcp_mem_check(n) {
        out.push(c);
    }
    if let Some(buckets) = read_sysctl_number(EHASH_SYSCTL) {
        out.push(ehash_check(buckets, 2 * n));
    }
    // One conntrack entry covers both directions of a connection; keep a tenth spare
    // for TIME_WAIT entries and the rest of the machine.
    let track_need = n + n / 10;
    match read_sysctl_number("net.netfilter.nf_conntrack_max") {
        // Loaded, yet this namespace's loopback is not tracked: no rule uses conntrack.
        Some(max) if !conntrack_tracks_loopback() => out.push(check(
            Level::Ok,
            "nf_conntrack_max",
            format!("{max}, but loopback connections here are not tracked (no rule uses conntrack); if rules change, {track_need} are needed"),
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
    out.push(ktls_check());
    out.push(io_uring_check());
    let kernel_need = 2 * n * KERNEL_BYTES_PER_SOCKET;
    let mem_need = kernel_need + 2 * n * USER_BYTES_PER_CONN;
    let avail = procfs::read_meminfo().map_or(0, |m| m.available);
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
        format!("{} MB available, {n} connections need ~{} MB (2 sockets × {KERNEL_BYTES_PER_SOCKET} B of kernel memory + {USER_BYTES_PER_CONN} B per side)", avail >> 20, mem_need >> 20),
        vec![],
    ));
    out
}

/// Whether `serve --ktls` can hand TLS records to the kernel here. Informational: TLS
/// works either way (in user space without it), so it never blocks N.
fn ktls_check() -> Check {
    match tls::ktls::probe() {
        tls::ktls::Availability::Available => check(
            Level::Ok,
            "ktls",
            "available: serve --ktls lets the kernel seal TLS 1.3 records".into(),
            vec![],
        ),
        tls::ktls::Availability::Unavailable(why) => check(
            Level::Ok,
            "ktls",
            format!("unavailable ({why}); serve --ktls keeps TLS in user space"),
            vec![],
        ),
    }
}

/// Whether `serve --io-uring true` (the default) can batch sends here.
/// Informational: without io_uring the server sends with writev.
fn io_uring_check() -> Check {
    match io_uring::IoUring::new(2) {
        Ok(_) => check(
            Level::Ok,
            "io_uring",
            "available: serve submits a fan-out's sends in batches".into(),
            vec![],
        ),
        Err(e) => check(
            Level::Ok,
            "io_uring",
            format!("refused ({e}); serve sends with one writev per connection"),
            vec![
                "sysctl -w kernel.io_uring_disabled=0   # where the kernel has it but disables it"
                    .into(),
            ],
        ),
    }
}

/// Connections one source address should open to one destination address and port.
/// connect() picks ports of one parity (the even half of `ip_local_port_range`; bind()
/// gets the odd half) and reaches the other half only after scanning the whole first
/// one for every connect: measured in `bench c1m` (2026-11-23), each source address
/// stopped at 14,106 even ports of 28,232 (18 odd ones), and every later connect burned
/// milliseconds of kernel time in that scan — the machine-wide stall at ~718 k
/// connections. Four fifths of the even half leaves room for TIME_WAIT.
pub fn connections_per_source() -> u64 {
    let range = nums("net.ipv4.ip_local_port_range");
    let ports = match range[..] {
        [low, high] if high >= low => high - low + 1,
        _ => 28_232, // Linux's default range, 32768-60999
    };
    (ports / 2 * 4 / 5).max(1)
}

/// The size of this network namespace's hash of established TCP sockets.
pub const EHASH_SYSCTL: &str = "net.ipv4.tcp_ehash_entries";
/// What a network namespace created afterwards gets (0: the main table, shared).
pub const CHILD_EHASH_SYSCTL: &str = "net.ipv4.tcp_child_ehash_entries";
/// The largest table the kernel makes for a new namespace (2^24).
pub const MAX_CHILD_EHASH: u64 = 1 << 24;

/// Buckets for `sockets` established sockets: two per socket (short chains), a
/// power of two, at most what a new namespace may get.
pub fn ehash_for(sockets: u64) -> u64 {
    (2 * sockets).next_power_of_two().min(MAX_CHILD_EHASH)
}

/// Whether `buckets` keep chains short (≤ 2 on average) for `sockets`.
pub fn ehash_enough(buckets: u64, sockets: u64) -> bool {
    buckets.saturating_mul(2) >= sockets
}

/// Every segment received looks its socket up in the established hash; its size is
/// fixed at boot from RAM (262,144 buckets on a 24 GB machine), and with 2 M sockets
/// (both ends of 1 M loopback connections) each lookup walks a chain of ~8:
/// measured at 1 M, `__inet_lookup_established` was 16.5 % of the gateways' CPU
/// (5.6 % with 4 M buckets; docs/decisions/supervisor-and-listening-group.md).
fn ehash_check(buckets: u64, sockets: u64) -> Check {
    let chain = sockets as f64 / buckets.max(1) as f64;
    if ehash_enough(buckets, sockets) {
        return check(
            Level::Ok,
            "tcp_ehash_entries",
            format!("{buckets} buckets for {sockets} sockets (~{chain:.1} per bucket)"),
            vec![],
        );
    }
    let want = ehash_for(sockets);
    check(
        Level::Warn,
        "tcp_ehash_entries",
        format!(
            "{buckets} buckets for {sockets} sockets: every received segment walks a chain of ~{chain:.0} to find its socket (fixed at boot; `bench c1m` runs itself in a network namespace with a larger table)"
        ),
        vec![
            format!("# kernel command line, then reboot:  thash_entries={want}"),
            format!("# or, for a network namespace created afterwards:  sysctl -w {CHILD_EHASH_SYSCTL}={want}"),
        ],
    )
}

/// `net.ipv4.tcp_mem` (pages: min, pressure, max) limits TCP buffer memory only, not the
/// socket slab; the check plans [`TCP_BUFFER_BYTES_PER_SOCKET`] for each of the 2n
/// sockets below the pressure mark. `None` when the file is unreadable.
fn tcp_mem_check(n: u64) -> Option<Check> {
    let page = procfs::page_size();
    let tcp_mem = nums("net.ipv4.tcp_mem");
    let [_, pressure, max] = tcp_mem[..] else {
        return None;
    };
    let (pressure, max) = (pressure * page, max * page);
    let need = 2 * n * TCP_BUFFER_BYTES_PER_SOCKET;
    let why = format!(
        "it limits TCP buffers only, charged in pages: {n} connections may hold ~{} MB when their readers lag (2 sockets × {TCP_BUFFER_BYTES_PER_SOCKET} B)",
        need >> 20
    );
    Some(if pressure >= need {
        check(
            Level::Ok,
            "tcp_mem",
            format!(
                "pressure {} MB, max {} MB; {why}",
                pressure >> 20,
                max >> 20
            ),
            vec![],
        )
    } else {
        let want = need.div_ceil(page);
        check(
            Level::Warn,
            "tcp_mem",
            format!("pressure {} MB is below that; {why}. Under pressure the kernel shrinks buffers, past max ({} MB) it drops data", pressure >> 20, max >> 20),
            vec![format!(
                "sysctl -w net.ipv4.tcp_mem=\"{} {} {}\"",
                want / 2,
                want,
                want * 3 / 2
            )],
        )
    })
}

/// Moves the connections queued at a closing SO_REUSEPORT listener to the other
/// listeners of its group (Linux 5.14) instead of resetting them.
pub const MIGRATE_SYSCTL: &str = "net.ipv4.tcp_migrate_req";

/// The sysctl drop-in for a myriad server (`deploy/99-myriad.conf`, installed as
/// `/etc/sysctl.d/99-myriad.conf`). Fixed values that only raise defaults, so it is safe
/// on any machine; what depends on N (`tcp_mem`, conntrack, file limits) `doctor` checks.
pub fn sysctl_dropin() -> String {
    let mut out = String::from(
        "# /etc/sysctl.d/99-myriad.conf: kernel settings for a myriad server.\n\
         # Printed by `myriad doctor --print-sysctl`; apply with `sysctl --system`.\n\
         #\n\
         # Connect storms (thousands of clients reconnecting at once, e.g. after a restart)\n\
         # overflow the default accept and SYN backlogs: connects are refused or retried\n\
         # seconds later. These queue a burst instead.\n",
    );
    for (_, key) in BACKLOG_SYSCTLS {
        out.push_str(&format!("{key} = {RECOMMENDED_BACKLOG}\n"));
    }
    out.push_str(&format!(
        "#\n\
         # Gateway processes sharing a port (`serve --processes`): a full one leaves the\n\
         # listening group; this hands the clients queued at it to the others.\n\
         {MIGRATE_SYSCTL} = 1\n"
    ));
    out.push_str(
        "#\n\
         # Open files: every connection is a descriptor. The systemd unit's LimitNOFILE\n\
         # (deploy/myriad.service) may not exceed fs.nr_open (1048576 by default).\n\
         # TCP buffer memory (net.ipv4.tcp_mem), conntrack and memory depend on the\n\
         # connection count: `myriad doctor --connections N` checks them and prints the\n\
         # lines to add here.\n",
    );
    out
}

/// `myriad doctor`.
pub fn run(args: DoctorArgs) -> anyhow::Result<()> {
    if args.print_sysctl {
        print!("{}", sysctl_dropin());
        return Ok(());
    }
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
mod tests;
