//! A `myriad serve` child process for the demo and the benches: started from this
//! executable, found by the address it logs, measured through /proc (`observe::procfs`)
//! and `/stats`. Also the machine-wide kernel memory probe the benches use.

use anyhow::{bail, Context};
use observe::procfs;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a starting server may take to log its addresses (it builds the index first).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A `myriad serve` child process, killed on drop unless [`ServerProcess::detach`]ed.
pub struct ServerProcess {
    pub child: Child,
    pub addr: SocketAddr,
    /// The admin listener (dashboard, /metrics), when `--admin` was given.
    pub admin: Option<SocketAddr>,
    /// Further processes that serve beside `child` (a peer server's cluster workers,
    /// named on its start line as `workers=PID,PID`): counted in CPU and RSS.
    pub workers: Vec<u32>,
    detached: bool,
    /// Killed already: kill each pid once (a worker's pid is not ours to reap, so a
    /// second kill much later could reach a reused pid).
    stopped: std::sync::atomic::AtomicBool,
}

impl ServerProcess {
    /// Runs `myriad serve ARGS` (which should include `--listen 127.0.0.1:0`) from
    /// `bin` (`bench --server-bin`: a baseline build run under the same commands), or
    /// from this executable when `None`.
    pub fn start_bin(bin: Option<&Path>, args: &[String]) -> anyhow::Result<ServerProcess> {
        Self::start_bin_at(bin, args, "")
    }

    /// The same, taking the addresses from the first line that contains `marker` (see
    /// [`ServerProcess::start_command_at`]).
    pub fn start_bin_at(
        bin: Option<&Path>,
        args: &[String],
        marker: &str,
    ) -> anyhow::Result<ServerProcess> {
        let mut cmd = serve_command(args);
        if let Some(bin) = bin {
            let mut other = Command::new(bin);
            other
                .arg("serve")
                .args(args)
                .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            cmd = other;
        }
        Self::start_command_at(cmd, marker, None)
    }

    /// Any server command that logs `listen=ADDR` (and optionally `workers=PID,...`)
    /// on stderr once it listens. The server dies with the calling thread: a bench
    /// that ends before its handles drop (or is killed) leaves no server behind, and
    /// none keeps the benchmark lock (`flock`'s descriptor is inherited) held.
    pub fn start_command(cmd: Command) -> anyhow::Result<ServerProcess> {
        Self::start_command_at(cmd, "", None)
    }

    /// The same, taking the addresses from the first line that also contains `marker`
    /// (a supervisor's own start line, not the children's it forwards), and copying
    /// the log to `log` when given.
    pub fn start_command_at(
        mut cmd: Command,
        marker: &str,
        log: Option<&Path>,
    ) -> anyhow::Result<ServerProcess> {
        die_with_parent(&mut cmd);
        let mut child = cmd
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start myriad serve")?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let (addr, admin, workers) = loop {
            let Some(Ok(line)) = lines.next() else {
                bail!("the server exited before listening: {:?}", child.wait());
            };
            if !line.contains(marker) {
                continue;
            }
            if let Some((addr, admin)) = addresses(&line)? {
                let workers = field(&line, "workers=")
                    .map(|w| w.split(',').filter_map(|p| p.parse().ok()).collect())
                    .unwrap_or_default();
                break (addr, admin, workers);
            }
        };
        // Keep draining the log so the server never blocks on a full pipe.
        let mut file = match log {
            Some(path) => Some(
                std::fs::File::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?,
            ),
            None => None,
        };
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Some(f) = file.as_mut() {
                    let _ = writeln!(f, "{line}");
                }
            }
        });
        Ok(ServerProcess {
            child,
            addr,
            admin,
            workers,
            detached: false,
            stopped: Default::default(),
        })
    }

    /// The same with the server's log written to `log` instead of a pipe: nothing of it
    /// reaches the terminal, and a detached server keeps logging there after we exit.
    pub fn start_logging_to(args: &[String], log: &Path) -> anyhow::Result<ServerProcess> {
        let file = std::fs::File::create(log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut child = serve_command(args)
            .stderr(Stdio::from(file))
            .spawn()
            .context("cannot start myriad serve")?;
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            // Only whole lines: the one with the addresses may be half written.
            let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
            for line in whole.lines() {
                if let Some((addr, admin)) = addresses(line)? {
                    return Ok(ServerProcess {
                        child,
                        addr,
                        admin,
                        workers: Vec::new(),
                        detached: false,
                        stopped: Default::default(),
                    });
                }
            }
            if let Some(status) = child.try_wait()? {
                bail!("myriad serve exited before listening ({status}); its log:\n{text}");
            }
            if started.elapsed() > START_TIMEOUT {
                bail!(
                    "myriad serve did not log its address within {START_TIMEOUT:?}; see {}",
                    log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A server started by other means (a peer that logs no `listen=` line), serving
    /// on `addr` with `workers` beside `child`; killed like any other on drop.
    pub fn adopt(child: Child, addr: SocketAddr, workers: Vec<u32>) -> ServerProcess {
        ServerProcess {
            child,
            addr,
            admin: None,
            workers,
            detached: false,
            stopped: Default::default(),
        }
    }

    /// Leave the server running after this handle is gone; returns its pid.
    pub fn detach(mut self) -> u32 {
        self.detached = true;
        self.child.id()
    }

    pub fn rss(&self) -> u64 {
        self.pids().map(rss_of).sum()
    }

    /// Anonymous resident memory (heap and private mappings), without the pages of
    /// the binary it has run: what connections cost, apart from code paid once.
    pub fn rss_anon(&self) -> u64 {
        self.pids()
            .map(|pid| observe::procfs::read_rss_anon(pid).unwrap_or(0))
            .sum()
    }

    /// The server's process and its workers.
    fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        std::iter::once(self.child.id()).chain(self.workers.iter().copied())
    }

    /// The `/stats` document: from the admin listener when there is one, else from the
    /// client listener.
    pub fn stats(&self) -> anyhow::Result<Value> {
        // The admin listener serves the same document (its `extra`) in plain HTTP, also
        // when the client listener is TLS.
        let mut s = TcpStream::connect(self.admin.unwrap_or(self.addr))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"GET /stats HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n")?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        let body = out.split_once("\r\n\r\n").map(|x| x.1).unwrap_or_default();
        let doc: Value = serde_json::from_str(body)?;
        Ok(match (self.admin, doc) {
            (Some(_), Value::Object(mut admin)) => admin.remove("extra").unwrap_or_default(),
            (_, doc) => doc,
        })
    }
}

impl ServerProcess {
    /// CPU time (user, system) the server has used so far, in seconds.
    pub fn cpu(&self) -> (f64, f64) {
        let hz = procfs::clock_ticks() as f64;
        self.pids()
            .filter_map(|p| procfs::read_proc_stat(p).ok())
            .fold((0.0, 0.0), |(u, k), s| {
                (u + s.utime_ticks as f64 / hz, k + s.stime_ticks as f64 / hz)
            })
    }
}

impl ServerProcess {
    /// Kills the server and its workers now, through a shared handle (a probe thread
    /// may still hold another `Arc` of it when the scenario ends).
    pub fn stop(&self) {
        if self.stopped.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        for pid in self.pids() {
            // SAFETY: kill(2) on processes we started, once; the child is reaped by us
            // only in `drop`, so its pid cannot have been reused yet.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    }
}

impl ServerProcess {
    /// SIGTERM, then waits up to `timeout` for the server to exit (a supervisor stops
    /// its children and the NATS server it started, whose store it then removes);
    /// killed as by [`ServerProcess::stop`] if it does not. Its workers are then
    /// reaped by it, not ours to kill again.
    pub fn stop_gracefully(&self, timeout: Duration) {
        let pid = self.child.id();
        // SAFETY: kill(2) on our child, not reaped yet (only `drop` reaps it).
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < timeout {
            if !crate::bench::alive(pid) {
                self.stopped
                    .store(true, std::sync::atomic::Ordering::Release);
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stop();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if !self.detached {
            self.stop();
            let _ = self.child.wait();
        }
    }
}

/// `myriad serve ARGS` from this executable, logging plain text at info.
pub(crate) fn serve_command(args: &[String]) -> Command {
    // current_exe fails only when /proc/self/exe is unreadable; then PATH's myriad will do.
    let exe = std::env::current_exe().unwrap_or_else(|_| "myriad".into());
    let mut cmd = Command::new(exe);
    cmd.arg("serve")
        .args(args)
        .env("MYRIAD_LOG", "info")
        .env("MYRIAD_LOG_FORMAT", "text")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    cmd
}

/// The client and admin addresses from the server's start line (`listen=… admin=…`), or
/// `None` for other lines. The admin field may read `admin=ADDR`, `admin="ADDR"`,
/// `admin=Some(ADDR)`, or anything else that is not an address (`off`, `None`).
fn addresses(line: &str) -> anyhow::Result<Option<(SocketAddr, Option<SocketAddr>)>> {
    let Some(listen) = field(line, "listen=") else {
        return Ok(None);
    };
    let listen = listen
        .parse()
        .with_context(|| format!("bad listen address in {line:?}"))?;
    let admin = field(line, "admin=").and_then(|a| {
        let a = a
            .strip_prefix("Some(")
            .and_then(|a| a.strip_suffix(')'))
            .unwrap_or(a);
        a.trim_matches('"').parse().ok()
    });
    Ok(Some((listen, admin)))
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = &line[line.find(key)? + key.len()..];
    rest.split_whitespace().next()
}

/// Resident set size of a process, in bytes (0 once it is gone).
pub fn rss_of(pid: u32) -> u64 {
    procfs::read_proc_stat(pid).map_or(0, |s| s.rss_pages * procfs::page_size())
}

/// Kernel memory that grows with sockets, as the benches count it: every slab cache
/// (socket, inode, file, dentry objects: `Slab:` of /proc/meminfo) plus TCP buffer pages
/// from /proc/net/sockstat. Wider than `observe::kernel` (socket slabs + buffers), which
/// the demo, the dashboard and the plots use.
pub fn kernel_socket_bytes() -> u64 {
    procfs::read_meminfo().map_or(0, |m| m.slab) + tcp_mem_bytes()
}

/// Kernel TCP buffer memory in bytes (`/proc/net/sockstat` mem pages).
pub fn tcp_mem_bytes() -> u64 {
    procfs::read_sockstat().map_or(0, |s| s.tcp_mem_pages * procfs::page_size())
}

/// Makes the child `cmd` starts die with this process (PR_SET_PDEATHSIG), so a bench
/// that fails or is killed leaves no server behind.
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag on the child; nothing that
    // allocates or locks runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_from_the_start_line_in_every_form() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        let line = "2026-01-01T00:00:00Z  INFO gateway::serve: myriad serving listen=127.0.0.1:8000 loops=2 admin=Some(127.0.0.1:9000) csv=None";
        assert_eq!(
            addresses(line).unwrap(),
            Some((at("127.0.0.1:8000"), Some(at("127.0.0.1:9000"))))
        );
        let plain = "INFO myriad serving listen=127.0.0.1:8000 admin=127.0.0.1:9000";
        assert_eq!(
            addresses(plain).unwrap(),
            Some((at("127.0.0.1:8000"), Some(at("127.0.0.1:9000"))))
        );
        let quoted = "INFO myriad serving listen=127.0.0.1:8000 loops=2 admin=\"127.0.0.1:9000\" csv=\"off\"";
        assert_eq!(
            addresses(quoted).unwrap(),
            Some((at("127.0.0.1:8000"), Some(at("127.0.0.1:9000"))))
        );
        for none in ["admin=None", "admin=off", "admin=\"off\""] {
            let line = format!("INFO myriad serving listen=127.0.0.1:8000 {none}");
            assert_eq!(
                addresses(&line).unwrap(),
                Some((at("127.0.0.1:8000"), None))
            );
        }
        assert_eq!(addresses("INFO subscription index built").unwrap(), None);
        assert!(addresses("listen=nonsense").is_err());
    }
}
