//! flood over TLS and HTTP/2 against a push server that is not myriad (tests/tls_server:
//! tokio, tokio-rustls, the h2 crate): `https://` streams, SSE and long-poll, `wss://`
//! with pongs, certificate checks against a test CA (`--ca`), `--insecure`, handshake
//! failures as their own reason, and `--h2` with many streams per connection (TLS with
//! ALPN h2, and h2c).

mod harness;
mod tls_server;

use harness::start;
use load::flood::{self, FloodArgs, FloodSummary, Transport};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tls::{Alpn, ServerOptions, TestCa};
use tls_server::TlsServer;

struct Pki {
    ca_file: tempfile::NamedTempFile,
    server: Arc<tls::rustls::ServerConfig>,
}

fn pki() -> Pki {
    let ca = TestCa::new("flood tests CA").unwrap();
    let leaf = ca.issue(&["localhost".into(), "127.0.0.1".into()]).unwrap();
    let ca_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ca_file.path(), ca.cert_pem()).unwrap();
    // rustls's own server config (tokio-rustls uses the buffered API).
    let server = tls::server_config(
        &leaf.identity().unwrap(),
        &ServerOptions {
            alpn: vec![Alpn::H2, Alpn::Http11],
            lean: false,
            ..ServerOptions::default()
        },
    )
    .unwrap();
    Pki {
        ca_file,
        server: Arc::new(server),
    }
}

fn args(url: String, n: u64, transport: Transport, pki: &Pki) -> FloodArgs {
    FloodArgs {
        urls: vec![url],
        connections: n,
        rate: 0.0,
        transport,
        quiet: std::env::var_os("FLOOD_VERBOSE").is_none(),
        max_time: 60.0,
        ca: Some(pki.ca_file.path().to_path_buf()),
        ..Default::default()
    }
}

/// Open `n`, two broadcasts, everything counted once with a latency.
fn two_messages_each(server: &TlsServer, a: FloodArgs) -> FloodSummary {
    let n = a.connections;
    let run = start(a);
    server.wait_for(n as usize);
    server.broadcast("first");
    server.broadcast("second");
    let s = run.finish_after(2 * n);
    assert_eq!((s.opened, s.failed), (n, 0), "{s:?}");
    assert_eq!(s.messages, 2 * n, "welcomes are not messages: {s:?}");
    assert!(s.lat_p50_us > 0 && s.lat_max_us < 60_000_000, "{s:?}");
    s
}

#[test]
fn https_stream_sse_and_poll() {
    let pki = pki();
    for (path, t) in [("/sub/%d", Transport::Stream), ("/sse/%d", Transport::Sse)] {
        let server = TlsServer::start(Some(pki.server.clone()));
        let url = format!("https://localhost:{}{path}", server.addr.port());
        two_messages_each(&server, args(url, 20, t, &pki));
    }
    let server = TlsServer::start(Some(pki.server.clone()));
    let url = format!("https://127.0.0.1:{}/poll/%d", server.addr.port());
    let run = start(args(url, 5, Transport::Poll, &pki));
    server.wait_for(5);
    server.broadcast("a");
    server.broadcast("b");
    let s = run.finish_after(5 * 2);
    assert_eq!((s.opened, s.messages, s.failed), (5, 10, 0), "{s:?}");
}

#[test]
fn wss_counts_frames_and_answers_pings_encrypted() {
    let pki = pki();
    let server = TlsServer::start(Some(pki.server.clone()));
    let url = format!("wss://localhost:{}/ws/%d", server.addr.port());
    let run = start(args(url, 10, Transport::Ws, &pki));
    server.wait_for(10);
    server.ping();
    server.broadcast("m");
    let end = Instant::now() + Duration::from_secs(10);
    while server.counters.pongs.load(Ordering::Relaxed) < 10 {
        assert!(
            Instant::now() < end,
            "pongs: {}",
            server.counters.pongs.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = run.finish_after(10);
    assert_eq!((s.opened, s.messages, s.failed), (10, 10, 0), "{s:?}");
}

#[test]
fn a_certificate_from_another_ca_is_a_handshake_failure_and_insecure_skips_the_check() {
    let pki = pki();
    let other = pki_other();
    let server = TlsServer::start(Some(pki.server.clone()));
    let url = format!("https://localhost:{}/sub/%d", server.addr.port());
    let mut a = args(url.clone(), 6, Transport::Stream, &pki);
    a.ca = Some(other.path().to_path_buf());
    a.hold = Some(0.0);
    let s = flood::run_with(a, &mut |_| {}).unwrap();
    assert_eq!(
        (s.opened, s.failed, s.failures.handshake),
        (0, 6, 6),
        "{s:?}"
    );
    assert!(s.failures.describe().contains("handshake 6"));
    let mut a = args(url, 6, Transport::Stream, &pki);
    a.ca = None;
    a.insecure = true;
    two_messages_each(&server, a);
}

fn pki_other() -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), TestCa::new("another CA").unwrap().cert_pem()).unwrap();
    f
}

#[test]
fn a_server_that_is_not_tls_fails_handshakes() {
    // Plain HTTP where TLS was expected: the server answers the ClientHello with junk.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            use std::io::Write;
            let mut s = s;
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let pki = pki();
    let mut a = args(
        format!("https://127.0.0.1:{}/sub/%d", addr.port()),
        4,
        Transport::Stream,
        &pki,
    );
    a.hold = Some(0.0);
    let s = flood::run_with(a, &mut |_| {}).unwrap();
    assert_eq!((s.opened, s.failures.handshake), (0, 4), "{s:?}");
}

#[test]
fn h2_over_tls_multiplexes_streams() {
    let pki = pki();
    for (path, t) in [("/sse/%d", Transport::Sse), ("/sub/%d", Transport::Stream)] {
        let server = TlsServer::start(Some(pki.server.clone()));
        let mut a = args(
            format!("https://localhost:{}{path}", server.addr.port()),
            40,
            t,
            &pki,
        );
        a.h2 = true;
        a.streams_per_connection = 10;
        let s = two_messages_each(&server, a);
        assert_eq!(s.closed, 40, "{s:?}");
        assert_eq!(
            server.counters.h2_conns.load(Ordering::Relaxed),
            4,
            "40 streams over 4 connections"
        );
    }
    let server = TlsServer::start(Some(pki.server.clone()));
    let mut a = args(
        format!("https://localhost:{}/poll/%d", server.addr.port()),
        6,
        Transport::Poll,
        &pki,
    );
    a.h2 = true;
    a.streams_per_connection = 3;
    let run = start(a);
    server.wait_for(6);
    server.broadcast("p");
    server.broadcast("q");
    let s = run.finish_after(6 * 2);
    assert_eq!((s.opened, s.messages, s.failed), (6, 12, 0), "{s:?}");
    assert_eq!(server.counters.h2_conns.load(Ordering::Relaxed), 2);
}

#[test]
fn h2c_with_prior_knowledge() {
    let pki = pki();
    let server = TlsServer::start(None);
    let mut a = args(
        format!("http://127.0.0.1:{}/sse/%d", server.addr.port()),
        10,
        Transport::Sse,
        &pki,
    );
    a.h2 = true;
    a.streams_per_connection = 5;
    two_messages_each(&server, a);
    assert_eq!(server.counters.h2_conns.load(Ordering::Relaxed), 2);
    assert_eq!(server.counters.h2_streams.load(Ordering::Relaxed), 10);
}

#[test]
fn h2_refuses_websocket_clearly() {
    let pki = pki();
    let mut a = args("https://127.0.0.1:1/ws/%d".into(), 1, Transport::Ws, &pki);
    a.h2 = true;
    let err = flood::run_with(a, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("WebSocket stays on HTTP/1.1"), "{err}");
}
