//! TLS test harness: a throwaway CA and a server certificate it signed, written to a
//! temporary directory; `myriad serve` started with them; a blocking rustls client
//! (rustls's own buffered API over a real socket) for requests and subscriptions.
#![allow(dead_code)] // each TLS test file uses a different part of the harness

use crate::common::{parse_response, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tls::rustls::{ClientConfig, ClientConnection, StreamOwned};

pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// A CA, a leaf for localhost/127.0.0.1 it signed, and their files.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca: tls::TestCa,
    pub ca_file: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub fn names() -> Vec<String> {
    vec!["localhost".to_string(), "127.0.0.1".to_string()]
}

impl Pki {
    pub fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca = tls::TestCa::new("myriad test CA").unwrap();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca.cert_pem()).unwrap();
        let (cert, key) = ca.issue(&names()).unwrap().write(dir.path()).unwrap();
        Pki {
            dir,
            ca,
            ca_file,
            cert,
            key,
        }
    }

    /// `myriad serve` on TLS with this PKI's certificate, plus `extra` flags.
    pub fn serve(&self, extra: &[&str]) -> Server {
        let mut args = vec![
            "--tls-cert",
            self.cert.to_str().unwrap(),
            "--tls-key",
            self.key.to_str().unwrap(),
        ];
        args.extend(extra);
        Server::start(&args)
    }

    /// A client config trusting this PKI's CA (HTTP/1.1 offered).
    pub fn client(&self) -> Arc<ClientConfig> {
        client_trusting(&self.ca_file)
    }
}

pub fn client_trusting(ca_file: &std::path::Path) -> Arc<ClientConfig> {
    let roots = tls::Roots::CaFile(ca_file.to_path_buf());
    Arc::new(tls::client_config(&roots, &[tls::Alpn::Http11], false).unwrap())
}

/// A TLS connection to `server` as `localhost`, handshake done.
pub fn connect(server: &Server, config: &Arc<ClientConfig>) -> Result<TlsStream, std::io::Error> {
    let tcp = TcpStream::connect(server.addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let name = tls::server_name("localhost").unwrap();
    let conn = ClientConnection::new(config.clone(), name).map_err(std::io::Error::other)?;
    let mut stream = StreamOwned::new(conn, tcp);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    Ok(stream)
}

/// One request over a fresh TLS connection; (status, body).
pub fn request(
    server: &Server,
    config: &Arc<ClientConfig>,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, String) {
    let mut s = connect(server, config).expect("tls connect");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    s.write_all(&req).unwrap();
    let mut out = Vec::new();
    // The server ends with close_notify: a clean EOF.
    s.read_to_end(&mut out).expect("clean TLS end");
    parse_response(&out)
}

pub fn publish(server: &Server, config: &Arc<ClientConfig>, subject: u64, text: &str) -> u64 {
    let (status, body) = request(
        server,
        config,
        "POST",
        &format!("/pub/{subject}"),
        text.as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["connections"].as_u64().unwrap()
}

pub fn stats(server: &Server, config: &Arc<ClientConfig>) -> serde_json::Value {
    let (status, body) = request(server, config, "GET", "/stats", b"");
    assert_eq!(status, 200);
    serde_json::from_str(&body).unwrap()
}

/// Waits until the TLS server's `/stats` satisfies `pred`.
pub fn wait_stats(
    server: &Server,
    config: &Arc<ClientConfig>,
    what: &str,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = stats(server, config);
        if pred(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {s}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads `s` until `needle` was seen.
pub fn read_until(s: &mut impl Read, buf: &mut Vec<u8>, needle: &str) {
    while !String::from_utf8_lossy(buf).contains(needle) {
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) => panic!(
                "closed before {needle:?}: {:?}",
                String::from_utf8_lossy(buf)
            ),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("no {needle:?} ({e}): {:?}", String::from_utf8_lossy(buf)),
        }
    }
}

/// What the browser tests need, said when something is missing.
pub const BROWSER_INSTALL: &str = "run: apt-get install -y chromium libnss3-tools && npm ci --prefix crates/observe/tests/browser (or ./scripts/setup.sh)";

/// A HOME whose NSS store trusts `ca_file` as a CA for servers.
pub fn nss_home(ca_file: &std::path::Path) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join(".pki/nssdb");
    std::fs::create_dir_all(&db).unwrap();
    let db = format!("sql:{}", db.display());
    let certutil = |args: &[&str]| {
        let out = std::process::Command::new("certutil")
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("certutil: {e}; {BROWSER_INSTALL}"));
        assert!(out.status.success(), "certutil {args:?}: {out:?}");
    };
    certutil(&["-N", "-d", &db, "--empty-password"]);
    let ca = ca_file.to_str().unwrap();
    certutil(&[
        "-A",
        "-d",
        &db,
        "-n",
        "myriad test CA",
        "-t",
        "C,,",
        "-i",
        ca,
    ]);
    home
}
