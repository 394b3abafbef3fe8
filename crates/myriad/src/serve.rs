//! `myriad serve`: one process holding the gateway loops and the router role behind
//! the in-process bus — open the store, build the subscription index, start the
//! loops and the monitor, and run until killed.

use gateway::{GatewayArgs, Server};
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
    /// Admin listener: Prometheus /metrics, /healthz, /stats, /history (the last
    /// samples) and the live dashboard.
    #[arg(long, env = "MYRIAD_ADMIN")]
    pub admin: Option<SocketAddr>,
    /// Write one row of process statistics per second to this CSV file.
    #[arg(long, env = "MYRIAD_CSV")]
    pub csv: Option<PathBuf>,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    load::sys::raise_nofile();
    let config = args.gateway.server_config()?;
    let hub = Arc::new(Hub::open(&args.hub.store, args.hub.router_config())?);
    Hub::start_ticking(&hub)?;
    let stats_hub = hub.clone();
    let server = Server::start(
        config.clone(),
        Arc::new(move || hub::stats_json(&stats_hub.stats())),
        |mailboxes| Arc::new(LocalBus::new(hub, mailboxes)),
    )?;
    let monitor = observe::monitor::Monitor::start(
        server.metrics(),
        observe::monitor::MonitorOptions {
            csv: args.csv.clone(),
            admin: args.admin,
            extra: server.stats_fn(),
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
    tracing::info!(
        listen = %server.local_addr(),
        tls = %tls,
        loops = config.loops,
        admin = %monitor.admin_addr().map_or_else(off, |a| a.to_string()),
        csv = %args.csv.as_ref().map_or_else(off, |p| p.display().to_string()),
        store = %args.hub.store,
        subscriptions = %config.access.describe_subscriptions(),
        api = %config.access.describe_api(),
        origins = %config.access.describe_origins(),
        "myriad serving: GET /sub/<id> (stream, SSE, WebSocket), /poll/<id>, POST /pub/<id>"
    );
    server.wait()
}
