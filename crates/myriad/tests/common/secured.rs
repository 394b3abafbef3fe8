//! Helpers of the NATS trust tests (`nats_trust.rs`, `nats_secrets.rs`): a nats-server
//! of the test's own started from a configuration file with its own environment (the
//! passwords `deploy/nats-authorization.conf` reads), myriad processes whose every log
//! line is kept (to look for secrets in them), and a real NATS client that records
//! the errors the server sends it (permission violations).

use super::cluster::Nats;
use super::Server;
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits for what it expects (a line, an error, a delivery).
pub const WAIT: Duration = Duration::from_secs(20);

/// The permissions file of `deploy/`, as operators include it.
pub const AUTHORIZATION: &str = include_str!("../../../../deploy/nats-authorization.conf");

pub use super::free_port;

/// nats-server on a free port with `conf` (written in `dir`) and `env` set.
pub fn start_nats(dir: &std::path::Path, conf: &str, env: &[(&str, &str)]) -> Nats {
    let port = free_port();
    let file = dir.join(format!("nats-{port}.conf"));
    std::fs::write(&file, conf).unwrap();
    let mut cmd = Command::new("nats-server");
    cmd.args(["-a", "127.0.0.1", "-p", &port.to_string(), "-c"])
        .arg(&file)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| {
        panic!("this test needs nats-server on the PATH ({e}); install it: apt-get install nats-server")
    });
    let stderr = child.stderr.take().unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let kept = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut log = kept.lock().unwrap();
            log.push_str(&line);
            log.push('\n');
        }
    });
    let deadline = Instant::now() + WAIT;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "nats-server exited ({status}) with {}:\n{}",
                file.display(),
                log.lock().unwrap()
            );
        }
        assert!(Instant::now() < deadline, "nats-server did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    Nats {
        child,
        url: format!("nats://127.0.0.1:{port}"),
    }
}

/// Every line a process logged so far.
pub type Log = Arc<Mutex<Vec<String>>>;

/// `cmd` (a myriad process) spawned with text logs, waited for until a line holds
/// `marker`; returns it, that line and the log, which keeps filling.
pub fn spawn_logged(cmd: &mut Command, marker: &str) -> (Child, String, Log) {
    let mut child = super::spawn_logging(cmd);
    let stderr = child.stderr.take().unwrap();
    let log: Log = Arc::default();
    let (tx, rx) = std::sync::mpsc::channel();
    let kept = log.clone();
    let wanted = marker.to_string();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains(&wanted) {
                let _ = tx.send(line.clone());
            }
            kept.lock().unwrap().push(line);
        }
    });
    match rx.recv_timeout(WAIT) {
        Ok(line) => (child, line, log),
        Err(_) => {
            let _ = child.kill();
            panic!(
                "no {marker:?} line; the process logged:\n{}",
                log.lock().unwrap().join("\n")
            )
        }
    }
}

/// `myriad serve ARGS` with `env`, as a [`Server`] once it listens (gateway, supervisor).
pub fn serve(args: &[&str], env: &[(&str, &str)], marker: &str) -> (Server, Log) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_myriad"));
    cmd.arg("serve").args(args).envs(env.iter().copied());
    let (child, line, log) = spawn_logged(&mut cmd, marker);
    let field = |name: &str| {
        let at = line.find(name)? + name.len();
        line[at..].split_whitespace().next()?.parse().ok()
    };
    let addr = field("listen=").unwrap_or_else(|| panic!("no listen= in {line:?}"));
    let admin = field("admin=");
    (Server { child, addr, admin }, log)
}

/// A real NATS client and the errors its server sent it.
pub struct NatsClient {
    pub client: async_nats::Client,
    errors: Arc<Mutex<Vec<String>>>,
}

impl NatsClient {
    /// Connects to `url` with `options` (credentials).
    pub async fn connect(
        url: &str,
        options: async_nats::ConnectOptions,
    ) -> Result<NatsClient, async_nats::ConnectError> {
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let heard = errors.clone();
        let client = options
            .event_callback(move |event| {
                let heard = heard.clone();
                async move {
                    if let async_nats::Event::ServerError(e) = event {
                        heard.lock().unwrap().push(e.to_string().to_lowercase());
                    }
                }
            })
            .connect(url)
            .await?;
        Ok(NatsClient { client, errors })
    }

    /// Waits until the server told this client that `what` on `subject` was refused
    /// (`what`: "publish" or "subscription").
    pub async fn wait_refused(&self, what: &str, subject: &str) {
        let needle = format!("permissions violation for {what} to \"{subject}\"");
        let deadline = Instant::now() + WAIT;
        loop {
            // A PING answered: every error the server sent before it has arrived.
            self.client.flush().await.unwrap();
            if self
                .errors
                .lock()
                .unwrap()
                .iter()
                .any(|e| e.contains(&needle))
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the NATS server did not refuse the {what} to {subject}; its errors: {:?}",
                self.errors.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// `myriad serve --role gateway` against the NATS server at `nats_url` with `auth` (the
/// credential flags), expected to refuse to start because the server refused those
/// credentials: its stderr.
pub fn gateway_refused_by_nats(nats_url: &str, auth: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(["serve", "--role", "gateway", "--listen", "127.0.0.1:0"])
        .args(["--nats", nats_url])
        .args(auth)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "started with {auth:?}: {stderr}");
    assert!(
        stderr.contains("refused this process's credentials"),
        "{stderr}"
    );
    stderr
}
