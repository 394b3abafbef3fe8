//! A `myriad serve` child process for the demo and the benches: started from this
//! executable, found by the address it logs, measured through /proc and `/stats`.
//! Also the machine-wide kernel memory probes both use.

use anyhow::{bail, Context};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A `myriad serve` child process, killed on drop.
pub struct ServerProcess {
    pub child: Child,
    pub addr: SocketAddr,
}

impl ServerProcess {
    /// Runs `myriad serve ARGS` (which should include `--listen 127.0.0.1:0`).
    pub fn start(args: &[String]) -> anyhow::Result<ServerProcess> {
        let exe = std::env::current_exe().context("cannot find this executable")?;
        let mut child = Command::new(exe)
            .arg("serve")
            .args(args)
            .env("MYRIAD_LOG", "info")
            .env("MYRIAD_LOG_FORMAT", "text")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start myriad serve")?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            let Some(Ok(line)) = lines.next() else {
                bail!("myriad serve exited before listening: {:?}", child.wait());
            };
            if let Some(addr) = field(&line, "listen=") {
                break addr.parse().context("bad listen address")?;
            }
        };
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(ServerProcess { child, addr })
    }

    pub fn rss(&self) -> u64 {
        rss_of(self.child.id())
    }

    /// `GET /stats` on the client listener.
    pub fn stats(&self) -> anyhow::Result<Value> {
        let mut s = TcpStream::connect(self.addr)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"GET /stats HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n")?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        let body = out.split_once("\r\n\r\n").map(|x| x.1).unwrap_or_default();
        Ok(serde_json::from_str(body)?)
    }
}

impl ServerProcess {
    /// CPU time (user, system) the server has used so far, in seconds.
    pub fn cpu(&self) -> (f64, f64) {
        let hz = observe::procfs::clock_ticks() as f64;
        proc_stat(self.child.id()).map_or((0.0, 0.0), |s| {
            (s.utime_ticks as f64 / hz, s.stime_ticks as f64 / hz)
        })
    }
}

/// `/proc/<pid>/stat` through observe's parser (CPU ticks, RSS pages).
fn proc_stat(pid: u32) -> Option<observe::procfs::ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    observe::procfs::parse_proc_stat(&text)
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = &line[line.find(key)? + key.len()..];
    rest.split_whitespace().next()
}

/// Resident set size of a process, in bytes (0 once it is gone).
pub fn rss_of(pid: u32) -> u64 {
    proc_stat(pid).map_or(0, |s| s.rss_pages * observe::procfs::page_size())
}

/// Kernel memory that grows with sockets: the slab caches (socket, inode, file, dentry
/// objects) from /proc/meminfo plus TCP buffer pages from /proc/net/sockstat.
pub fn kernel_socket_bytes() -> u64 {
    meminfo_kb("Slab:") * 1024 + tcp_mem_bytes()
}

/// One `/proc/meminfo` line's value in kB (0 when absent); `key` includes the colon.
pub fn meminfo_kb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Kernel TCP buffer memory in bytes (`/proc/net/sockstat` mem pages).
pub fn tcp_mem_bytes() -> u64 {
    observe::procfs::read_sockstat().map_or(0, |s| s.tcp_mem_pages * observe::procfs::page_size())
}
