//! One supervised process: the router or a gateway, started as this binary's
//! `serve --role …` with the supervisor's own flags (minus those the supervisor sets
//! itself), its stderr forwarded line by line and read for the addresses it announces.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Flags of `serve` (and the global `--config`) the supervisor decides for each child;
/// they are removed from the forwarded command line, and their variables from the
/// child's environment (the supervisor has already applied the config file).
const OWN_FLAGS: &[(&str, &str, bool)] = &[
    // (flag, variable, takes a value)
    ("--processes", "MYRIAD_PROCESSES", true),
    ("--role", "MYRIAD_ROLE", true),
    ("--admin", "MYRIAD_ADMIN", true),
    ("--csv", "MYRIAD_CSV", true),
    ("--max-connections", "MYRIAD_MAX_CONNECTIONS", true),
    ("--listen", "MYRIAD_LISTEN", true),
    ("--leave-when-full", "MYRIAD_LEAVE_WHEN_FULL", false),
    ("--config", "MYRIAD_CONFIG", true),
    ("--log", "MYRIAD_LOG", true),
    // `--tls self-signed`: the supervisor makes one certificate for all gateways.
    ("--tls", "MYRIAD_TLS", true),
    ("--supervised-place", "MYRIAD_SUPERVISED_PLACE", true),
    ("--router-shard", "MYRIAD_ROUTER_SHARD", true),
    // Flags that may carry a secret (`--nats nats://user:pass@host`): each child gets
    // their values in its environment ([`Template::secrets`]), never in its
    // arguments, which any local user reads in /proc/<pid>/cmdline. The `--nats-*`
    // flags name files, and the secret variables (`MYRIAD_NATS_PASSWORD`…) are
    // inherited.
    ("--nats", "MYRIAD_NATS", true),
    ("--api-key", "MYRIAD_API_KEY", true),
    ("--jwt-secret", "MYRIAD_JWT_SECRET", true),
];

/// The log target of the start lines the supervisor waits for; kept at `info` in
/// children whatever `--log` says (`--log warn` would hide them).
const START_LINE_TARGET: &str = "myriad::serve=info";

/// What a child is to the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Router shard `n` (`--router-shards`; 0 when there is one router).
    Router(u16),
    /// Gateway number `n` (0-based), kept across restarts.
    Gateway(usize),
}

impl Role {
    pub fn name(self) -> String {
        match self {
            Role::Router(0) => "router".into(),
            Role::Router(n) => format!("router {n}"),
            Role::Gateway(n) => format!("gateway {n}"),
        }
    }
}

/// What every child shares: the forwarded command line and the gateways' settings.
pub struct Template {
    pub exe: std::path::PathBuf,
    /// The supervisor's arguments without [`OWN_FLAGS`].
    pub args: Vec<OsString>,
    pub listen: SocketAddr,
    pub per_gateway: usize,
    /// `--tls self-signed`: the certificate and key the supervisor generated, given to
    /// every gateway, so clients trust one certificate whichever gateway they reach.
    pub tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// The per-address table's descriptor every gateway inherits (`--max-per-ip`).
    pub peer_table: Option<i32>,
    /// The values of the flags that may carry a secret, as `(variable, value)`: set
    /// in every child's environment.
    pub secrets: Vec<(&'static str, String)>,
}

/// A running child and what it announced.
pub struct Member {
    pub role: Role,
    pub child: Child,
    pub started: Instant,
    /// The child's admin address, once its start line named it.
    pub admin: Arc<Mutex<Option<SocketAddr>>>,
    /// Set when the child logged that it serves.
    pub ready: Arc<Mutex<bool>>,
    pub restarts: u32,
}

impl Template {
    pub fn new(
        listen: SocketAddr,
        per_gateway: usize,
        tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
        secrets: Vec<(&'static str, String)>,
    ) -> anyhow::Result<Template> {
        let args: Vec<OsString> = std::env::args_os().skip(1).collect();
        let mut forwarded = vec![
            OsString::from("--log"),
            OsString::from(format!("{},{START_LINE_TARGET}", log_filter(&args))),
        ];
        forwarded.extend(strip_own_flags(&args));
        Ok(Template {
            exe: std::env::current_exe()?,
            args: forwarded,
            listen,
            per_gateway,
            tls,
            peer_table: None,
            secrets,
        })
    }

    /// Starts the child for `role`.
    pub fn spawn(&self, role: Role, restarts: u32) -> anyhow::Result<Member> {
        let mut cmd = Command::new(&self.exe);
        cmd.args(&self.args);
        match role {
            Role::Router(shard) => {
                // Its own admin listener on loopback: the supervisor reads its sample.
                cmd.args(["--role", "router", "--admin", "127.0.0.1:0"])
                    .arg("--router-shard")
                    .arg(shard.to_string());
            }
            Role::Gateway(n) => {
                cmd.args([
                    "--role",
                    "gateway",
                    "--leave-when-full",
                    "--admin",
                    "127.0.0.1:0",
                ])
                .arg("--listen")
                .arg(self.listen.to_string())
                .arg("--max-connections")
                .arg(self.per_gateway.to_string())
                // Its restart in the same place tells the router it died.
                .arg("--supervised-place")
                .arg(n.to_string());
                if let Some((cert, key)) = &self.tls {
                    cmd.arg("--tls-cert").arg(cert).arg("--tls-key").arg(key);
                }
                if let Some(fd) = self.peer_table {
                    cmd.arg("--peer-table-fd").arg(fd.to_string());
                }
            }
        }
        for (_, var, _) in OWN_FLAGS {
            cmd.env_remove(var);
        }
        cmd.envs(self.secrets.iter().map(|(var, value)| (var, value)));
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: prctl is async-signal-safe; it only asks the kernel to kill this
        // child when the supervisor's thread that spawned it dies (all spawns happen
        // on the supervisor's main thread), so no child outlives a killed supervisor.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        let admin = Arc::new(Mutex::new(None));
        let ready = Arc::new(Mutex::new(false));
        let stderr = child.stderr.take().expect("stderr is piped");
        let (admin_w, ready_w) = (admin.clone(), ready.clone());
        std::thread::Builder::new()
            .name(format!("myriad-{}-log", role.name().replace(' ', "")))
            .spawn(move || forward(stderr, admin_w, ready_w))?;
        Ok(Member {
            role,
            child,
            started: Instant::now(),
            admin,
            ready,
            restarts,
        })
    }
}

impl Member {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn is_ready(&self) -> bool {
        *self.ready.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn admin_addr(&self) -> Option<SocketAddr> {
        *self.admin.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Copies a child's log lines to the supervisor's stderr, noting its admin address
/// and that it serves from its start line.
fn forward(
    stderr: std::process::ChildStderr,
    admin: Arc<Mutex<Option<SocketAddr>>>,
    ready: Arc<Mutex<bool>>,
) {
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { return };
        // Copied before the child counts as ready, so every child's start line comes
        // before the supervisor's own.
        eprintln!("{line}");
        if line.contains("serving") {
            if let Some(addr) = field(&line, "admin") {
                *admin.lock().unwrap_or_else(|p| p.into_inner()) = Some(addr);
            }
            *ready.lock().unwrap_or_else(|p| p.into_inner()) = true;
        }
    }
}

/// `name=ADDR` (text logs) or `"name":"ADDR"` (JSON logs) from a log line.
fn field(line: &str, name: &str) -> Option<SocketAddr> {
    for key in [format!("{name}="), format!("\"{name}\":\"")] {
        if let Some(pos) = line.find(&key) {
            let rest = &line[pos + key.len()..];
            let end = rest
                .find(|c: char| c.is_whitespace() || c == '"')
                .unwrap_or(rest.len());
            if let Ok(addr) = rest[..end].parse() {
                return Some(addr);
            }
        }
    }
    None
}

/// The supervisor's own log filter: `--log`, else `MYRIAD_LOG`, else `info` (the
/// default of `serve`).
fn log_filter(args: &[OsString]) -> String {
    let mut iter = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(arg) = iter.next() {
        if arg == "--log" {
            if let Some(v) = iter.next() {
                return v;
            }
        } else if let Some(v) = arg.strip_prefix("--log=") {
            return v.to_string();
        }
    }
    std::env::var("MYRIAD_LOG").unwrap_or_else(|_| "info".into())
}

/// The command line without [`OWN_FLAGS`] (`--flag value` and `--flag=value`).
fn strip_own_flags(args: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let text = arg.to_string_lossy();
        let own = OWN_FLAGS.iter().find(|(flag, _, _)| {
            text == *flag || text.strip_prefix(flag).is_some_and(|r| r.starts_with('='))
        });
        match own {
            Some((flag, _, true)) if text == *flag => {
                iter.next(); // its value
            }
            Some(_) => {}
            None => out.push(arg.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_supervisor_s_own_flags_are_not_forwarded() {
        let args: Vec<OsString> = [
            "--log",
            "debug",
            "serve",
            "--processes",
            "3",
            "--store=memory",
            "--admin=127.0.0.1:9000",
            "--listen",
            "127.0.0.1:0",
            "--leave-when-full",
            "--heartbeat",
            "5",
            "--max-connections",
            "9",
            "--nats",
            "nats://router:secret@127.0.0.1:4222",
            "--nats-password-file=/run/pw",
            "--api-key",
            "k1",
            "--api-key=k2",
            "--jwt-secret",
            "0123456789abcdef0123456789abcdef",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let kept: Vec<String> = strip_own_flags(&args)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            kept,
            [
                "serve",
                "--store=memory",
                "--heartbeat",
                "5",
                "--nats-password-file=/run/pw"
            ]
        );
        assert_eq!(log_filter(&args), "debug");
    }

    #[test]
    fn addresses_are_read_from_text_and_json_lines() {
        let text =
            "INFO myriad::serve: myriad serving listen=127.0.0.1:8000 admin=127.0.0.1:9001 loops=2";
        assert_eq!(
            field(text, "admin"),
            Some("127.0.0.1:9001".parse().unwrap())
        );
        let json = r#"{"fields":{"message":"myriad serving","admin":"127.0.0.1:9002"}}"#;
        assert_eq!(
            field(json, "admin"),
            Some("127.0.0.1:9002".parse().unwrap())
        );
        assert_eq!(field("admin=off", "admin"), None);
    }
}
