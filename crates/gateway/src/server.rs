//! Starting and stopping a server: one listener per loop bound with SO_REUSEPORT on the
//! same address (the kernel spreads accepts over the loops), the shared state, and the
//! threads. `myriad serve`, `myriad demo`, benches and tests all start servers here.

use crate::config::ServerConfig;
use crate::event_loop::{EventLoop, WAKER};
use crate::shared::{Command, LoopHandle, Shared};
use anyhow::Context;
use observe::metrics::ProcessMetrics;
use parking_lot::Mutex;
use router::Router;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::thread::JoinHandle;
use store::Store;

/// Accept backlog per listener; the kernel caps it at net.core.somaxconn.
const BACKLOG: i32 = 65_535;

pub struct Server {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    threads: Vec<JoinHandle<std::io::Result<()>>>,
}

impl Server {
    /// Binds every loop's listener and starts the loops.
    pub fn start(
        config: ServerConfig,
        router: Router,
        store: Box<dyn Store>,
    ) -> anyhow::Result<Server> {
        let loops = config.loops.max(1);
        let mut addr = config.listen;
        let mut listeners = Vec::with_capacity(loops);
        for _ in 0..loops {
            let listener = bind_reuseport(addr, config.tcp_nodelay)
                .with_context(|| format!("cannot listen on {addr}"))?;
            // With port 0 the first bind picks the port; the others join it.
            addr = listener.local_addr()?;
            listeners.push(listener);
        }
        let mut polls = Vec::with_capacity(loops);
        let mut handles = Vec::with_capacity(loops);
        for _ in 0..loops {
            let poll = mio::Poll::new()?;
            let waker = mio::Waker::new(poll.registry(), WAKER)?;
            handles.push(LoopHandle::new(waker));
            polls.push(poll);
        }
        let shared = Arc::new(Shared {
            config,
            router: Mutex::new(router),
            store: Mutex::new(store),
            metrics: ProcessMetrics::new(loops),
            loops: handles,
            connections: AtomicUsize::new(0),
            per_ip: Mutex::new(Default::default()),
            shutdown: AtomicBool::new(false),
        });
        let mut threads = Vec::with_capacity(loops);
        for (id, (poll, listener)) in polls.into_iter().zip(listeners).enumerate() {
            let event_loop = EventLoop::new(id as u16, poll, listener, shared.clone())?;
            let thread = std::thread::Builder::new()
                .name(format!("myriad-loop-{id}"))
                .spawn(move || event_loop.run())?;
            threads.push(thread);
        }
        Ok(Server {
            shared,
            local_addr: addr,
            threads,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn metrics(&self) -> Arc<ProcessMetrics> {
        self.shared.metrics.clone()
    }

    /// A closure giving `/stats`, for observers on other threads.
    pub fn stats_fn(&self) -> Arc<dyn Fn() -> serde_json::Value + Send + Sync> {
        let shared = self.shared.clone();
        Arc::new(move || crate::api::stats(&shared))
    }

    /// Closes every connection and stops the loops.
    pub fn shutdown(self) -> anyhow::Result<()> {
        for handle in &self.shared.loops {
            handle.send(Command::Shutdown);
        }
        for thread in self.threads {
            match thread.join() {
                Ok(result) => result.context("event loop failed")?,
                Err(_) => anyhow::bail!("an event loop panicked"),
            }
        }
        Ok(())
    }

    /// Blocks until the loops end (they end on shutdown or on a fatal poll error).
    pub fn wait(self) -> anyhow::Result<()> {
        for thread in self.threads {
            match thread.join() {
                Ok(result) => result.context("event loop failed")?,
                Err(_) => anyhow::bail!("an event loop panicked"),
            }
        }
        Ok(())
    }
}

/// A non-blocking listener sharing `addr` with the other loops (SO_REUSEPORT). With
/// `nodelay`, TCP_NODELAY is set on the listener so accepted sockets inherit it.
fn bind_reuseport(addr: SocketAddr, nodelay: bool) -> std::io::Result<mio::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    if nodelay {
        socket.set_nodelay(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(mio::net::TcpListener::from_std(socket.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accept path relies on Linux copying TCP_NODELAY from the listener; if a kernel
    /// does not, the loop sets it per socket (checked once), but we want to know.
    #[test]
    fn accepted_sockets_inherit_nodelay_from_the_listener() {
        let listener = bind_reuseport("127.0.0.1:0".parse().unwrap(), true).unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = std::net::TcpStream::connect(addr).unwrap();
        let accepted = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("accept: {e}"),
            }
        };
        assert!(accepted.nodelay().unwrap());
    }
}

#[cfg(test)]
mod shutdown_tests {
    use super::*;
    use std::io::{Read, Write};

    /// `shutdown` closes every client connection and ends every loop.
    #[test]
    fn shutdown_closes_clients_and_stops_the_loops() {
        let config = ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            loops: 2,
            ..Default::default()
        };
        let router = Router::new(
            router::RouterConfig::default(),
            router::SubscriptionIndex::new(),
        );
        let server = Server::start(config, router, store::open("memory").unwrap()).unwrap();
        let mut client = std::net::TcpStream::connect(server.local_addr()).unwrap();
        client
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        client
            .write_all(b"GET /sub/1 HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 512];
        assert!(
            client.read(&mut buf).unwrap() > 0,
            "the stream head arrives"
        );
        server.shutdown().unwrap();
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).unwrap(); // EOF: the server closed it
    }
}
