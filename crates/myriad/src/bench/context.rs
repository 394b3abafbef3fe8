//! What every scenario of one `myriad bench` run shares: the output directory, the
//! exact command line, the machine facts and the kernel settings checked (and raised)
//! before any connect storm, and the way servers are started.
//!
//! Not here: measuring (see `held`) or writing reports (see `report`).

use super::BenchArgs;
use crate::server_process::ServerProcess;
use anyhow::Context;
use observe::procfs::{read_sysctl, read_sysctl_number, write_sysctl};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `--tls`: the run's certificate, key and the file clients trust (the certificate
/// itself), in the output directory. Set once by [`Ctx::new`]; process-wide because the
/// URL and flood helpers of every scenario need it and the bench runs one set of flags.
static TLS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();

/// `--h2`: flood's clients speak HTTP/2 with this many streams per connection.
static H2: OnceLock<u32> = OnceLock::new();

/// Streams per HTTP/2 connection of the run's floods (`None`: HTTP/1.1).
pub fn h2_streams() -> Option<u32> {
    H2.get().copied()
}

/// The certificate file clients trust, when the run is TLS.
pub fn tls_ca() -> Option<PathBuf> {
    TLS.get().map(|(cert, _)| cert.clone())
}

/// The run's certificate and key files, when the run is TLS.
pub fn tls_files() -> Option<(PathBuf, PathBuf)> {
    TLS.get().cloned()
}

/// `https` for a TLS run, else `http`.
pub fn scheme() -> &'static str {
    if TLS.get().is_some() {
        "https"
    } else {
        "http"
    }
}

/// Listen backlogs below this are raised before connect storms: a burst of 15,000
/// connects overflows a default 4,096 queue and turns into refused connections.
pub const WANTED_BACKLOG: u64 = 65_535;
/// The backlog sysctls checked (and raised when root).
const BACKLOG_SYSCTLS: &[&str] = &[
    "net.core.somaxconn",
    "net.ipv4.tcp_max_syn_backlog",
    "net.core.netdev_max_backlog",
];

pub struct Ctx {
    /// The base output directory (absolute).
    pub out: PathBuf,
    /// The command line as typed.
    pub command: String,
    /// What was found and set in the kernel, one line each.
    pub sysctls: Vec<String>,
    /// Server event loops to ask for, if given.
    pub loops: Option<u32>,
    /// The `myriad` executable serving (`--server-bin`); `None`: this one.
    pub server_bin: Option<PathBuf>,
    /// `--durable-history`: where servers keep history (empty at each start).
    pub durable_history: Option<super::history::DurableHistory>,
    /// `--bench-postgres`, `--bench-nats`: where that is.
    pub bench_postgres: String,
    pub bench_nats: String,
    /// `--server-flag`: appended to every server's command line.
    pub server_flags: Vec<String>,
}

impl Ctx {
    pub fn new(args: &BenchArgs) -> anyhow::Result<Ctx> {
        std::fs::create_dir_all(&args.out)
            .with_context(|| format!("cannot create {}", args.out.display()))?;
        let out = args.out.canonicalize()?;
        let command = std::env::args()
            .map(|a| if a.contains(' ') { format!("'{a}'") } else { a })
            .collect::<Vec<_>>()
            .join(" ");
        let mut sysctls = tune(!args.no_tune);
        if !args.server_flags.is_empty() {
            sysctls.push(format!(
                "server flags added: {} (--server-flag)",
                args.server_flags.join(" ")
            ));
        }
        if let Some(history) = args.durable_history {
            sysctls.push(format!(
                "history: durable in {history} (--durable-history), emptied before each server"
            ));
        }
        if let Some(bin) = &args.server_bin {
            anyhow::ensure!(
                bin.is_file(),
                "--server-bin {}: no such file",
                bin.display()
            );
            sysctls.push(format!(
                "server executable: {} (--server-bin)",
                bin.display()
            ));
        }
        for line in &sysctls {
            eprintln!("bench: {line}");
        }
        // The bench process holds connections itself (keepalive) and runs flood here.
        host::sys::raise_nofile();
        if args.tls {
            let names: Vec<String> = tls::DEFAULT_NAMES.iter().map(|n| n.to_string()).collect();
            let dir = out.join("tls");
            std::fs::create_dir_all(&dir)?;
            let files = tls::self_signed(&names)?.write(&dir)?;
            let _ = TLS.set(files);
        }
        if args.h2 {
            let _ = H2.set(args.streams_per_connection.max(1));
        }
        Ok(Ctx {
            out,
            command,
            sysctls,
            loops: args.loops,
            server_bin: args.server_bin.clone(),
            durable_history: args.durable_history,
            bench_postgres: args.bench_postgres.clone(),
            bench_nats: args.bench_nats.clone(),
            server_flags: args.server_flags.clone(),
        })
    }

    /// DIR/<scenario>, created.
    pub fn dir(&self, scenario: &str) -> anyhow::Result<PathBuf> {
        let d = self.out.join(scenario);
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
        Ok(d)
    }

    /// Starts `myriad serve` on a free loopback port, memory store, writing `csv`.
    pub fn server(&self, csv: &Path, extra: &[&str]) -> anyhow::Result<ServerProcess> {
        let a = self.server_args(csv, extra)?;
        let server = ServerProcess::start_bin(self.server_bin.as_deref(), &a)?;
        // Let it finish starting its loops before the first RSS reading.
        std::thread::sleep(std::time::Duration::from_millis(500));
        Ok(server)
    }

    /// The same server as one supervisor of a router and `gateways` gateway
    /// processes on the port (`serve --processes`), linked through a NATS server it
    /// starts on a free port: what holds more than one process's files. Its
    /// children, that NATS server included, count in its CPU and memory; its
    /// `/stats` (admin listener) sums the gateways' counters, and its admin listener
    /// answers `GET /presence/…` from the router.
    pub fn supervised_server(
        &self,
        csv: &Path,
        extra: &[&str],
        gateways: u32,
    ) -> anyhow::Result<ServerProcess> {
        let nats = format!("nats://127.0.0.1:{}", super::c1m_setup::free_port()?);
        let gateways = gateways.to_string();
        let mut own = vec!["--processes", gateways.as_str(), "--nats", nats.as_str()];
        if TLS.get().is_none() {
            own.extend(["--admin", "127.0.0.1:0"]);
        }
        let a = self.server_args(csv, &[&own[..], extra].concat())?;
        let mut server = ServerProcess::start_bin_at(
            self.server_bin.as_deref(),
            &a,
            "myriad supervisor serving",
        )?;
        // Every child has said it serves before the supervisor's line.
        server.workers = super::c1m_watch::children_of(server.child.id());
        std::thread::sleep(std::time::Duration::from_millis(500));
        Ok(server)
    }

    /// The command line of [`Ctx::server`].
    fn server_args(&self, csv: &Path, extra: &[&str]) -> anyhow::Result<Vec<String>> {
        let (store, history_flags) = super::history::server_store(
            self.durable_history,
            csv,
            &self.bench_postgres,
            &self.bench_nats,
        )?;
        let mut a: Vec<String> = vec![
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--store".into(),
            store,
            "--csv".into(),
            csv.display().to_string(),
        ];
        a.extend(history_flags);
        if let Some(l) = self.loops {
            a.push("--loops".into());
            a.push(l.to_string());
        }
        if let Some((cert, key)) = TLS.get() {
            // The admin listener answers /stats in plain HTTP for the probes.
            a.extend(["--admin".into(), "127.0.0.1:0".into()]);
            a.extend(["--tls-cert".into(), cert.display().to_string()]);
            a.extend(["--tls-key".into(), key.display().to_string()]);
        }
        a.extend(extra.iter().map(|s| s.to_string()));
        a.extend(self.server_flags.iter().cloned());
        Ok(a)
    }

    /// The scenario's server: the `--peer` server when given (it writes no CSV), else
    /// `myriad serve` writing `csv`, which is returned for the report.
    pub fn server_or_peer(
        &self,
        peer: Option<super::Peer>,
        dir: &Path,
        csv: &Path,
    ) -> anyhow::Result<(ServerProcess, Option<std::path::PathBuf>)> {
        match peer {
            Some(peer) => {
                anyhow::ensure!(
                    scheme() == "http",
                    "the peers serve plain HTTP only: --tls and --peer do not go together"
                );
                Ok((super::peer::start(peer, dir)?, None))
            }
            None => Ok((self.server(csv, &[])?, Some(csv.to_path_buf()))),
        }
    }
}

/// Kernel settings that shape the figures and are only reported (never changed): TIME_WAIT
/// reuse and the FIN timeout bound connect storms, the socket buffer sizes set how much a
/// slow subscriber queues in the kernel, the file limits how many sockets one process holds.
const REPORTED_SYSCTLS: &[&str] = &[
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_rmem",
    "net.core.wmem_default",
    "fs.nr_open",
    "fs.file-max",
];

/// Checks the backlog sysctls, raising those below [`WANTED_BACKLOG`] when `raise`, and
/// reads [`REPORTED_SYSCTLS`].
fn tune(raise: bool) -> Vec<String> {
    let reported = REPORTED_SYSCTLS.iter().map(|name| {
        let value = read_sysctl(name).unwrap_or_else(|| "unreadable".into());
        format!(
            "{name} = {} (reported only)",
            value.split_whitespace().collect::<Vec<_>>().join(" ")
        )
    });
    BACKLOG_SYSCTLS
        .iter()
        .map(|name| {
            let Some(now) = read_sysctl_number(name) else {
                return format!("{name}: unreadable");
            };
            if now >= WANTED_BACKLOG {
                return format!("{name} = {now} (already ≥ {WANTED_BACKLOG}, left alone)");
            }
            if !raise {
                return format!("{name} = {now} (below {WANTED_BACKLOG}; --no-tune)");
            }
            match write_sysctl(name, &WANTED_BACKLOG.to_string()) {
                Ok(()) => format!("{name} = {WANTED_BACKLOG} (raised from {now} by bench)"),
                Err(e) => format!("{name} = {now} (could not raise to {WANTED_BACKLOG}: {e})"),
            }
        })
        .chain(reported)
        .collect()
}

/// Machine facts for the report, one Markdown list item each.
pub fn machine_facts() -> Vec<String> {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = host::sys::read_proc("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown".to_string(), |x| x.1.trim().to_string());
    let (soft, hard) = host::sys::nofile();
    let load = host::sys::read_proc("/proc/loadavg").unwrap_or_default();
    let mem = observe::procfs::read_meminfo().unwrap_or_default();
    const GIB: f64 = (1u64 << 30) as f64;
    vec![
        format!("cores: {cores} ({model})"),
        format!("kernel: Linux {kernel}"),
        format!(
            "memory: {:.1} GiB total, {:.1} GiB available at report time",
            mem.total as f64 / GIB,
            mem.available as f64 / GIB
        ),
        format!("open files per process: soft {soft}, hard {hard}"),
        format!("load average at report time: {load}"),
        format!(
            "port range: {}",
            host::sys::read_proc("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default()
        ),
    ]
}

/// Socket slab caches (`observe::procfs::SOCKET_SLABS`: TCP, socket inodes, ...) plus
/// kernel TCP buffer pages, bytes; `None` when /proc/slabinfo is unreadable (not root).
/// Narrower than `kernel_socket_bytes` (all of Slab), so less moved by other work.
pub fn socket_slab_bytes() -> Option<u64> {
    let slab = observe::procfs::read_slabinfo()?;
    Some(slab.socket_bytes + crate::server_process::tcp_mem_bytes())
}

/// Machine-wide count of connections the kernel dropped because a listen queue was
/// full (`TcpExt: ListenOverflows` in /proc/net/netstat): each one costs the client a
/// SYN retransmit (1 s, then 3 s), which shows up as a slower connect rate.
pub fn listen_overflows() -> u64 {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "ListenOverflows")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_facts_name_cores_and_kernel() {
        let f = machine_facts();
        assert!(f[0].starts_with("cores: "));
        assert!(f[1].starts_with("kernel: Linux "));
        assert!(f[2].starts_with("memory: ") && !f[2].starts_with("memory: 0.0"));
        assert!(std::fs::read_to_string("/proc/net/netstat")
            .is_ok_and(|t| t.contains("ListenOverflows")));
        let _ = listen_overflows();
    }
}
