//! Bytes an idle server session holds, by phase: `cargo run --release -p tls --example
//! idle_memory`. Counts live heap bytes with a counting allocator around N handshakes
//! over memory (rustls's own client on the other side, dropped before counting), and
//! lists the allocations each session keeps by size — what rustls itself keeps when no
//! takeover happens (`lean: false`, and TLS 1.2), against the lean TLS 1.3 phase.

use rustls::pki_types::ServerName;
use std::io::Write;
use std::sync::Arc;
use tls::{Alpn, ServerOptions, ServerSession, TestCa};

mod counting;
use counting::{describe, diff, live, snapshot};

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

const N: usize = 2000;

#[derive(Clone, Copy, PartialEq)]
enum Stop {
    /// After the server's flight, before the client's Finished.
    Handshaking,
    /// Established, one request read.
    Idle,
}

fn run(label: &str, sc: Arc<rustls::ServerConfig>, cc: Arc<rustls::ClientConfig>, stop: Stop) {
    // Everything that is not a session is allocated before the baseline.
    let mut sessions: Vec<ServerSession> = Vec::with_capacity(N);
    let (mut out, mut plain) = (Vec::with_capacity(1 << 16), Vec::with_capacity(1 << 16));
    let by_size = snapshot();
    let base = live();
    let mut phase = None;
    for _ in 0..N {
        let mut c =
            rustls::ClientConnection::new(cc.clone(), ServerName::try_from("localhost").unwrap())
                .unwrap();
        let mut s = ServerSession::new(sc.clone()).unwrap();
        for round in 0..4 {
            let mut wire = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut wire).unwrap();
            }
            if stop == Stop::Idle && round == 2 {
                // The request, read like any other input, then the session idles.
                out.clear();
                s.handle_input(&mut wire, &mut out, &mut plain).unwrap();
                break;
            }
            out.clear();
            s.handle_input(&mut wire, &mut out, &mut plain).unwrap();
            if stop == Stop::Handshaking {
                break;
            }
            c.read_tls(&mut &out[..]).unwrap();
            c.process_new_packets().unwrap();
            if !c.is_handshaking() && round >= 1 {
                c.writer().write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
            }
        }
        plain.clear();
        phase = Some(s.phase());
        sessions.push(s);
    }
    let held = live() - base;
    let inline = std::mem::size_of::<ServerSession>();
    println!(
        "{label}: phase {:?}; inline {inline} B + heap {:.0} B = {:.0} B per session",
        phase.unwrap(),
        held as f64 / N as f64,
        inline as f64 + held as f64 / N as f64
    );
    let list = describe(&diff(&by_size), N as isize, 0.5);
    if !list.is_empty() {
        println!("    allocations kept per session, count×bytes: {list}");
    }
}

fn main() {
    let ca = TestCa::new("idle memory CA").unwrap();
    let id = ca.issue(&["localhost".into()]).unwrap().identity().unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.cert_der()).unwrap();
    let client = |tls12: bool| {
        let v: &[&rustls::SupportedProtocolVersion] = if tls12 {
            &[&rustls::version::TLS12]
        } else {
            rustls::ALL_VERSIONS
        };
        let mut c = rustls::ClientConfig::builder_with_provider(tls::provider())
            .with_protocol_versions(v)
            .unwrap()
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        c.alpn_protocols = vec![b"http/1.1".to_vec()];
        c.resumption = rustls::client::Resumption::disabled();
        Arc::new(c)
    };
    let server = |lean: bool| {
        let o = ServerOptions {
            alpn: vec![Alpn::H2, Alpn::Http11],
            lean,
            ..ServerOptions::default()
        };
        Arc::new(tls::server_config(&id, &o).unwrap())
    };
    // Warm up lazily initialised globals so they are not charged to the first phase.
    run("warm-up", server(true), client(false), Stop::Idle);
    println!(
        "{N} sessions each; ServerSession inline size {} B\n",
        std::mem::size_of::<ServerSession>()
    );
    run(
        "TLS 1.3, lean takeover (default)",
        server(true),
        client(false),
        Stop::Idle,
    );
    run(
        "TLS 1.3, rustls kept (lean: false)",
        server(false),
        client(false),
        Stop::Idle,
    );
    run(
        "TLS 1.2 (rustls keeps the record layer)",
        server(true),
        client(true),
        Stop::Idle,
    );
    run(
        "mid-handshake (server flight sent)",
        server(true),
        client(false),
        Stop::Handshaking,
    );
}
