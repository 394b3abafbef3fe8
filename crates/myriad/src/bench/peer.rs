//! The peer server `bench broadcast --peer node` runs instead of `myriad serve`: a
//! Node.js cluster of [`WORKERS`] processes, one `res.write` per subscriber
//! (`peer_node.js`, written into the scenario's directory and run with `node` from
//! PATH). It serves the one-user shape (GET /sub/ID, POST /pub/ID) and a partial /stats.
//!
//! Not here: the ladder it is measured with (see `ladder`).

use crate::server_process::ServerProcess;
use anyhow::Context;
use std::path::Path;
use std::process::{Command, Stdio};

/// Worker processes of the Node.js cluster: one per core of the reference machine.
pub const WORKERS: u32 = 2;
/// The server's source, shipped in the binary.
const SOURCE: &str = include_str!("peer_node.js");

/// Starts the Node.js peer on a free loopback port; killed (with its workers, which
/// exit when the primary's IPC channel closes) when the handle drops.
pub fn start_node(dir: &Path) -> anyhow::Result<ServerProcess> {
    let script = dir.join("peer_node.js");
    std::fs::write(&script, SOURCE)
        .with_context(|| format!("cannot write {}", script.display()))?;
    // A cluster's workers share one listening socket: pick the port here.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut cmd = Command::new("node");
    cmd.arg(&script)
        .env("PORT", port.to_string())
        .env("WORKERS", WORKERS.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    ServerProcess::start_command(cmd)
        .context("cannot start the Node.js peer (is `node` on PATH? apt-get install nodejs)")
}
