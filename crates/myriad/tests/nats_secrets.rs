//! NATS credentials given by file, environment variable or URL work against a
//! nats-server that requires them, and the secret shows nowhere: not in any log line,
//! not in `/stats` or `/metrics`, not in a process's arguments (`/proc/<pid>/cmdline`,
//! which every local user reads) — the supervisor's children get `--nats` (and
//! `--api-key`, `--jwt-secret`) in their environment. A refused credential stops the process with an error that names no
//! secret. Also TLS to NATS with a test CA and a client certificate (`verify: true`).

mod common;

use common::cluster::{get, sse, wait_router_connections, Nats};
use common::read_until;
use common::secured::{serve, spawn_logged, start_nats, Log};
use common::Server;
use std::process::{Child, Command};

/// The subscriber's user, and the subject published to.
const USER: u64 = 11;

/// Kills a child on drop (a router the test started).
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The NUL-separated arguments of `pid`, as any local user reads them.
fn cmdline(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .replace('\0', " ")
}

/// The children of `pid` (from /proc/*/stat's parent field).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // `pid (comm) state ppid …`: comm may hold spaces, so read after its `)`.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

/// Asserts that `secret` is in none of `places` (name, text).
fn nowhere(secret: &str, places: &[(&str, String)]) {
    for (name, text) in places {
        assert!(!text.contains(secret), "the secret is in {name}: {text}");
    }
}

fn joined(log: &Log) -> String {
    log.lock().unwrap().join("\n")
}

/// A subscriber on `gw` gets a publish through the router: both authenticated.
fn serves(gw: &Server) {
    let (mut stream, mut got) = sse(gw, USER, None);
    wait_router_connections(gw, 1);
    assert_eq!(gw.publish(USER, "through-nats")["connections"], 1);
    read_until(&mut stream, &mut got, "through-nats");
}

fn router(nats: &Nats, args: &[&str], env: &[(&str, &str)]) -> (Kill, String, Log) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_myriad"));
    cmd.args([
        "serve", "--role", "router", "--store", "memory", "--nats", &nats.url,
    ])
    .args(args)
    .envs(env.iter().copied());
    let (child, line, log) = spawn_logged(&mut cmd, "myriad router serving");
    (Kill(child), line, log)
}

fn gateway(url: &str, args: &[&str]) -> (Server, Log) {
    let mut all = vec![
        "--role",
        "gateway",
        "--listen",
        "127.0.0.1:0",
        "--loops",
        "1",
    ];
    all.extend(["--nats", url]);
    all.extend(args);
    serve(&all, &[], "listen=")
}

#[test]
fn a_token_by_file_or_variable_works_and_shows_nowhere() {
    const TOKEN: &str = "tok-3b9f0c55e1";
    let dir = tempfile::tempdir().unwrap();
    let conf = "authorization { token: $NATS_TOKEN }\n";
    let nats = start_nats(dir.path(), conf, &[("NATS_TOKEN", TOKEN)]);
    let (router, router_line, router_log) = router(&nats, &[], &[("MYRIAD_NATS_TOKEN", TOKEN)]);
    assert!(router_line.contains("nats_auth=token"), "{router_line}");
    let file = dir.path().join("token");
    std::fs::write(&file, TOKEN).unwrap();
    let (gw, gw_log) = gateway(&nats.url, &["--nats-token-file", file.to_str().unwrap()]);
    serves(&gw);
    nowhere(
        TOKEN,
        &[
            ("the router's log", joined(&router_log)),
            ("the gateway's log", joined(&gw_log)),
            ("the gateway's /stats", gw.stats().to_string()),
            ("the router's arguments", cmdline(router.0.id())),
            ("the gateway's arguments", cmdline(gw.pid())),
        ],
    );

    // A wrong token: refused at start, saying so, without the token.
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "not-the-tok-9d").unwrap();
    let stderr = common::secured::gateway_refused_by_nats(
        &nats.url,
        &["--nats-token-file", wrong.to_str().unwrap()],
    );
    assert!(!stderr.contains("not-the-tok-9d"), "{stderr}");
}

#[test]
fn an_nkey_seed_by_file_or_variable_works_and_shows_nowhere() {
    let pair = nkeys::KeyPair::new_user();
    let seed = pair.seed().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let conf = format!(
        "authorization {{ users = [ {{ nkey: {} }} ] }}\n",
        pair.public_key()
    );
    let nats = start_nats(dir.path(), &conf, &[]);
    let (router, router_line, router_log) =
        router(&nats, &[], &[("MYRIAD_NATS_NKEY", seed.as_str())]);
    assert!(
        router_line.contains(&format!("nats_auth=nkey {}", pair.public_key())),
        "{router_line}"
    );
    let file = dir.path().join("seed");
    std::fs::write(&file, format!("{seed}\n")).unwrap();
    let (gw, gw_log) = gateway(&nats.url, &["--nats-nkey-file", file.to_str().unwrap()]);
    serves(&gw);
    nowhere(
        &seed,
        &[
            ("the router's log", joined(&router_log)),
            ("the gateway's log", joined(&gw_log)),
            ("the gateway's /stats", gw.stats().to_string()),
            ("the router's arguments", cmdline(router.0.id())),
            ("the gateway's arguments", cmdline(gw.pid())),
        ],
    );
}

/// `method path` on `server` with `Authorization: Bearer key` (when given).
fn keyed(
    server: &Server,
    method: &str,
    path: &str,
    body: &str,
    key: Option<&str>,
) -> (u16, String) {
    let mut s = server.connect();
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    std::io::Write::write_all(&mut s, request.as_bytes()).unwrap();
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut s, &mut out).unwrap();
    common::parse_response(&out)
}

#[test]
fn a_password_in_the_url_reaches_the_supervisor_s_children_through_their_environment() {
    const PASSWORD: &str = "url-Pw-c41d7e";
    const API_KEY: &str = "api-key-5e0d2b";
    let dir = tempfile::tempdir().unwrap();
    let conf = "authorization { users = [ { user: myriad, password: $NATS_PASSWORD } ] }\n";
    let nats = start_nats(dir.path(), conf, &[("NATS_PASSWORD", PASSWORD)]);
    let url = nats
        .url
        .replace("nats://", &format!("nats://myriad:{PASSWORD}@"));
    let (supervisor, log) = serve(
        &[
            "--processes",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--store",
            "memory",
            "--nats",
            &url,
            "--api-key",
            API_KEY,
        ],
        &[],
        "myriad supervisor serving",
    );
    // The children have the key (from their environment): without it, 401.
    let (status, _) = keyed(&supervisor, "GET", "/stats", "", None);
    assert_eq!(status, 401);
    let (mut stream, mut got) = sse(&supervisor, USER, None);
    let deadline = std::time::Instant::now() + common::secured::WAIT;
    loop {
        let (status, body) = keyed(
            &supervisor,
            "POST",
            &format!("/pub/{USER}"),
            "keyed",
            Some(API_KEY),
        );
        assert_eq!(status, 200, "{body}");
        let reply: serde_json::Value = serde_json::from_str(&body).unwrap();
        if reply["connections"] == 1 {
            break;
        }
        // The router has not heard of the subscriber yet.
        assert!(std::time::Instant::now() < deadline, "{reply}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    read_until(&mut stream, &mut got, "keyed");
    let (_, stats) = keyed(&supervisor, "GET", "/stats", "", Some(API_KEY));
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    let shown = nats.url.replace("nats://", "nats://myriad:***@");
    assert_eq!(stats["nats"], shown.as_str(), "{stats}");
    let admin = supervisor.admin.unwrap().to_string();
    let kids = children(supervisor.pid());
    let mut places = vec![
        ("the log", joined(&log)),
        ("the gateway's /stats", stats.to_string()),
        ("the supervisor's /stats", get(&admin, "/stats")),
        ("the supervisor's /metrics", get(&admin, "/metrics")),
    ];
    let myriads: Vec<u32> = kids
        .into_iter()
        .filter(|pid| cmdline(*pid).contains("--role"))
        .collect();
    assert_eq!(myriads.len(), 2, "a router and a gateway");
    for pid in myriads {
        places.push(("a child's arguments", cmdline(pid)));
    }
    let help = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(["serve", "--help"])
        .env("MYRIAD_NATS", &url)
        .output()
        .unwrap();
    places.push((
        "`serve --help`",
        String::from_utf8_lossy(&help.stdout).into(),
    ));
    nowhere(PASSWORD, &places);
    nowhere(API_KEY, &places);
}

#[test]
fn tls_to_nats_with_a_test_ca_and_a_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ca = tls::TestCa::new("myriad NATS test CA").unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let issue = |name: &str| {
        let sub = dir.path().join(name);
        std::fs::create_dir(&sub).unwrap();
        ca.issue(&names).unwrap().write(&sub).unwrap()
    };
    let (server_cert, server_key) = issue("server");
    let (client_cert, client_key) = issue("client");
    let conf = format!(
        "tls {{ cert_file: \"{}\", key_file: \"{}\", ca_file: \"{}\", verify: true }}\n",
        server_cert.display(),
        server_key.display(),
        ca_file.display()
    );
    let nats = start_nats(dir.path(), &conf, &[]);
    let (ca_arg, cert_arg, key_arg) = (
        ca_file.to_str().unwrap(),
        client_cert.to_str().unwrap(),
        client_key.to_str().unwrap(),
    );
    let tls_flags = [
        "--nats-ca",
        ca_arg,
        "--nats-cert",
        cert_arg,
        "--nats-key",
        key_arg,
    ];
    let (_router, line, _) = router(&nats, &tls_flags, &[]);
    assert!(line.contains("nats_tls=required (CA "), "{line}");
    let (gw, _) = gateway(&nats.url, &tls_flags);
    serves(&gw);

    // Without a client certificate the server refuses the handshake; without the CA
    // this process does not trust the server.
    for flags in [
        &["--nats-ca", ca_arg][..],
        &["--nats-cert", cert_arg, "--nats-key", key_arg],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_myriad"))
            .args(["serve", "--role", "gateway", "--listen", "127.0.0.1:0"])
            .args(["--nats", &nats.url])
            .args(flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} started: {stderr}");
    }
}
