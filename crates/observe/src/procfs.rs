//! Readers for the `/proc` files myriad looks at, split into pure parsers (text in,
//! numbers out, unit-tested on fixed samples) and thin `read_*` wrappers. The one place
//! that reads `/proc` for the monitor, the load tools, `doctor`, the demo and the benches:
//! one meminfo reader, one `/proc/<pid>/stat` reader, one descriptor counter.
//!
//! This module reports raw cumulative values (clock ticks, pages, kB converted to bytes);
//! it computes no rates. Linux only: on other systems the readers return errors.

use std::fs;
use std::io;

/// Slab caches whose memory belongs to sockets: the TCP socket objects, their inodes,
/// the time-wait and request minisocks and epoll registrations. Summed into
/// [`SlabStats::socket_bytes`] to show what a connection costs the kernel beyond buffers.
pub const SOCKET_SLABS: &[&str] = &[
    "TCP",
    "TCPv6",
    "sock_inode_cache",
    "tw_sock_TCP",
    "tw_sock_TCPv6",
    "request_sock_TCP",
    "request_sock_TCPv6",
    "eventpoll_epi",
    "eventpoll_pwq",
];

/// CPU time and memory of one process, its parent and niceness, from `/proc/<pid>/stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcStat {
    /// Parent process id.
    pub ppid: u32,
    /// Niceness (−20 … 19).
    pub nice: i32,
    /// User-mode CPU time in clock ticks.
    pub utime_ticks: u64,
    /// Kernel-mode CPU time in clock ticks.
    pub stime_ticks: u64,
    /// Number of threads.
    pub threads: u64,
    /// Resident set size in pages.
    pub rss_pages: u64,
}

/// Parse `/proc/<pid>/stat`. The command name may contain spaces and parentheses, so
/// fields are counted from the last `)`.
pub fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // f[0] is field 3 (state); field n is f[n - 3].
    let field = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
    Some(ProcStat {
        ppid: f.get(4 - 3)?.parse().ok()?,
        nice: f.get(19 - 3)?.parse().ok()?,
        utime_ticks: field(14)?,
        stime_ticks: field(15)?,
        threads: field(20)?,
        rss_pages: field(24)?,
    })
}

/// Parse `/proc/<pid>/statm`: the resident set size in pages (second field).
pub fn parse_statm_resident(text: &str) -> Option<u64> {
    text.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// Machine-wide CPU time from the first line of `/proc/stat`, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// user + nice.
    pub user: u64,
    /// system + irq + softirq.
    pub sys: u64,
    /// idle + iowait.
    pub idle: u64,
    /// Everything, steal included.
    pub total: u64,
    /// Number of `cpuN` lines (online CPUs).
    pub cpus: u64,
}

impl CpuTimes {
    /// Cores busy (not idle; steal counts as busy: time the box did not have)
    /// between `before` and this reading; None when no time passed.
    pub fn cores_busy_since(&self, before: &CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(before.total).filter(|&t| t > 0)?;
        let busy = (self.total - self.idle).saturating_sub(before.total - before.idle);
        Some(busy as f64 / total as f64 * self.cpus.max(1) as f64)
    }
}

/// Parse `/proc/stat`.
pub fn parse_cpu_times(text: &str) -> Option<CpuTimes> {
    let mut out = CpuTimes::default();
    let mut found = false;
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        match it.next() {
            Some("cpu") => {
                let v: Vec<u64> = it.take(8).map(|x| x.parse().unwrap_or(0)).collect();
                if v.len() < 8 {
                    return None;
                }
                // guest time is already counted in user; steal is time we did not get.
                out.user = v[0] + v[1];
                out.sys = v[2] + v[5] + v[6];
                out.idle = v[3] + v[4];
                out.total = v.iter().sum();
                found = true;
            }
            Some(name) if name.starts_with("cpu") => out.cpus += 1,
            _ => {}
        }
    }
    found.then_some(out)
}

/// Machine memory from `/proc/meminfo`, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemInfo {
    pub total: u64,
    pub free: u64,
    pub available: u64,
    /// Page cache + buffers + reclaimable slab, as `free(1)` counts "buff/cache".
    pub cache: u64,
    /// total − free − cache, as `free(1)` counts "used".
    pub used: u64,
    /// All slab caches (`Slab:`), reclaimable or not.
    pub slab: u64,
}

/// Parse `/proc/meminfo` (values in kB).
pub fn parse_meminfo(text: &str) -> Option<MemInfo> {
    let get = |key: &str| parse_kb_line(text, key).map(|kb| kb * 1024);
    let total = get("MemTotal")?;
    let free = get("MemFree")?;
    let available = get("MemAvailable").unwrap_or(free);
    let cache =
        get("Buffers").unwrap_or(0) + get("Cached").unwrap_or(0) + get("SReclaimable").unwrap_or(0);
    Some(MemInfo {
        total,
        free,
        available,
        cache,
        used: total.saturating_sub(free).saturating_sub(cache),
        slab: get("Slab").unwrap_or(0),
    })
}

/// TCP socket counts and kernel TCP memory from `/proc/net/sockstat` (+ `sockstat6`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SockStat {
    /// All sockets of any family in use.
    pub sockets_used: u64,
    /// TCP sockets in use (IPv4 + IPv6).
    pub tcp_inuse: u64,
    /// Orphaned TCP sockets (closed by the process, still held by the kernel).
    pub tcp_orphan: u64,
    /// Sockets in TIME_WAIT.
    pub tcp_tw: u64,
    /// TCP sockets allocated (v4 and v6; includes listeners and orphans).
    pub tcp_alloc: u64,
    /// Pages the kernel has allocated for TCP buffers (compare with `net.ipv4.tcp_mem`).
    pub tcp_mem_pages: u64,
}

/// Parse `/proc/net/sockstat`, optionally followed by `/proc/net/sockstat6` text.
pub fn parse_sockstat(text: &str) -> Option<SockStat> {
    let mut s = SockStat::default();
    let mut found = false;
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let proto = it.next();
        let rest: Vec<&str> = it.collect();
        let val = |key: &str| -> u64 {
            rest.chunks(2)
                .find(|kv| kv[0] == key)
                .and_then(|kv| kv.get(1)?.parse().ok())
                .unwrap_or(0)
        };
        match proto {
            Some("sockets:") => s.sockets_used = val("used"),
            Some("TCP:") => {
                found = true;
                s.tcp_inuse += val("inuse");
                s.tcp_orphan = val("orphan");
                s.tcp_tw = val("tw");
                s.tcp_alloc = val("alloc");
                s.tcp_mem_pages = val("mem");
            }
            Some("TCP6:") => s.tcp_inuse += val("inuse"),
            _ => {}
        }
    }
    found.then_some(s)
}

/// Socket-related slab memory from `/proc/slabinfo` (readable by root only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlabStats {
    /// Bytes held by the caches in [`SOCKET_SLABS`] (objects allocated × object size).
    pub socket_bytes: u64,
    /// Objects in the `TCP` and `TCPv6` caches.
    pub tcp_objects: u64,
}

/// Parse `/proc/slabinfo` version 2.x.
pub fn parse_slabinfo(text: &str) -> Option<SlabStats> {
    if !text.starts_with("slabinfo - version: 2") {
        return None;
    }
    let mut s = SlabStats::default();
    for line in text.lines().skip(2) {
        let f: Vec<&str> = line.split_ascii_whitespace().take(4).collect();
        if f.len() < 4 || !SOCKET_SLABS.contains(&f[0]) {
            continue;
        }
        let num_objs: u64 = f[2].parse().ok()?;
        let objsize: u64 = f[3].parse().ok()?;
        s.socket_bytes += num_objs * objsize;
        if f[0] == "TCP" || f[0] == "TCPv6" {
            s.tcp_objects += num_objs;
        }
    }
    Some(s)
}

fn bad(path: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("cannot parse {path}"))
}

/// This process's CPU times and threads; RSS from `statm` (cheaper to keep current).
pub fn read_self() -> io::Result<ProcStat> {
    let text = fs::read_to_string("/proc/self/stat")?;
    let mut st = parse_proc_stat(&text).ok_or_else(|| bad("/proc/self/stat"))?;
    if let Some(rss) = fs::read_to_string("/proc/self/statm")
        .ok()
        .as_deref()
        .and_then(parse_statm_resident)
    {
        st.rss_pages = rss;
    }
    Ok(st)
}

/// Another process's CPU times, threads, RSS, parent and niceness from
/// `/proc/<pid>/stat` (an error once it is gone).
pub fn read_proc_stat(pid: u32) -> io::Result<ProcStat> {
    let path = format!("/proc/{pid}/stat");
    parse_proc_stat(&fs::read_to_string(&path)?).ok_or_else(|| bad(&path))
}

/// A process's anonymous resident memory in bytes (`RssAnon` of
/// `/proc/<pid>/status`): its heap and private mappings, without the pages of its
/// binary and libraries it has run (file-backed and shared, paid once, not per
/// connection).
pub fn read_rss_anon(pid: u32) -> io::Result<u64> {
    let path = format!("/proc/{pid}/status");
    parse_kb_line(&fs::read_to_string(&path)?, "RssAnon")
        .map(|kb| kb * 1024)
        .ok_or_else(|| bad(&path))
}

/// The number of a `Key:  N kB` line of a `/proc` text (`status`, `meminfo`).
pub fn parse_kb_line(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.split(':').next() == Some(key))?;
    line.split(':')
        .nth(1)?
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Descriptors this process has open now (entries of `/proc/self/fd`).
pub fn open_fds() -> io::Result<u64> {
    Ok(fs::read_dir("/proc/self/fd")?.count() as u64)
}

/// Machine CPU times.
pub fn read_cpu_times() -> io::Result<CpuTimes> {
    parse_cpu_times(&fs::read_to_string("/proc/stat")?).ok_or_else(|| bad("/proc/stat"))
}

/// Machine memory.
pub fn read_meminfo() -> io::Result<MemInfo> {
    parse_meminfo(&fs::read_to_string("/proc/meminfo")?).ok_or_else(|| bad("/proc/meminfo"))
}

/// TCP sockets and memory (IPv6 counts added when `sockstat6` exists).
pub fn read_sockstat() -> io::Result<SockStat> {
    let mut text = fs::read_to_string("/proc/net/sockstat")?;
    if let Ok(v6) = fs::read_to_string("/proc/net/sockstat6") {
        text.push_str(&v6);
    }
    parse_sockstat(&text).ok_or_else(|| bad("/proc/net/sockstat"))
}

/// Socket slab memory, or `None` when `/proc/slabinfo` is not readable (not root).
pub fn read_slabinfo() -> Option<SlabStats> {
    parse_slabinfo(&fs::read_to_string("/proc/slabinfo").ok()?)
}

/// A sysctl by its dotted name (`net.core.somaxconn` reads /proc/sys/net/core/somaxconn),
/// trimmed; `None` when the kernel has no such setting (a module not loaded).
pub fn read_sysctl(key: &str) -> Option<String> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// The first number of a sysctl (`fs.file-nr` has three); `None` when it is missing
/// or not a number.
pub fn read_sysctl_number(key: &str) -> Option<u64> {
    read_sysctl(key)?.split_whitespace().next()?.parse().ok()
}

/// Sets a sysctl by its dotted name (root, or the namespace's owner).
pub fn write_sysctl(key: &str, value: &str) -> std::io::Result<()> {
    fs::write(format!("/proc/sys/{}", key.replace('.', "/")), value)
}

/// Bytes per memory page.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 on error.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as u64
    } else {
        4096
    }
}

/// Clock ticks per second (the unit of `/proc` CPU times).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 on error.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 1234 0 0 0 \
        250 75 0 0 15 -5 9 0 123456 987654321 5120 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";

    #[test]
    fn proc_stat_fixed_sample() {
        let s = parse_proc_stat(STAT).unwrap();
        assert_eq!(
            s,
            ProcStat {
                ppid: 1,
                nice: -5,
                utime_ticks: 250,
                stime_ticks: 75,
                threads: 9,
                rss_pages: 5120
            }
        );
        assert_eq!(parse_proc_stat("garbage"), None);
        assert_eq!(parse_statm_resident("1000 222 33 4 0 55 0\n"), Some(222));
    }

    #[test]
    fn status_anonymous_rss_of_a_sample_and_of_this_process() {
        let status = "VmRSS:\t   15512 kB\nRssAnon:\t    2796 kB\nRssFile:\t   12716 kB\n";
        assert_eq!(parse_kb_line(status, "RssAnon"), Some(2796));
        assert_eq!(parse_kb_line(status, "RssFile"), Some(12716));
        assert_eq!(parse_kb_line(status, "RssShmem"), None);
        let anon = read_rss_anon(std::process::id()).expect("this process's status");
        let all = read_self().expect("this process's stat").rss_pages * page_size();
        assert!(
            anon > 0 && anon < all,
            "anonymous {anon} within the whole {all}"
        );
    }

    #[test]
    fn cpu_meminfo_sockstat_slab_fixed_samples() {
        let cpu = parse_cpu_times(
            "cpu  100 5 40 800 10 1 2 3 0 0\ncpu0 50 0 20 400 5 0 1 1 0 0\ncpu1 50 5 20 400 5 1 1 2 0 0\nintr 1\n",
        )
        .unwrap();
        assert_eq!(
            cpu,
            CpuTimes {
                user: 105,
                sys: 43,
                idle: 810,
                total: 961,
                cpus: 2
            }
        );

        // 150 of 200 ticks not idle on two CPUs: one and a half cores.
        let at = |busy: u64, idle: u64| CpuTimes {
            user: busy,
            sys: 0,
            idle,
            total: busy + idle,
            cpus: 2,
        };
        assert_eq!(at(250, 150).cores_busy_since(&at(100, 100)), Some(1.5));
        assert_eq!(at(100, 100).cores_busy_since(&at(100, 100)), None);

        let mem = parse_meminfo(
            "MemTotal:       1000 kB\nMemFree:         400 kB\nMemAvailable:    700 kB\n\
             Buffers:          10 kB\nCached:          200 kB\nSwapCached: 0 kB\nSReclaimable:     40 kB\n",
        )
        .unwrap();
        assert_eq!(mem.total, 1_024_000);
        assert_eq!(mem.cache, 250 * 1024);
        assert_eq!(mem.used, 350 * 1024);
        assert_eq!(mem.available, 700 * 1024);

        let ss = parse_sockstat(
            "sockets: used 231\nTCP: inuse 15 orphan 2 tw 7 alloc 20 mem 3\nUDP: inuse 1 mem 0\n\
             TCP6: inuse 4\nUDP6: inuse 0\n",
        )
        .unwrap();
        assert_eq!(
            ss,
            SockStat {
                sockets_used: 231,
                tcp_inuse: 19,
                tcp_orphan: 2,
                tcp_tw: 7,
                tcp_alloc: 20,
                tcp_mem_pages: 3
            }
        );

        let slab = parse_slabinfo(
            "slabinfo - version: 2.1\n# name <active_objs> <num_objs> <objsize> ...\n\
             TCPv6   26   26   2496   13  8 : tunables 0 0 0 : slabdata 2 2 0\n\
             TCP     10   13   2368   13  8 : tunables 0 0 0 : slabdata 1 1 0\n\
             dentry  99   99    192   21  1 : tunables 0 0 0 : slabdata 1 1 0\n\
             sock_inode_cache 19 19 832 19 4 : tunables 0 0 0 : slabdata 1 1 0\n",
        )
        .unwrap();
        assert_eq!(slab.socket_bytes, 26 * 2496 + 13 * 2368 + 19 * 832);
        assert_eq!(slab.tcp_objects, 39);
        assert_eq!(parse_slabinfo("not slabinfo"), None);
    }

    #[test]
    fn real_proc_files_parse() {
        let me = read_self().unwrap();
        assert!(me.rss_pages > 0 && me.threads >= 1);
        let cpu = read_cpu_times().unwrap();
        assert!(cpu.cpus >= 1 && cpu.total >= cpu.user + cpu.sys);
        let mem = read_meminfo().unwrap();
        assert!(mem.total > mem.free && mem.total >= mem.used);
        // A listening socket makes sure there is at least one TCP socket to count.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ss = read_sockstat().unwrap();
        assert!(ss.tcp_inuse >= 1 && ss.tcp_alloc >= 1, "{ss:?}");
        drop(l);
        if let Some(slab) = read_slabinfo() {
            assert!(slab.socket_bytes > 0);
        }
        assert!(page_size() >= 4096 && clock_ticks() > 0);
        assert!(read_sysctl("net.core.somaxconn").is_some_and(|v| v.parse::<u64>().is_ok()));
        assert_eq!(read_sysctl("net.no.such.setting"), None);
        assert!(open_fds().unwrap() >= 3, "stdio at least");
        let me = read_proc_stat(std::process::id()).unwrap();
        assert!(me.threads >= 1 && me.rss_pages > 0);
    }
}
