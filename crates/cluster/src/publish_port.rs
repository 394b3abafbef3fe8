//! The router's publish port (`--publish-listen ADDR`): back-ends `POST /pub/<subject>`
//! and `POST /pub` (NDJSON batch) to the router itself, with the gateways' requests
//! and answers. Why: through a gateway, a publish crosses that gateway's loop, its
//! NATS link thread and nats-server before the router sees it, and its answer comes
//! back the same way — at 300 k connections that was 35–90 µs of server CPU per
//! publish (docs/decisions/publish-port.md). Here the router's own runtime thread reads the
//! request and hands it to the router task.
//!
//! A port for back-ends, like Pushpin's publish port: plain HTTP/1.1, no TLS;
//! API keys as the gateways check them (`--api-key`; without one, loopback peers
//! only); any request carrying `Origin` (a browser page) is refused, so a page
//! cannot publish through a loopback-only port. `GET /healthz` answers without a key.
//!
//! Drain (the router's SIGTERM, [`PortDrain`]): the port keeps listening and answers
//! every new connection and request 503 + `Retry-After: 1`, closes idle connections,
//! and finishes the requests it had read.
//!
//! One router: a request goes to the router task over a channel and is answered in
//! the task's same turn. Several shards (`--router-shards`, each binding the port
//! with SO_REUSEPORT): every publish is a NATS request to `myriad.pub.<subject>`,
//! which the subject's shard takes; a batch sends its items one after the other,
//! in order (all at once with `?parallel=1`), and sums their counts.

mod connection;
mod exchange;
mod over_nats;
mod script;
#[cfg(test)]
mod tests;

use anyhow::Context;
use auth::ApiKeys;
use bus::Reply;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};

/// Connections served at once; one more is told 503 and closed.
const MAX_CONNECTIONS: usize = 1024;
/// A connection silent this long between or inside requests is closed.
const IDLE: Duration = Duration::from_secs(30);

/// What the port accepts (the gateways' flags of the same names).
#[derive(Debug)]
pub struct PortConfig {
    /// Empty: loopback peers only.
    pub api_keys: ApiKeys,
    /// Largest `POST /pub/<subject>` body (`--max-message`).
    pub max_message: usize,
    /// Largest `POST /pub` batch body (`--max-batch`).
    pub max_batch: usize,
}

/// One connection's exchanges on a script of bytes (fuzz target `port_exchange`).
#[doc(hidden)]
pub use script::run as exchange_script;

/// The keys of `--api-key`, checked.
pub fn api_keys(keys: &[String]) -> anyhow::Result<ApiKeys> {
    ApiKeys::new(keys).context("--api-key")
}

/// A request for the router task (one router), and where its reply goes.
pub struct PortCall {
    pub request: bus::Request,
    pub reply: oneshot::Sender<Reply>,
}

/// Who publishes what the port reads.
#[derive(Clone)]
enum Publisher {
    /// The router task of this process (one router).
    Router(mpsc::UnboundedSender<PortCall>),
    /// NATS requests to `myriad.pub.<subject>` (several shards).
    Nats(async_nats::Client),
}

/// The bound listener, before the router's runtime serves it.
pub struct PublishPort {
    listener: std::net::TcpListener,
    config: Arc<PortConfig>,
    drain: PortDrain,
}

/// The router's hold on a served port's drain: once started, new connections and
/// new requests are answered 503 + `Retry-After` and closed, idle connections are
/// closed, and a request already read is finished.
#[derive(Clone)]
pub struct PortDrain {
    draining: Arc<watch::Sender<bool>>,
    /// One permit per connection served at once (all back: none open).
    room: Arc<Semaphore>,
}

impl PortDrain {
    fn new() -> PortDrain {
        PortDrain {
            draining: Arc::new(watch::channel(false).0),
            room: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        }
    }

    pub fn start(&self) {
        self.draining.send_replace(true);
    }

    /// Connections still open (a request in flight, or one not yet told to close).
    pub fn open_connections(&self) -> usize {
        MAX_CONNECTIONS - self.room.available_permits()
    }
}

impl PublishPort {
    /// Binds `addr` (with SO_REUSEPORT when `shared`: the shards of one router share it).
    pub fn bind(addr: SocketAddr, config: PortConfig, shared: bool) -> anyhow::Result<PublishPort> {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        socket.set_reuse_address(true)?;
        if shared {
            socket.set_reuse_port(true)?;
        }
        socket.set_nonblocking(true)?;
        socket
            .bind(&addr.into())
            .with_context(|| format!("--publish-listen: cannot bind {addr}"))?;
        socket.listen(1024)?;
        Ok(PublishPort {
            listener: socket.into(),
            config: Arc::new(config),
            drain: PortDrain::new(),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The handle that drains this port once it is served.
    pub fn drain(&self) -> PortDrain {
        self.drain.clone()
    }

    /// Serves on the current runtime, handing publishes to the router task: the
    /// receiver is the task's to drain ([`PortCall`]).
    pub(crate) fn serve_to_router(self) -> anyhow::Result<mpsc::UnboundedReceiver<PortCall>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.serve(Publisher::Router(tx))?;
        Ok(rx)
    }

    /// Serves on the current runtime, publishing through NATS (several shards).
    pub(crate) fn serve_over_nats(self, client: async_nats::Client) -> anyhow::Result<()> {
        self.serve(Publisher::Nats(client))
    }

    fn serve(self, publisher: Publisher) -> anyhow::Result<()> {
        let listener = tokio::net::TcpListener::from_std(self.listener)?;
        let config = self.config;
        let drain = self.drain;
        tokio::spawn(async move {
            let room = drain.room.clone();
            loop {
                let (stream, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of files: let some close before trying again.
                        tracing::warn!(error = %e, "publish port: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                // Still listening while draining: a clear 503 rather than a refused
                // connect, until the process exits.
                if *drain.draining.borrow() {
                    tokio::spawn(connection::refuse_draining(stream));
                    continue;
                }
                let Ok(permit) = room.clone().try_acquire_owned() else {
                    tokio::spawn(connection::refuse_busy(stream));
                    continue;
                };
                let (config, publisher) = (config.clone(), publisher.clone());
                let draining = drain.draining.subscribe();
                tokio::spawn(async move {
                    let loopback = peer.ip().is_loopback();
                    connection::serve(stream, loopback, &config, &publisher, draining).await;
                    drop(permit);
                });
            }
        });
        Ok(())
    }
}

/// The next call from the port, or never when the router serves none.
pub(crate) async fn next_call(
    calls: &mut Option<mpsc::UnboundedReceiver<PortCall>>,
) -> Option<PortCall> {
    match calls {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
