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
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the command name (which may contain spaces) start after ") ".
        let rest = stat.rsplit_once(") ").map(|x| x.1).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        (ticks(11) / hz, ticks(12) / hz)
    }
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

pub fn rss_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    kb * 1024
}

/// Kernel memory that grows with sockets: the slab caches (socket, inode, file, dentry
/// objects) from /proc/meminfo plus TCP buffer pages from /proc/net/sockstat.
pub fn kernel_socket_bytes() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let slab_kb = meminfo
        .lines()
        .find(|l| l.starts_with("Slab:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    slab_kb * 1024 + tcp_mem_bytes()
}

/// Kernel TCP buffer memory in bytes, from /proc/net/sockstat (`TCP: ... mem N` pages).
pub fn tcp_mem_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/net/sockstat").unwrap_or_default();
    let pages = text
        .lines()
        .find(|l| l.starts_with("TCP:"))
        .and_then(|l| l.split_whitespace().skip_while(|w| *w != "mem").nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    pages * 4096
}
