//! The TLS push server of flood's tests (tests/tls_server: tokio, tokio-rustls, h2 —
//! not myriad) as a process, for measuring flood's own memory per TLS or HTTP/2
//! connection:
//!
//! ```sh
//! cargo run --release -p load --example tls_push_server -- DIR SECONDS [h2c]
//! myriad-flood --url https://localhost:PORT/sse/%d --ca DIR/ca.pem -n 10000 ...
//! ```
//!
//! Writes DIR/ca.pem (a fresh test CA), prints `port N`, broadcasts a stamped message
//! every second, and exits after SECONDS. With `h2c`: plain TCP, HTTP/2 prior knowledge;
//! with `plain`: plain TCP, HTTP/1.1 (a baseline).

#[path = "../tests/tls_server/mod.rs"]
mod tls_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: DIR SECONDS [h2c|plain]"));
    let secs: u64 = args.next().and_then(|s| s.parse().ok()).expect("SECONDS");
    let mode = args.next().unwrap_or_default();
    let ca = tls::TestCa::new("tls_push_server CA").unwrap();
    std::fs::write(dir.join("ca.pem"), ca.cert_pem()).unwrap();
    let leaf = ca.issue(&["localhost".into(), "127.0.0.1".into()]).unwrap();
    let opts = tls::ServerOptions {
        alpn: vec![tls::Alpn::H2, tls::Alpn::Http11],
        lean: false,
        ..tls::ServerOptions::default()
    };
    let config = Arc::new(tls::server_config(&leaf.identity().unwrap(), &opts).unwrap());
    let server = match mode.as_str() {
        "h2c" => tls_server::TlsServer::start(None),
        "plain" => tls_server::TlsServer::start_plain_h1(),
        _ => tls_server::TlsServer::start(Some(config)),
    };
    println!("port {}", server.addr.port());
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_secs(1));
        server.broadcast("tick");
    }
}
