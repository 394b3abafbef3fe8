//! `myriad serve`: by default one process holding the gateway loops and the router
//! role behind the in-process bus — open the store, build the subscription index,
//! start the loops and the monitor, and run until killed. With `--role router` or
//! `--role gateway` it runs one side only, linked to the other over NATS (`cluster`).

use anyhow::Context;
use cluster::{ClusterArgs, GatewayLink, Role, RouterRole};
use gateway::config::Ktls;
use gateway::{GatewayArgs, Server};
use hub::args::HistoryStore;
use hub::{Hub, HubArgs, LocalBus};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// `myriad serve`: holds subscriptions and answers the APIs on one listener.
#[derive(clap::Args, Clone, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub gateway: GatewayArgs,
    #[command(flatten)]
    pub hub: HubArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Admin listener: Prometheus /metrics, /healthz, /stats, /history (the last
    /// samples) and the live dashboard.
    #[arg(long, env = "MYRIAD_ADMIN")]
    pub admin: Option<SocketAddr>,
    /// Write one row of process statistics per second to this CSV file.
    #[arg(long, env = "MYRIAD_CSV")]
    pub csv: Option<PathBuf>,
    /// Run as a supervisor of one router and N gateway processes on the listen port,
    /// linked through NATS (`auto`: as many as --max-connections, then the total,
    /// needs under the file limit, plus one spare). Default: one process.
    #[arg(long, env = "MYRIAD_PROCESSES")]
    pub processes: Option<crate::supervise::plan::Processes>,
}

/// One process: the loops and the router here, or one side with `--role` (a
/// supervisor's children are started with one; `cli` sends `--processes` to the
/// supervisor).
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    host::sys::raise_nofile();
    // A loop that panics must not leave a half-alive server (one listener fewer,
    // its connections frozen): abort the whole process so its supervisor restarts
    // it. The default hook prints the panic first.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::abort();
    }));
    let role = args.cluster.role;
    if role == Role::Router {
        return run_router(&args);
    }
    // A supervised gateway is given every flag, this one too: only routers read it.
    anyhow::ensure!(
        args.cluster.publish_listen.is_none() || args.cluster.supervised_place.is_some(),
        "--publish-listen is the router's port (`--role router`, or `serve --processes N`); \
         one process answers POST /pub on its --listen port"
    );
    let term = Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, term.clone())?;
    let mut config = args.gateway.server_config()?;
    if let (Some(fd), true) = (args.gateway.peer_table_fd, args.gateway.max_per_ip > 0) {
        let place = args.cluster.supervised_place.unwrap_or(0);
        config.peers = Some(Arc::new(gateway::peers::PeerTable::open(fd, place)?));
    }
    config.tick_offset =
        gateway::config::tick_offset(args.gateway.tick_groups, args.cluster.supervised_place);
    // `GET /presence/…` on the admin listener: where the hub is in this process.
    let mut query = None;
    let (server, link) = match role {
        Role::Gateway => {
            anyhow::ensure!(
                config.loops <= cluster::loop_id::MAX_LOOPS,
                "a gateway runs at most {} loops over NATS",
                cluster::loop_id::MAX_LOOPS
            );
            let nats = args.cluster.nats_config()?;
            let link = Arc::new(GatewayLink::connect(
                &nats,
                args.cluster.supervised_place,
                args.cluster.shards()?.count,
            )?);
            let stats = link.clone();
            let starter = link.clone();
            let server = Server::start(
                config.clone(),
                Arc::new(move || stats.stats()),
                move |mailboxes| starter.start(mailboxes),
            )?;
            let shown = format!(
                "the router over {} (auth: {}, TLS: {})",
                link.url(),
                nats.describe_auth(),
                nats.describe_tls()
            );
            (server, Some(shown))
        }
        _ => {
            let hub = Arc::new(open_hub(&args)?);
            Hub::start_ticking(&hub)?;
            query = Some(crate::presence_query::hook(
                hub.clone(),
                cluster::publish_port::api_keys(&args.gateway.api_keys)?,
            ));
            let stats_hub = hub.clone();
            let server = Server::start(
                config.clone(),
                Arc::new(move || stats_hub.stats_json()),
                |mailboxes| Arc::new(LocalBus::new(hub, mailboxes)),
            )?;
            (server, None)
        }
    };
    let monitor = observe::monitor::Monitor::start(
        server.metrics(),
        observe::monitor::MonitorOptions {
            csv: args.csv.clone(),
            admin: args.admin,
            extra: server.stats_fn(),
            query,
            // A supervisor's gateways leave the machine-wide socket slab to it.
            slab: args.cluster.supervised_place.is_none(),
        },
    )?;
    let off = || "off".to_string();
    let tls = match &config.tls {
        None => off(),
        Some(t) if t.self_signed.is_some() => "self-signed".to_string(),
        Some(_) => "on".to_string(),
    };
    if let Some(ca) = config.tls.as_ref().and_then(|t| t.self_signed.as_ref()) {
        tracing::warn!(
            tls_ca = %ca.display(),
            "TLS with a self-signed certificate (generated now; browsers will warn): clients trust it with curl --cacert {}",
            ca.display()
        );
    }
    // A supervised gateway leaves this to its supervisor, which says it once.
    if args.cluster.supervised_place.is_none() {
        if let Some(warning) = config.access.open_api_warning(server.local_addr()) {
            tracing::warn!("{warning}");
        }
    }
    let ktls = match config.tls.as_ref().map(|t| &t.ktls) {
        None | Some(Ktls::Off) => off(),
        Some(Ktls::Tx) => "tx".to_string(),
        Some(Ktls::Unavailable(why)) => {
            tracing::warn!("kTLS unavailable: {why}; TLS stays in user space");
            "unavailable".to_string()
        }
    };
    tracing::info!(
        listen = %server.local_addr(),
        tls = %tls,
        ktls = %ktls,
        loops = config.loops,
        sends = %config.send_path(),
        role = %role,
        tick_offset_us = config.tick_offset.as_micros(),
        admin = %monitor.admin_addr().map_or_else(off, |a| a.to_string()),
        csv = %args.csv.as_ref().map_or_else(off, |p| p.display().to_string()),
        store = %link.unwrap_or_else(|| args.hub.store.clone()),
        subscriptions = %config.access.describe_subscriptions(),
        api = %config.access.describe_api(),
        origins = %config.access.describe_origins(),
        hosts = %config.access.describe_hosts(),
        history = %args.hub.history_store.describe(),
        "myriad serving: GET /sub/<id> (stream, SSE, WebSocket), /poll/<id>, POST /pub/<id>"
    );
    server.wait_or_drain(&term, config.drain)
}

/// The hub the flags describe. `--history-store jetstream` opens its stream on the
/// `--nats` server here: the hub crate links no NATS client. A router shard reads
/// back only its own users' history (shards share the log) and loads only its own
/// subjects' edges into its index.
fn open_hub(args: &ServeArgs) -> anyhow::Result<Hub> {
    let shards = args.cluster.shards()?;
    let log: Option<Box<dyn store::history::HistoryLog>> = match args.hub.history_store {
        HistoryStore::Memory => None,
        HistoryStore::Store => Some(
            store::history::open_history(&args.hub.store, &args.hub.store_options())
                .with_context(|| format!("cannot open durable history in {}", args.hub.store))?,
        ),
        HistoryStore::Jetstream => Some(Box::new(cluster::jet_history::JetHistory::open(
            &args.cluster.nats_config()?,
            args.hub.history,
            args.hub.history_replicas,
        )?)),
    };
    let mut hub = Hub::open_with_history(&args.hub, log, &|id| shards.owns(id))?;
    // Each app's webhook signs with its key and secret: the router reads the apps.
    hub.start_pusher_webhooks(&args.hub, &args.gateway.pusher_apps)?;
    Ok(hub)
}

/// `--role router`: the hub (store, index, presence, history) answering gateways
/// and back-ends over NATS (and HTTP on `--publish-listen`); no client listener.
/// SIGTERM drains it (within `--drain` seconds) and it exits 0.
fn run_router(args: &ServeArgs) -> anyhow::Result<()> {
    let hub = Arc::new(open_hub(args)?);
    Hub::start_ticking(&hub)?;
    let shards = args.cluster.shards()?;
    let drain = std::time::Duration::try_from_secs_f64(args.gateway.drain)
        .map_err(|e| anyhow::anyhow!("--drain {}: {e}", args.gateway.drain))?;
    // With router shards, each answers for the channels it owns.
    let query = crate::presence_query::hook(
        hub.clone(),
        cluster::publish_port::api_keys(&args.gateway.api_keys)?,
    );
    let mut role = RouterRole::new(hub)
        .with_shards(shards)
        .with_replay_bytes(args.cluster.replay_bytes)
        .with_drain(drain);
    // SIGTERM drains the router as it drains a gateway (`cluster::router_role::drain`).
    let stop = role.stop_handle();
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM])?;
    std::thread::Builder::new()
        .name("myriad-sigterm".into())
        .spawn(move || {
            // Kept listening: a second SIGTERM must not fall to the default action.
            for _ in signals.forever() {
                stop.notify_one();
            }
        })?;
    let mut publish_port = None;
    if let Some(addr) = args.cluster.publish_listen {
        let config = cluster::PortConfig {
            api_keys: cluster::publish_port::api_keys(&args.gateway.api_keys)?,
            max_message: args.gateway.max_message,
            max_batch: args.gateway.max_batch,
        };
        let has_key = !config.api_keys.is_empty();
        let port = cluster::PublishPort::bind(addr, config, shards.count > 1)?;
        let bound = port.local_addr()?;
        if let Some(warning) = connection::open_api_warning(bound, has_key, "--publish-listen") {
            tracing::warn!("{warning}");
        }
        publish_port = Some(bound);
        role = role.with_publish_port(port);
    }
    let nats = args.cluster.nats_config()?;
    let link = cluster::Link::connect(&nats, "myriad router", role.nats_events())?;
    // `--admin` / `--csv`: the router's own /stats (its counters under `extra`), /metrics.
    let monitor = observe::monitor::Monitor::start(
        observe::metrics::ProcessMetrics::new(0),
        observe::monitor::MonitorOptions {
            csv: args.csv.clone(),
            admin: args.admin,
            extra: role.stats_fn(),
            query: Some(query),
            slab: true,
        },
    )?;
    tracing::info!(
        nats = %link.url,
        nats_auth = %nats.describe_auth(),
        nats_tls = %nats.describe_tls(),
        store = %args.hub.store,
        history = %args.hub.history_store.describe(),
        admin = %monitor.admin_addr().map_or_else(|| "off".to_string(), |a| a.to_string()),
        publish_port = %publish_port.map_or_else(|| "off".to_string(), |a| a.to_string()),
        "myriad router serving: gateways on myriad.router, back-end publishes on myriad.pub.<subject>"
    );
    role.run(&link)
}
