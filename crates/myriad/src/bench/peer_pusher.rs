//! The Pusher Channels servers `bench pusher --peer sockudo|soketi` runs instead of
//! `myriad serve`, one app ([`APP_ID`], [`APP_KEY`], [`APP_SECRET`]) each, measured
//! by the same client (`flood --transport pusher`) and published to through the same
//! signed `POST /apps/<id>/events` (`msggen --pusher`):
//! - `sockudo` (Rust, crates.io): the `sockudo` executable from PATH or
//!   `~/.cargo/bin` (`cargo install sockudo --locked`, which needs `protoc`:
//!   scripts/setup.sh installs both), configured by `peer_sockudo.toml`: one process,
//!   memory drivers, no rate limiter, no metrics listener.
//! - `soketi` (Node.js, npm `@soketi/soketi`): installed by `npm` into the
//!   scenario's `soketi/` directory on first use, run with its `SOKETI_*`
//!   environment. Its uWebSockets.js dependency comes from GitHub, not npm: where
//!   GitHub is out of reach the install fails and the peer says so (it could not be
//!   installed where the figures of docs/benchmarks.md were measured, so this path
//!   has run only as far as that failure).
//!
//! Not here: the scenario (`pusher`), the other peers (`peer`).

use crate::server_process::ServerProcess;
use anyhow::{bail, Context};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The one app every server of the scenario serves.
pub const APP_ID: &str = "bench";
pub const APP_KEY: &str = "bench-key";
pub const APP_SECRET: &str = "bench-secret";
/// Sockudo's configuration, shipped in the binary.
const SOCKUDO_CONF: &str = include_str!("peer_sockudo.toml");
/// soketi's npm package, pinned (the version the issue names).
const SOKETI_PACKAGE: &str = r#"{"private":true,"dependencies":{"@soketi/soketi":"1.6.1"}}"#;
/// How long a peer may take to accept connections.
const START: Duration = Duration::from_secs(20);

/// `ID:KEY:SECRET` of the app, as `serve --pusher-app` and `msggen --pusher` take it.
pub fn app_spec() -> String {
    format!("{APP_ID}:{APP_KEY}:{APP_SECRET}")
}

/// Sockudo on a free loopback port, its log in DIR/sockudo/sockudo.log.
pub fn start_sockudo(dir: &Path) -> anyhow::Result<ServerProcess> {
    let exe = sockudo_exe().context(
        "the sockudo peer needs the `sockudo` executable: cargo install sockudo --locked \
         (after apt-get install protobuf-compiler); scripts/setup.sh does both",
    )?;
    let root = dir.join("sockudo");
    std::fs::create_dir_all(&root)?;
    let port = super::peer::free_port()?;
    let conf = root.join("sockudo.toml");
    let text = SOCKUDO_CONF
        .replace("@PORT@", &port.to_string())
        .replace("@ID@", APP_ID)
        .replace("@KEY@", APP_KEY)
        .replace("@SECRET@", APP_SECRET);
    std::fs::write(&conf, text).with_context(|| format!("cannot write {}", conf.display()))?;
    let mut cmd = Command::new(&exe);
    cmd.arg("--config").arg(&conf).current_dir(&root);
    start_logged(cmd, &root.join("sockudo.log"), port, "sockudo")
}

/// soketi on a free loopback port, installed into DIR/soketi when missing.
pub fn start_soketi(dir: &Path) -> anyhow::Result<ServerProcess> {
    let root = dir.join("soketi");
    std::fs::create_dir_all(&root)?;
    let package = root.join("package.json");
    let bin = root.join("node_modules/.bin/soketi");
    let installed =
        std::fs::read_to_string(&package).is_ok_and(|p| p == SOKETI_PACKAGE) && bin.exists();
    if !installed {
        std::fs::write(&package, SOKETI_PACKAGE)?;
        let out = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent"])
            .current_dir(&root)
            .stdin(Stdio::null())
            .output()
            .context("cannot run `npm` to install soketi (apt-get install npm)")?;
        anyhow::ensure!(
            out.status.success(),
            "npm install @soketi/soketi in {} failed (its uWebSockets.js comes from \
             GitHub, which npm must reach): {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let port = super::peer::free_port()?;
    let mut cmd = Command::new(&bin);
    cmd.arg("start")
        .current_dir(&root)
        .env("SOKETI_PORT", port.to_string())
        .env("SOKETI_DEFAULT_APP_ID", APP_ID)
        .env("SOKETI_DEFAULT_APP_KEY", APP_KEY)
        .env("SOKETI_DEFAULT_APP_SECRET", APP_SECRET)
        .env("SOKETI_DEFAULT_APP_MAX_CONNECTIONS", "-1")
        .env("SOKETI_DEFAULT_APP_MAX_BACKEND_EVENTS_PER_SEC", "-1")
        .env("SOKETI_METRICS_ENABLED", "false");
    start_logged(cmd, &root.join("soketi.log"), port, "soketi")
}

/// `sockudo` from PATH, else cargo's install directory.
fn sockudo_exe() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("sockudo"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
        Some(home.join("bin/sockudo")).filter(|p| p.is_file())
    })
}

/// Starts `cmd` with its output in `log`, dying with the bench, and waits until it
/// accepts connections on `port`.
fn start_logged(
    mut cmd: Command,
    log: &Path,
    port: u16,
    name: &str,
) -> anyhow::Result<ServerProcess> {
    let file = std::fs::File::create(log)?;
    cmd.stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    crate::server_process::die_with_parent(&mut cmd);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {name}"))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            bail!("{name} exited at start ({status}): {}", text.trim());
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            // Let it finish starting before the first RSS reading.
            std::thread::sleep(Duration::from_millis(500));
            return Ok(ServerProcess::adopt(child, addr, Vec::new()));
        }
        if started.elapsed() > START {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{name} did not accept connections on {addr} within {START:?}; see {}",
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
