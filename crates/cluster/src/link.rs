//! [`Link`]: one NATS connection and the small runtime that drives it.
//!
//! The gateway's event loops stay on mio; only this link is async. It owns a
//! single-threaded tokio runtime on a thread of its own (one thread, not one per
//! core: what crosses NATS is batched, so one thread keeps up and leaves the cores
//! to the loops). Everything async of this crate runs as tasks on it.

use anyhow::Context;
use async_nats::{Client, ConnectOptions, Event};
use std::future::Future;
use std::time::Duration;
use tokio::runtime::Handle;

/// The NATS URL `--nats` defaults to (the broker of a development machine).
pub const DEFAULT_NATS: &str = "nats://127.0.0.1:4222";

/// How long a start waits for NATS to answer before it gives up with advice.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Messages a subscription may queue in the client before NATS counts us a slow
/// consumer (the client's default is 65,536; a router takes bursts of batches).
const SUBSCRIPTION_CAPACITY: usize = 1 << 18;

pub struct Link {
    pub client: Client,
    pub url: String,
    handle: Handle,
}

impl Link {
    /// Starts the runtime thread and connects to `url` (`name` is what NATS
    /// monitoring shows for this connection). `on_event` hears reconnects.
    pub fn connect(
        url: &str,
        name: &str,
        on_event: impl Fn(Event) + Send + Sync + 'static,
    ) -> anyhow::Result<Link> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the NATS runtime")?;
        let handle = runtime.handle().clone();
        std::thread::Builder::new()
            .name("myriad-nats".into())
            .spawn(move || runtime.block_on(std::future::pending::<()>()))
            .context("cannot start the NATS thread")?;
        let on_event = std::sync::Arc::new(on_event);
        let options = ConnectOptions::new()
            .name(name)
            .connection_timeout(CONNECT_TIMEOUT)
            .subscription_capacity(SUBSCRIPTION_CAPACITY)
            .event_callback(move |event| {
                let on_event = on_event.clone();
                async move { on_event(event) }
            });
        let target = url.to_string();
        let client = run_blocking(&handle, async move {
            tokio::time::timeout(CONNECT_TIMEOUT, options.connect(target)).await
        });
        let client = match client {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => anyhow::bail!("{}", no_nats(url, &e.to_string())),
            Err(_) => anyhow::bail!("{}", no_nats(url, "no answer in 3 s")),
        };
        Ok(Link {
            client,
            url: url.to_string(),
            handle,
        })
    }

    /// Runs `task` on the link's runtime.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.handle.spawn(task);
    }

    /// Runs `task` on the link's runtime and waits for its result on this thread
    /// (never call it from the runtime itself).
    pub fn block_on<T: Send + 'static>(&self, task: impl Future<Output = T> + Send + 'static) -> T {
        run_blocking(&self.handle, task)
    }
}

fn run_blocking<T: Send + 'static>(
    handle: &Handle,
    task: impl Future<Output = T> + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    handle.spawn(async move {
        let _ = tx.send(task.await);
    });
    // The runtime thread runs until the process ends, so the task always finishes.
    rx.recv().expect("the NATS runtime thread is gone")
}

/// The error text when no NATS answers: what to start, and how.
fn no_nats(url: &str, why: &str) -> String {
    format!(
        "no NATS server answers at {url} ({why}); start one with `nats-server -js -a 127.0.0.1 -p 4222` \
         (Debian: `apt-get install nats-server`), or point --nats / MYRIAD_NATS at a running one"
    )
}
