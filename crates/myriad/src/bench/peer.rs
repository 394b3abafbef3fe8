//! The peer servers `bench broadcast|unicast|connect|rooms --peer …` run instead of
//! `myriad serve`, so a claim to beat one is measured by the same client in the same
//! run on the same box:
//! - `node`: a Node.js cluster of [`WORKERS`] processes, one `res.write` per
//!   subscriber (`peer_node.js`, written into the scenario's directory and run with
//!   `node` from PATH).
//! - `nchan`: nginx with the nchan module and [`WORKERS`] worker processes
//!   (`peer_nchan.conf`, filled in and written into the scenario's directory; Debian's
//!   `nginx-light` and `libnginx-mod-nchan`).
//! - `floor`: the minimal C epoll server the SPEC's reference figures call the floor
//!   (`peer_floor.c`, [`WORKERS`] threads, one `send` per delivery), compiled with
//!   `cc` into the scenario's directory: what this box allows a push server at all.
//! - `socketio`: Socket.IO with rooms, a Node.js cluster of [`WORKERS`] joined by the
//!   cluster adapter (`peer_socketio.js`; its npm packages installed by `npm` into
//!   the scenario's `socketio/` directory on first use). Rooms only.
//!
//! node, nchan and the floor serve GET /sub/ID as a chunked stream of ID's messages,
//! each followed by "\n" (`flood --transport stream`), POST /pub/ID, and a partial
//! /stats (connections, connects); none has a follower graph: they serve the one-user
//! shape. For rooms, nchan serves a multiplexed WebSocket subscriber at
//! /rooms/sub/r1,r7,… and publishes at /rooms/pub/ROOM; Socket.IO joins the rooms of
//! its handshake's `?rooms=r1,r7,…` and publishes at /pub/ROOM.
//!
//! Not here: the scenarios that measure them.

use super::Peer;
use crate::server_process::ServerProcess;
use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Worker processes of either peer: one per core of the reference machine.
pub const WORKERS: u32 = 2;
/// The Node.js server's source, shipped in the binary.
const NODE_SOURCE: &str = include_str!("peer_node.js");
/// The floor server's source, shipped in the binary.
const FLOOR_SOURCE: &str = include_str!("peer_floor.c");
/// The Socket.IO server's source, shipped in the binary.
const SOCKETIO_SOURCE: &str = include_str!("peer_socketio.js");
/// Its npm packages, pinned (the versions measured in docs/benchmarks.md).
const SOCKETIO_PACKAGE: &str =
    r#"{"private":true,"dependencies":{"socket.io":"4.8.4","@socket.io/cluster-adapter":"0.3.0"}}"#;
/// nginx's configuration for nchan, shipped in the binary.
const NCHAN_CONF: &str = include_str!("peer_nchan.conf");
/// Where Debian's libnginx-mod-nchan puts the module.
const NCHAN_MODULE: &str = "/usr/lib/nginx/modules/ngx_nchan_module.so";
/// How long nginx may take to answer /stats with every worker started.
const NCHAN_START: Duration = Duration::from_secs(10);

/// The server a scenario measures, for its report's title.
pub fn server_name(peer: Option<Peer>) -> String {
    match peer {
        None => "myriad serve".to_string(),
        Some(Peer::Node) => format!("the Node.js peer (cluster of {WORKERS})"),
        Some(Peer::Nchan) => format!("the nchan peer (nginx, {WORKERS} workers)"),
        Some(Peer::Floor) => format!("the C floor (epoll, {WORKERS} threads)"),
        Some(Peer::Socketio) => format!("the Socket.IO peer (cluster of {WORKERS})"),
        Some(Peer::Sockudo) => "the Sockudo peer (one process)".to_string(),
        Some(Peer::Soketi) => "the soketi peer".to_string(),
    }
}

/// Starts `peer` on a free loopback port, writing its files into `dir`. The peers
/// serve plain HTTP only (the caller refuses `--tls` with `--peer`).
pub fn start(peer: Peer, dir: &Path) -> anyhow::Result<ServerProcess> {
    match peer {
        Peer::Node => start_node(dir),
        Peer::Nchan => start_nchan(dir),
        Peer::Floor => start_floor(dir),
        Peer::Socketio => start_socketio(dir),
        Peer::Sockudo => super::peer_pusher::start_sockudo(dir),
        Peer::Soketi => super::peer_pusher::start_soketi(dir),
    }
}

/// A free loopback port: peers whose processes share one listening socket (or bind
/// with SO_REUSEPORT) are told it rather than logging it.
pub(super) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The Node.js cluster; killed (with its workers, which exit when the primary's IPC
/// channel closes) when the handle drops.
fn start_node(dir: &Path) -> anyhow::Result<ServerProcess> {
    let script = dir.join("peer_node.js");
    std::fs::write(&script, NODE_SOURCE)
        .with_context(|| format!("cannot write {}", script.display()))?;
    let mut cmd = Command::new("node");
    cmd.arg(&script)
        .env("PORT", free_port()?.to_string())
        .env("WORKERS", WORKERS.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    ServerProcess::start_command(cmd)
        .context("cannot start the Node.js peer (is `node` on PATH? apt-get install nodejs)")
}

/// The Socket.IO cluster, its packages installed with `npm` into DIR/socketio when
/// missing; killed like the Node.js peer.
fn start_socketio(dir: &Path) -> anyhow::Result<ServerProcess> {
    let root = dir.join("socketio");
    std::fs::create_dir_all(&root)?;
    let script = root.join("peer_socketio.js");
    std::fs::write(&script, SOCKETIO_SOURCE)
        .with_context(|| format!("cannot write {}", script.display()))?;
    let package = root.join("package.json");
    let installed = std::fs::read_to_string(&package).is_ok_and(|p| p == SOCKETIO_PACKAGE)
        && root
            .join("node_modules/@socket.io/cluster-adapter")
            .is_dir()
        && root.join("node_modules/socket.io").is_dir();
    if !installed {
        std::fs::write(&package, SOCKETIO_PACKAGE)?;
        let out = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent"])
            .current_dir(&root)
            .stdin(Stdio::null())
            .output()
            .context("cannot run `npm` to install socket.io (apt-get install npm)")?;
        anyhow::ensure!(
            out.status.success(),
            "npm install in {} failed: {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut cmd = Command::new("node");
    cmd.arg(&script)
        .current_dir(&root)
        .env("PORT", free_port()?.to_string())
        .env("WORKERS", WORKERS.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    ServerProcess::start_command(cmd)
        .context("cannot start the Socket.IO peer (is `node` on PATH? apt-get install nodejs)")
}

/// The C floor, compiled with `cc -O2` from the shipped source (a second or so); it
/// dies with the bench (PR_SET_PDEATHSIG) and is killed when the handle drops. One
/// process of [`WORKERS`] threads, no heartbeats: the shape the one-process scenarios
/// compare.
fn start_floor(dir: &Path) -> anyhow::Result<ServerProcess> {
    start_floor_with(dir, &Floor::default())
}

/// How `bench c1m --peer floor` runs the floor: as many processes as myriad's
/// gateways (one process may hold only 20,000 files here), beating as they do.
#[derive(Clone, Debug)]
pub struct Floor {
    pub threads: u32,
    pub processes: u32,
    /// Heartbeat period in seconds (0: none), on a wall-clock grid of `grid_ms`
    /// shifted 2 ms per process modulo `tick_groups`, as myriad's gateways beat.
    pub heartbeat_s: u32,
    pub grid_ms: u32,
    pub tick_groups: u32,
}

impl Default for Floor {
    fn default() -> Self {
        Floor {
            threads: WORKERS,
            processes: 1,
            heartbeat_s: 0,
            grid_ms: 50,
            tick_groups: 5,
        }
    }
}

/// The C floor as `floor` says; its processes die with the first (PR_SET_PDEATHSIG).
pub fn start_floor_with(dir: &Path, floor: &Floor) -> anyhow::Result<ServerProcess> {
    let source = dir.join("peer_floor.c");
    let program = dir.join("peer_floor");
    std::fs::write(&source, FLOOR_SOURCE)
        .with_context(|| format!("cannot write {}", source.display()))?;
    let out = Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&program)
        .arg(&source)
        .output()
        .context("cannot run `cc` to build the floor peer (apt-get install gcc)")?;
    anyhow::ensure!(
        out.status.success(),
        "cc could not build {}: {}",
        source.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let mut cmd = Command::new(&program);
    cmd.arg(free_port()?.to_string())
        .args(
            [
                floor.threads,
                floor.processes,
                floor.heartbeat_s,
                floor.grid_ms,
                floor.tick_groups,
            ]
            .map(|v| v.to_string()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    ServerProcess::start_command(cmd).context("cannot start the floor peer")
}

/// nginx with nchan in the foreground; its master and workers are killed when the
/// handle drops (the master also dies with the bench: PR_SET_PDEATHSIG).
fn start_nchan(dir: &Path) -> anyhow::Result<ServerProcess> {
    anyhow::ensure!(
        Path::new(NCHAN_MODULE).exists(),
        "the nchan peer needs nginx and its nchan module: \
         apt-get install nginx-light libnginx-mod-nchan ({NCHAN_MODULE} is missing)"
    );
    let port = free_port()?;
    let root = dir.join("nchan");
    std::fs::create_dir_all(&root)?;
    let conf = root.join("nginx.conf");
    let text = NCHAN_CONF
        .replace("@DIR@", &root.display().to_string())
        .replace("@NCHAN@", NCHAN_MODULE)
        .replace("@PORT@", &port.to_string())
        .replace("@WORKERS@", &WORKERS.to_string());
    std::fs::write(&conf, text).with_context(|| format!("cannot write {}", conf.display()))?;
    let log = std::fs::File::create(root.join("error.log"))?;
    let mut cmd = Command::new("nginx");
    cmd.arg("-c")
        .arg(&conf)
        .arg("-p")
        .arg(&root)
        .arg("-e")
        .arg("stderr")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    crate::server_process::die_with_parent(&mut cmd);
    let mut child = cmd
        .spawn()
        .context("cannot start nginx (apt-get install nginx-light libnginx-mod-nchan)")?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            let log = std::fs::read_to_string(root.join("error.log")).unwrap_or_default();
            bail!("nginx exited at start ({status}): {}", log.trim());
        }
        let workers = children(child.id());
        if workers.len() == WORKERS as usize && answers_stats(addr) {
            return Ok(ServerProcess::adopt(child, addr, workers));
        }
        if started.elapsed() > NCHAN_START {
            let _ = child.kill();
            let _ = child.wait();
            bail!("nginx did not answer /stats on {addr} within {NCHAN_START:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The child processes of `pid` (nginx's workers).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn answers_stats(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut out = String::new();
    s.write_all(b"GET /stats HTTP/1.1\r\nHost: peer\r\nConnection: close\r\n\r\n")
        .is_ok()
        && s.read_to_string(&mut out).is_ok()
        && out.starts_with("HTTP/1.1 200")
}
