//! The NATS server a supervised server links its processes through: found answering
//! at `--nats`, or — when none answers on this host and Debian's `nats-server` is
//! installed — started as a child (JetStream on, its store in a temporary directory)
//! and stopped with the server. Otherwise the error says how to start one. A NATS
//! with credentials or TLS is one the operator runs: never started here.

use anyhow::Context;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a NATS server may take to answer (found or just started).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// A `nats-server` the supervisor started; stopped on drop.
pub struct NatsChild {
    child: Child,
    _store: tempfile::TempDir,
}

impl NatsChild {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for NatsChild {
    fn drop(&mut self) {
        super::stop(&mut self.child, "nats-server", super::STOP_TIMEOUT);
    }
}

/// Makes sure a NATS server answers at the first of `config`'s servers.
pub fn ensure(config: &cluster::NatsConfig) -> anyhow::Result<Option<NatsChild>> {
    let url = config.shown();
    let addr = first_address(&config.servers()[0])?;
    if answers(addr, Duration::from_secs(1)) {
        return Ok(None);
    }
    anyhow::ensure!(
        !config.is_secured(),
        "no NATS server answers at {url}; with NATS credentials or TLS the supervisor \
         does not start one of its own: start the nats-server they are for"
    );
    let Some(binary) = installed().filter(|_| addr.ip().is_loopback()) else {
        anyhow::bail!(
            "no NATS server answers at {url}; start one (`apt-get install nats-server`, then \
             `nats-server -js`) or pass --nats URL"
        );
    };
    let store = tempfile::Builder::new().prefix("myriad-nats-").tempdir()?;
    let mut command = Command::new(&binary);
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag on the child; nothing that
    // allocates or locks runs between fork and exec. A supervisor killed by SIGKILL
    // cannot stop its nats-server itself.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let child = command
        .args([
            "-a",
            &addr.ip().to_string(),
            "-p",
            &addr.port().to_string(),
            "-js",
            "-sd",
        ])
        .arg(store.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", binary.display()))?;
    let nats = NatsChild {
        child,
        _store: store,
    };
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    while !answers(addr, Duration::from_millis(200)) {
        anyhow::ensure!(
            Instant::now() < deadline,
            "started {} for {url}, but it did not answer within {ANSWER_TIMEOUT:?}",
            binary.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    tracing::warn!(
        %url,
        pid = nats.pid(),
        binary = %binary.display(),
        "no NATS server answered: started nats-server (JetStream) as a child; it stops with this server"
    );
    Ok(Some(nats))
}

/// The socket address of one server URL (without user information).
fn first_address(url: &str) -> anyhow::Result<SocketAddr> {
    let hostport = url.split_once("://").map_or(url, |(_, rest)| rest);
    let hostport = hostport.split('/').next().unwrap_or(hostport);
    let with_port = if hostport.contains(':') {
        hostport.to_string()
    } else {
        format!("{hostport}:4222")
    };
    with_port
        .to_socket_addrs()
        .with_context(|| format!("bad NATS address {url}"))?
        .next()
        .with_context(|| format!("NATS address {url} resolves to nothing"))
}

fn answers(addr: SocketAddr, timeout: Duration) -> bool {
    TcpStream::connect_timeout(&addr, timeout).is_ok()
}

/// Debian's `nats-server` (in `/usr/sbin`, often not on a user's PATH) or one on PATH.
fn installed() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("nats-server"))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_address_of_a_nats_url() {
        let a = first_address("nats://127.0.0.1:4333").unwrap();
        assert_eq!(a, "127.0.0.1:4333".parse().unwrap());
        let a = first_address("tls://127.0.0.1").unwrap();
        assert_eq!(a, "127.0.0.1:4222".parse().unwrap());
    }
}
