//! [`Link`]: one NATS connection and the small runtime that drives it.
//!
//! The gateway's event loops stay on mio; only this link is async. It owns a
//! single-threaded tokio runtime on a thread of its own (one thread, not one per
//! core: what crosses NATS is batched, so one thread keeps up and leaves the cores
//! to the loops). Everything async of this crate runs as tasks on it.
//!
//! It connects with a [`NatsConfig`]: the servers, credentials and TLS of the
//! `--nats*` flags. What it shows of the URL ([`Link::url`], errors) is redacted.

use crate::config::NatsConfig;
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
    /// The servers as shown ([`NatsConfig::shown`]): never a secret.
    pub url: String,
    handle: Handle,
}

impl Link {
    /// Starts the runtime thread and connects as `config` says (`name` is what NATS
    /// monitoring shows for this connection). `on_event` hears reconnects.
    pub fn connect(
        config: &NatsConfig,
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
        let url = config.shown();
        let options = ConnectOptions::new()
            .name(name)
            .connection_timeout(CONNECT_TIMEOUT)
            .subscription_capacity(SUBSCRIPTION_CAPACITY)
            .event_callback(move |event| {
                let on_event = on_event.clone();
                async move { on_event(event) }
            });
        let options = config
            .apply(options)
            .with_context(|| format!("NATS credentials for {url}"))?;
        // The servers without user information: credentials go in `options`.
        let target: Vec<async_nats::ServerAddr> = config
            .servers()
            .iter()
            .map(|s| s.parse())
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!("--nats {url}: {e}"))?;
        let client = run_blocking(&handle, async move {
            tokio::time::timeout(CONNECT_TIMEOUT, options.connect(target)).await
        });
        let client = match client {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => anyhow::bail!("{}", refused(config, &e)),
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

/// The error text when the connection fails: credentials or TLS refused, or no NATS.
fn refused(config: &NatsConfig, e: &async_nats::ConnectError) -> String {
    use async_nats::ConnectErrorKind as Kind;
    let url = config.shown();
    match e.kind() {
        Kind::AuthorizationViolation | Kind::Authentication => format!(
            "the NATS server at {url} refused this process's credentials ({e}; credentials: {}): \
             see --nats-user, --nats-password-file, --nats-token-file, --nats-nkey-file, --nats-creds",
            config.describe_auth()
        ),
        Kind::Tls => format!(
            "TLS to the NATS server at {url} failed ({e}; TLS: {}): see --nats-ca, --nats-cert, --nats-key",
            config.describe_tls()
        ),
        _ => no_nats(url, &e.to_string()),
    }
}

/// The error text when no NATS answers: what to start, and how.
fn no_nats(url: &str, why: &str) -> String {
    format!(
        "no NATS server answers at {url} ({why}); start one with `nats-server -js -a 127.0.0.1 -p 4222` \
         (Debian: `apt-get install nats-server`), or point --nats / MYRIAD_NATS at a running one"
    )
}
