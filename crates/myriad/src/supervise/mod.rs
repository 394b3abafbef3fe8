//! `myriad serve --processes N|auto`: one server on several processes (SPEC E2). The
//! supervisor (this process) starts one router (`serve --role router`) and N gateways
//! (`serve --role gateway --leave-when-full`) on the same listen port (SO_REUSEPORT),
//! linked through NATS; restarts a child that dies (at once, or 1 s after its start
//! when it dies young, so a child that cannot start does not spin); serves the admin
//! listener for all of them; holds the per-address table its gateways share
//! (`--max-per-ip` for the whole server; a dead gateway's counts are reclaimed
//! before its place restarts); and on SIGTERM or SIGINT stops the gateways, then
//! the router (each drains first), then a NATS server it started, and exits 0.
//!
//! Layout: [`plan`] counts gateways; [`child`] starts one child; [`nats`] finds or
//! starts NATS; [`processes`] gathers every child's figures for `/stats` and
//! `/metrics`; [`presence`] hands `GET /presence/…` on the admin listener to the
//! owning router.

pub mod child;
pub mod nats;
pub mod plan;
pub mod presence;
pub mod processes;

use crate::serve::ServeArgs;
use child::{Member, Role, Template};
use plan::Processes;
use std::net::SocketAddr;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the supervisor looks for dead children: well inside the 1 s restart
/// promise, and a `waitpid(WNOHANG)` per child costs nothing.
const CHECK_EVERY: Duration = Duration::from_millis(20);
/// A child that dies younger than this is restarted only this long after its start.
const MIN_LIFETIME: Duration = Duration::from_secs(1);
/// How long a child may take to announce that it serves: the router builds the
/// follower index from the store first (30 M subscriptions of a million-user graph).
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a child may take to exit after SIGTERM before it is killed, beyond
/// its `--drain` time (gateways and routers drain within it, then exit).
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

pub fn run(args: &ServeArgs, processes: Processes) -> anyhow::Result<()> {
    host::sys::catch_interrupt();
    let nofile = host::sys::raise_nofile().max(host::sys::nofile().1);
    let plan = plan::plan(processes, args.gateway.max_connections, nofile)?;
    let nats_config = args.cluster.nats_config()?;
    let nats = nats::ensure(&nats_config)?;
    raise_migrate_req();
    // Holds the port between gateway restarts (bound, never listening: it takes no
    // connections) and resolves port 0 to the one every gateway joins.
    let port = reserve_port(args.gateway.listen)?;
    let listen = port.local_addr()?.as_socket().expect("an inet socket");
    let mut template = Template::new(listen, plan.per_gateway, self_signed(args)?, secrets(args))?;
    // `--max-per-ip` for the server as a whole: one table of counts every gateway
    // shares (`gateway::peers`); a dead gateway's counts are reclaimed before its
    // place starts again.
    let peers = match args.gateway.max_per_ip {
        0 => None,
        _ => {
            let capacity = gateway::peers::capacity_for(args.gateway.max_connections);
            let places = u32::try_from(plan.gateways)?;
            let (table, fd) = gateway::peers::PeerTable::shared(capacity, places)?;
            template.peer_table = Some(fd);
            Some(table)
        }
    };
    // Said once here, not by each gateway (the routers say it of their publish port).
    let has_key = !args.gateway.api_keys.is_empty();
    if let Some(warning) = connection::open_api_warning(listen, has_key, "--listen") {
        tracing::warn!("{warning}");
    }

    let shards = args.cluster.shards()?.count;
    let roles = (0..shards)
        .map(Role::Router)
        .chain((0..plan.gateways).map(Role::Gateway));
    let members: Vec<Member> = roles
        .map(|role| template.spawn(role, 0))
        .collect::<anyhow::Result<_>>()?;
    let members = Arc::new(Mutex::new(members));
    wait_ready(&members)?;

    let table = processes::Table::new(members.clone());
    let monitor = observe::monitor::Monitor::start(
        observe::metrics::ProcessMetrics::new(0),
        observe::monitor::MonitorOptions {
            csv: args.csv.clone(),
            admin: args.admin,
            extra: table.stats_fn(),
            // `GET /presence/…`: asked of the owning router's admin listener.
            query: Some(presence::hook(
                members.clone(),
                shards,
                cluster::publish_port::api_keys(&args.gateway.api_keys)?,
            )),
            slab: true,
        },
    )?;
    monitor.set_children(table.samples_fn());
    let off = || "off".to_string();
    tracing::info!(
        listen = %listen,
        admin = %monitor.admin_addr().map_or_else(off, |a| a.to_string()),
        gateways = plan.gateways,
        per_gateway = plan.per_gateway,
        nats = %nats_config.shown(),
        nats_auth = %nats_config.describe_auth(),
        nats_tls = %nats_config.describe_tls(),
        nats_started = nats.is_some(),
        "myriad supervisor serving: {shards} router and {} gateway processes on one port",
        plan.gateways
    );

    while !host::sys::interrupted() {
        std::thread::sleep(CHECK_EVERY);
        let mut members = lock(&members);
        for member in members.iter_mut() {
            restart_if_dead(&template, member, peers.as_ref())?;
        }
    }
    tracing::info!("stopping: gateways, then the router");
    drop(monitor);
    let mut members = lock(&members);
    for member in members
        .iter_mut()
        .filter(|m| matches!(m.role, Role::Gateway(_)))
    {
        signal(&member.child, libc::SIGTERM);
    }
    // The gateways drain first (their clients reconnect elsewhere or later), the
    // routers after them: they answer the gateways' goodbyes until then.
    let drain = Duration::try_from_secs_f64(args.gateway.drain).unwrap_or_default();
    for member in members.iter_mut().rev() {
        stop(&mut member.child, &member.role.name(), drain + STOP_TIMEOUT);
    }
    drop(nats);
    drop(port);
    tracing::info!("stopped");
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits until every child said it serves (the gateways have bound the port).
fn wait_ready(members: &Mutex<Vec<Member>>) -> anyhow::Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let mut members = lock(members);
        if members.iter().all(Member::is_ready) {
            return Ok(());
        }
        for member in members.iter_mut() {
            if let Some(status) = member.child.try_wait()? {
                anyhow::bail!(
                    "the {} exited while starting ({status}); its log is above",
                    member.role.name()
                );
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "children did not start within {START_TIMEOUT:?}"
        );
        drop(members);
        std::thread::sleep(CHECK_EVERY);
    }
}

/// Restarts `member` if it exited; a gateway's per-address counts are given back
/// first (it died holding them, perhaps even the table's lock).
fn restart_if_dead(
    template: &Template,
    member: &mut Member,
    peers: Option<&gateway::peers::PeerTable>,
) -> anyhow::Result<()> {
    let Some(status) = member.child.try_wait()? else {
        return Ok(());
    };
    if let (Role::Gateway(place), Some(peers)) = (member.role, peers) {
        peers.reclaim(place as u32, member.pid());
    }
    let lived = member.started.elapsed();
    tracing::warn!(
        role = %member.role.name(),
        pid = member.pid(),
        %status,
        lived_ms = lived.as_millis() as u64,
        "child died; restarting"
    );
    if lived < MIN_LIFETIME {
        std::thread::sleep(MIN_LIFETIME - lived);
    }
    *member = template.spawn(member.role, member.restarts + 1)?;
    tracing::info!(role = %member.role.name(), pid = member.pid(), restarts = member.restarts, "child restarted");
    Ok(())
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on the pid of a child we have not reaped yet (it cannot be reused).
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
}

/// SIGTERM, then SIGKILL after `timeout`; reaps the child.
pub(crate) fn stop(child: &mut Child, name: &str, timeout: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    signal(child, libc::SIGTERM);
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(CHECK_EVERY);
    }
    tracing::warn!(
        name,
        pid = child.id(),
        "did not stop on SIGTERM; killing it"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// What the children get in their environment instead of their arguments: the
/// values of `--nats` (it may hold a password), `--api-key` and `--jwt-secret`.
fn secrets(args: &ServeArgs) -> Vec<(&'static str, String)> {
    let mut env = vec![("MYRIAD_NATS", args.cluster.nats.clone())];
    if !args.gateway.api_keys.is_empty() {
        env.push(("MYRIAD_API_KEY", args.gateway.api_keys.join(",")));
    }
    if let Some(secret) = &args.gateway.jwt_secret {
        env.push(("MYRIAD_JWT_SECRET", secret.clone()));
    }
    env
}

/// `--tls self-signed`: one certificate for the whole server, made here and passed to
/// every gateway as `--tls-cert`/`--tls-key` (each gateway making its own would give
/// clients a different certificate per gateway, and a new one at every restart).
fn self_signed(
    args: &ServeArgs,
) -> anyhow::Result<Option<(std::path::PathBuf, std::path::PathBuf)>> {
    if args.gateway.tls.is_none() {
        return Ok(None);
    }
    let names: Vec<String> = tls::DEFAULT_NAMES.iter().map(|n| n.to_string()).collect();
    let dir = std::env::temp_dir().join(format!("myriad-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (cert, key) = tls::self_signed(&names)?.write(&dir)?;
    tracing::warn!(
        tls_ca = %cert.display(),
        "TLS with a self-signed certificate for every gateway (generated now; browsers will warn): clients trust it with curl --cacert {}",
        cert.display()
    );
    Ok(Some((cert, key)))
}

/// Gateways leave the listening group when full; without `tcp_migrate_req` the
/// clients still queued at a leaving gateway are reset (docs/decisions/supervisor-and-listening-group.md). Raised
/// when this process may (root), saying so; otherwise a warning says what to set.
fn raise_migrate_req() {
    let key = host::doctor::MIGRATE_SYSCTL;
    match observe::procfs::read_sysctl(key) {
        Some(v) if v == "1" => {}
        Some(v) => match observe::procfs::write_sysctl(key, "1") {
            Ok(()) => tracing::warn!("raised {key} from {v} to 1: a full gateway's queued clients move to the others"),
            Err(e) => tracing::warn!(
                error = %e,
                "{key} is {v}: clients queued at a gateway that fills up may be reset; set `sysctl -w {key}=1`"
            ),
        },
        None => tracing::warn!("{key} is not available (Linux < 5.14): clients queued at a gateway that fills up may be reset"),
    }
}

/// A socket bound to `addr` with SO_REUSEPORT and never listening: the port stays this
/// server's while every gateway restarts, and port 0 becomes a real port.
fn reserve_port(addr: SocketAddr) -> anyhow::Result<socket2::Socket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket
        .bind(&addr.into())
        .map_err(|e| anyhow::anyhow!("cannot bind {addr}: {e}"))?;
    Ok(socket)
}
