//! Starting and stopping a gateway: one listener per loop bound with SO_REUSEPORT on
//! the same address (`pump::bind_reuseport`; the kernel spreads accepts over the
//! loops), the loops' mailboxes and cells, the bus, and the threads. `myriad serve`,
//! `myriad demo`, benches and tests all start servers here.

use crate::config::ServerConfig;
use crate::gateway::{Gateway, StatsFn};
use crate::pump::{self, bind_reuseport, EventLoop, WAKER};
use anyhow::Context;
use bus::{Bus, Mailbox};
use observe::metrics::ProcessMetrics;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

pub struct Server {
    gateway: Arc<Gateway>,
    local_addr: SocketAddr,
    threads: Vec<JoinHandle<std::io::Result<()>>>,
}

impl Server {
    /// Binds every loop's listener, makes the bus with `make_bus` (given the loops'
    /// mailboxes, indexed by loop id) and starts the loops. `router_stats` gives the
    /// router's counters for `/stats`.
    pub fn start(
        config: ServerConfig,
        router_stats: StatsFn,
        make_bus: impl FnOnce(Vec<Arc<Mailbox>>) -> Arc<dyn Bus>,
    ) -> anyhow::Result<Server> {
        let loops = config.loops.max(1);
        if config.tls.is_some() {
            // SIGHUP re-reads the certificate (polled by the loops' tick) instead of
            // ending the process.
            tls::sighup::install();
        }
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
        let mut mailboxes = Vec::with_capacity(loops);
        for _ in 0..loops {
            let poll = mio::Poll::new()?;
            let waker = mio::Waker::new(poll.registry(), WAKER)?;
            // A wake failure means the loop's poll is gone: the loop is shutting down.
            mailboxes.push(Arc::new(Mailbox::new(move || {
                let _ = waker.wake();
            })));
            polls.push(poll);
        }
        let bus = make_bus(mailboxes.clone());
        let metrics = ProcessMetrics::new(loops);
        let stats = process_stats(metrics.clone(), loops, router_stats);
        let gateway = Arc::new(Gateway::new(config, bus, mailboxes, metrics, stats));
        let cells = pump::cells(loops);
        let mut threads = Vec::with_capacity(loops);
        for (id, (poll, listener)) in polls.into_iter().zip(listeners).enumerate() {
            let registry = poll.registry().try_clone()?;
            let event_loop = EventLoop::new(
                id as u16,
                registry,
                listener,
                gateway.clone(),
                cells.clone(),
            )?;
            *cells[id].lock() = Some(event_loop);
            let cells = cells.clone();
            let thread = std::thread::Builder::new()
                .name(format!("myriad-loop-{id}"))
                .spawn(move || pump::run(cells, id as u16, poll))?;
            threads.push(thread);
        }
        Ok(Server {
            gateway,
            local_addr: addr,
            threads,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn metrics(&self) -> Arc<ProcessMetrics> {
        self.gateway.metrics.clone()
    }

    /// The `/stats` document, for observers on other threads.
    pub fn stats_fn(&self) -> StatsFn {
        self.gateway.stats.clone()
    }

    /// Closes every connection and stops the loops.
    pub fn shutdown(self) -> anyhow::Result<()> {
        self.gateway.stop.store(true, Ordering::Release);
        for mailbox in &self.gateway.mailboxes {
            mailbox.wake();
        }
        self.wait()
    }

    /// Graceful drain: stops accepting, tells every client to reconnect elsewhere
    /// (spread over `period`, so they do not all come back at once), then waits for
    /// the loops to end.
    pub fn drain(self, period: std::time::Duration) -> anyhow::Result<()> {
        *self.gateway.drain_until.lock() = Some(std::time::Instant::now() + period);
        self.gateway.draining.store(true, Ordering::Release);
        for mailbox in &self.gateway.mailboxes {
            mailbox.wake();
        }
        self.wait()
    }

    /// Blocks until the loops end, or drains when `term` is set (SIGTERM): the
    /// loop of `myriad serve`.
    pub fn wait_or_drain(
        self,
        term: &std::sync::atomic::AtomicBool,
        period: std::time::Duration,
    ) -> anyhow::Result<()> {
        while !self.threads.iter().any(|t| t.is_finished()) {
            if term.load(Ordering::Acquire) {
                tracing::info!(seconds = period.as_secs_f64(), "SIGTERM: draining");
                return self.drain(period);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        self.wait()
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

/// `/stats`: this process's counters, summed over its loops, and the router's.
fn process_stats(metrics: Arc<ProcessMetrics>, loops: usize, router_stats: StatsFn) -> StatsFn {
    Arc::new(move || {
        let m = &metrics;
        let mut doc = serde_json::json!({
            "pid": std::process::id(),
            "loops": loops,
            "connections": m.sum(|l| &l.connections),
            "messages_out": m.sum(|l| &l.messages_out),
            "bytes_out": m.sum(|l| &l.bytes_out),
            "connects": m.sum(|l| &l.connects),
            "closes": m.sum(|l| &l.closes),
            "queued_bytes": m.sum(|l| &l.queued_bytes),
            "slow_drops": m.sum(|l| &l.slow_drops),
            "auth_failures": m.sum(|l| &l.auth_failures),
            "batched_sends": m.sum(|l| &l.batched_sends),
            "listening": m.sum(|l| &l.listening),
        });
        if let (Some(doc), serde_json::Value::Object(router)) =
            (doc.as_object_mut(), router_stats())
        {
            doc.extend(router);
        }
        doc
    })
}

#[cfg(test)]
mod shutdown_tests {
    use super::*;
    use bus::{ConnRef, Reply, Request};
    use std::io::{Read, Write};

    /// A bus that logs everyone in with an empty history: enough to subscribe.
    struct NoRouter;
    impl Bus for NoRouter {
        fn call(&self, _: ConnRef, request: Request) -> Option<Reply> {
            Some(match request {
                Request::Login { .. } => Reply::History(Default::default()),
                _ => Reply::Done,
            })
        }
    }

    /// `shutdown` closes every client connection and ends every loop.
    #[test]
    fn shutdown_closes_clients_and_stops_the_loops() {
        let config = ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            loops: 2,
            ..Default::default()
        };
        let server = Server::start(config, Arc::new(|| serde_json::json!({})), |_| {
            Arc::new(NoRouter)
        })
        .unwrap();
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
