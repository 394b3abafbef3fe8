//! What `bench c1m` starts, and with which flags: doctor's checks first (raising what
//! they name when allowed), then the supervised server's command line, and the plan of
//! its clients (one flood per transport, over child processes and source addresses).
//!
//! Not here: starting and watching them (`c1m_watch`), the phases (`c1m`).

use super::held::{flood_args, Live};
use super::report::Report;
use super::{BenchArgs, Ctx, PublishVia};
use load::flood::{FloodArgs, Transport};
use std::path::Path;

/// Connections per flood child process (under the 20,000-file limit).
pub(super) const PER_FLOOD_PROCESS: u64 = 18_000;
/// Publishing connections, each waiting for its reply: enough that the asked rates
/// are reached with replies of several milliseconds at 1 M (16 reached 560–670 graph
/// and 5,800–7,600 unicast publishes/s there: the phases were paced by the replies).
pub(super) const PUBLISHERS: usize = 64;
/// Hard bound on every flood (they stop by themselves), seconds.
const FLOOD_MAX_TIME: f64 = 1_500.0;

/// Runs doctor's checks for `n`; applies its `sysctl -w` fixes when `raise` (root),
/// saying each; stops on what still blocks.
pub(super) fn doctor(n: u64, raise: bool, live: &Live, report: &mut Report) -> anyhow::Result<()> {
    use host::doctor::Level;
    for c in host::doctor::checks(n) {
        if c.level == Level::Ok {
            continue;
        }
        let mut fixed = false;
        for fix in c.fix.iter().filter_map(|f| f.strip_prefix("sysctl -w ")) {
            let Some((key, value)) = fix.split_once('=') else {
                continue;
            };
            let value = value.trim_matches('"');
            let msg = if !raise {
                format!(
                    "doctor: {}: {} — not raised (--no-tune): {key}={value}",
                    c.name, c.detail
                )
            } else {
                match observe::procfs::write_sysctl(key, value) {
                    Ok(()) => {
                        fixed = true;
                        format!("doctor: {}: {} — raised {key} to {value}", c.name, c.detail)
                    }
                    Err(e) => format!("doctor: {}: could not set {key}={value}: {e}", c.name),
                }
            };
            live.emit(msg.clone());
            report.note(msg);
        }
        if !fixed {
            live.emit(format!("doctor: {}: {} ({:?})", c.name, c.detail, c.level));
        }
    }
    let blocking: Vec<String> = host::doctor::checks(n)
        .into_iter()
        .filter(|c| c.level == Level::Block)
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    anyhow::ensure!(
        blocking.is_empty(),
        "doctor: cannot hold {n} connections here: {}",
        blocking.join("; ")
    );
    Ok(())
}

/// The supervised server's flags for `n` connections over the store `db`, linked
/// through a nats-server at `nats` that the supervisor starts; and, with
/// `--publish-via router`, the address of the router's publish port.
pub(super) fn serve_flags(
    args: &BenchArgs,
    ctx: &Ctx,
    n: u64,
    db: &Path,
    nats: &str,
    dir: &Path,
) -> anyhow::Result<(Vec<String>, Option<String>)> {
    let mut serve = vec![
        "--processes".to_string(),
        args.servers.map_or("auto".into(), |s| s.to_string()),
        "--max-connections".into(),
        (n + n / 50 + 1_000).to_string(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--admin".into(),
        "127.0.0.1:0".into(),
        "--store".into(),
        format!("sqlite:{}", db.display()),
        "--nats".into(),
        nats.to_string(),
        "--loops".into(),
        ctx.loops.unwrap_or(1).to_string(),
        "--csv".into(),
        dir.join("supervisor.csv").display().to_string(),
    ];
    serve.extend(heartbeat_flags(&args.server_flags));
    // `--publish-via router`: the router's own publish port, plain HTTP.
    let publish_port = match args.publish_via {
        PublishVia::Router => {
            let addr = format!("127.0.0.1:{}", free_port()?);
            serve.extend(["--publish-listen".into(), addr.clone()]);
            Some(addr)
        }
        PublishVia::Http | PublishVia::Nats => None,
    };
    if let Some((cert, key)) = super::context::tls_files() {
        // Forwarded to every gateway; the admin listeners stay plain for the probes.
        serve.extend(["--tls-cert".into(), cert.display().to_string()]);
        serve.extend(["--tls-key".into(), key.display().to_string()]);
    }
    // `--server-flag`s go to the supervisor, which gives them to every child (e.g.
    // `--server-flag=--router-shards=2`).
    serve.extend(args.server_flags.iter().cloned());
    Ok((serve, publish_port))
}

/// `n` connections to `url` (users 1..=N), a third per transport: one named flood
/// each, writing `dir/flood-<name>.csv`.
pub(super) fn flood_plan(
    n: u64,
    url: &str,
    dir: &Path,
    args: &BenchArgs,
) -> anyhow::Result<Vec<(String, FloodArgs)>> {
    let mut source = 2u64;
    let mut first_user = 1u64;
    let mut floods = Vec::new();
    let transports = [Transport::Stream, Transport::Sse, Transport::Ws];
    for (i, tr) in transports.into_iter().enumerate() {
        let share = n / 3 + u64::from((i as u64) < n % 3);
        if share == 0 {
            continue;
        }
        let name = format!("{tr:?}").to_lowercase();
        let mut fa = flood_args(
            vec![url.to_string()],
            share,
            tr,
            Some(dir.join(format!("flood-{name}.csv"))),
        );
        fa.first_user = first_user;
        // A whole number of source addresses per flood process: each process then
        // owns its addresses, and the gateways' heartbeats, phased by peer address on
        // the grid, wake each process for its own connections in one instant.
        let procs = share.div_ceil(PER_FLOOD_PROCESS);
        let sources = share
            .div_ceil(host::doctor::connections_per_source())
            .div_ceil(procs)
            * procs;
        anyhow::ensure!(
            source + sources <= 255,
            "too many connections for 127.0.0.x sources"
        );
        fa.sources = vec![format!("127.0.0.{source}-127.0.0.{}", source + sources - 1)];
        fa.procs = procs.to_string();
        fa.connect_timeout = 30.0;
        // The three floods together keep flood's default in flight: with 3 × 4,096
        // waiting for their heads, ~2.5 % of 100,000 got a bad status (measured).
        fa.max_inflight = FloodArgs::default().max_inflight / transports.len();
        fa.max_time = FLOOD_MAX_TIME;
        fa.latency_at = args.client_latency;
        fa.nice = args.client_nice;
        source += sources;
        first_user += share;
        floods.push((name, fa));
    }
    Ok(floods)
}

/// A free loopback port (the run's own nats-server, the router's publish port).
pub(super) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// SPEC's 20-s heartbeats, unless a `--server-flag` sets its own (to see what the
/// beats cost, e.g. `--server-flag=--heartbeat=3600`).
fn heartbeat_flags(server_flags: &[String]) -> Vec<String> {
    let own = server_flags
        .iter()
        .any(|f| f == "--heartbeat" || f.starts_with("--heartbeat="));
    if own {
        vec![]
    } else {
        vec!["--heartbeat".into(), "20".into()]
    }
}

/// The tick groups the supervisor's gateways will use, for the report: the last
/// `--tick-groups` among the server flags, else `MYRIAD_TICK_GROUPS` (the supervisor
/// inherits the bench's environment), else the default.
pub(super) fn tick_groups(server_flags: &[String]) -> String {
    flag(server_flags, "--tick-groups")
        .or_else(|| std::env::var("MYRIAD_TICK_GROUPS").ok())
        .unwrap_or_else(|| gateway::config::DEFAULT_TICK_GROUPS.to_string())
}

/// How the gateways beat, for a peer that is to beat alike (`--peer floor`): the
/// period in seconds (20, or a `--heartbeat` server flag), the grid in ms (a
/// `--heartbeat-grid` flag or `MYRIAD_HEARTBEAT_GRID`, in seconds, else 50 ms) and
/// the tick groups.
pub(super) fn beat_shape(server_flags: &[String]) -> (u32, u32, u32) {
    let heartbeat = flag(server_flags, "--heartbeat")
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(20, |s| s.round() as u32);
    let grid = flag(server_flags, "--heartbeat-grid")
        .or_else(|| std::env::var("MYRIAD_HEARTBEAT_GRID").ok())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(
            gateway::config::DEFAULT_HEARTBEAT_GRID.as_millis() as u32,
            |s| (s * 1000.0).round() as u32,
        );
    let groups = tick_groups(server_flags).parse().unwrap_or(1);
    (heartbeat, grid, groups)
}

/// The last value of `--name` among `flags` (`--name=v` or `--name v`).
fn flag(flags: &[String], name: &str) -> Option<String> {
    let mut value = None;
    let mut it = flags.iter();
    while let Some(f) = it.next() {
        if let Some(v) = f.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
            value = Some(v.to_string());
        } else if f == name {
            value = it.next().cloned();
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::{beat_shape, heartbeat_flags, tick_groups};

    #[test]
    fn a_peer_beats_as_the_server_flags_say() {
        let shape = |f: &[&str]| beat_shape(&f.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        if std::env::var_os("MYRIAD_HEARTBEAT_GRID").is_none()
            && std::env::var_os("MYRIAD_TICK_GROUPS").is_none()
        {
            assert_eq!(shape(&[]), (20, 50, 5));
        }
        let (hb, grid, groups) = shape(&[
            "--heartbeat=30",
            "--heartbeat-grid",
            "0.02",
            "--tick-groups=3",
        ]);
        assert_eq!((hb, grid, groups), (30, 20, 3));
        assert_eq!(
            shape(&["--heartbeat-grid=0.1"]).0,
            20,
            "another flag is not the period"
        );
    }

    #[test]
    fn the_report_names_the_tick_groups_a_server_flag_sets() {
        let groups = |f: &[&str]| tick_groups(&f.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        if std::env::var_os("MYRIAD_TICK_GROUPS").is_none() {
            assert_eq!(
                groups(&[]),
                gateway::config::DEFAULT_TICK_GROUPS.to_string()
            );
        }
        assert_eq!(groups(&["--tick-groups=1"]), "1");
        assert_eq!(groups(&["--heartbeat=3600", "--tick-groups", "3"]), "3");
        assert_eq!(
            groups(&["--tick-groups=2", "--tick-groups=10"]),
            "10",
            "the last wins"
        );
    }

    #[test]
    fn the_spec_heartbeat_unless_a_server_flag_sets_one() {
        let flags =
            |f: &[&str]| heartbeat_flags(&f.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(flags(&[]), ["--heartbeat", "20"]);
        assert_eq!(
            flags(&["--heartbeat-grid=0.01"]),
            ["--heartbeat", "20"],
            "another flag"
        );
        assert!(flags(&["--heartbeat=3600"]).is_empty());
        assert!(flags(&["--heartbeat", "3600"]).is_empty());
    }
}
