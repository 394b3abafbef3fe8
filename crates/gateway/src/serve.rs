//! `myriad serve`: open the store, build the subscription index from it, start the loops
//! and the monitor, and run until killed.

use crate::config::ServeArgs;
use crate::server::Server;
use anyhow::Context;
use std::time::Instant;

/// Opens the store named by `url` and builds a router over every stored subscription.
pub fn open_router(
    url: &str,
    config: router::RouterConfig,
) -> anyhow::Result<(router::Router, Box<dyn store::Store>)> {
    let mut store = store::open(url).with_context(|| format!("cannot open store {url}"))?;
    let started = Instant::now();
    // Sized up front: no array regrowth while 30 M edges stream in.
    let mut builder = router::IndexBuilder::with_capacity(store.edge_count()? as usize);
    let edges =
        store.for_each_edge(&mut |subscriber, subject| builder.push(subscriber, subject))?;
    let index = builder.build();
    tracing::info!(
        store = url,
        edges,
        index_bytes = index.memory_bytes(),
        ms = started.elapsed().as_millis() as u64,
        "subscription index built"
    );
    Ok((router::Router::new(config, index), store))
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    raise_nofile_limit();
    let config = args.server_config()?;
    let (router, store) = open_router(&args.store, args.router_config())?;
    let server = Server::start(config.clone(), router, store)?;
    let monitor = observe::monitor::Monitor::start(
        server.metrics(),
        observe::monitor::MonitorOptions {
            csv: args.csv.clone(),
            admin: args.admin,
            extra: server.stats_fn(),
        },
    )?;
    tracing::info!(
        listen = %server.local_addr(),
        loops = config.loops,
        admin = ?monitor.admin_addr(),
        csv = ?args.csv,
        store = %args.store,
        "myriad serving: GET /sub/<id> (stream, SSE, WebSocket), /poll/<id>, POST /pub/<id>"
    );
    server.wait()
}

/// Raises the soft open-file limit to the hard one: every connection is a descriptor.
pub fn raise_nofile_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            if lim.rlim_cur < lim.rlim_max {
                lim.rlim_cur = lim.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
            return lim.rlim_cur;
        }
    }
    0
}
