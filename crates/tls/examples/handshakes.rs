//! Server-side TLS handshakes per second per core, ECDSA P-256 and RSA-2048:
//!
//! ```sh
//! cargo run --release -p tls --example handshakes [SECONDS] [RUNS]
//! ```
//!
//! Two setups, each run RUNS times (default 3) for SECONDS (default 3), medians printed:
//! - memory: rustls's client and our [`ServerSession`] in one thread, bytes handed over
//!   in memory; the server's share is its own calls' thread CPU time.
//! - loopback: two server threads (one per core) each serving one connection at a time
//!   over real sockets (TLS 1.3 handshake, one request, one reply, close), two client
//!   threads; the server's share is the sum of its threads' CPU time.
//!
//! Full handshakes (X25519, TLS 1.3, AES-256-GCM as rustls clients choose it); a
//! "resumed" row uses the session ticket the server sends, skipping the signature.
//! The RSA key comes from `openssl genpkey` (ring signs with RSA but cannot make keys).
//!
//! Then the cost of sealing one push message (100 bytes of plaintext, one record) in
//! an established lean session, per TLS 1.3 suite: what encryption adds per delivery.

use rustls::pki_types::ServerName;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tls::{Alpn, Identity, ServerOptions, ServerSession};

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

struct Setup {
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

fn setup(id: &Identity, resume: bool) -> Setup {
    setup_with(id, resume, true)
}

fn setup_with(id: &Identity, resume: bool, lean: bool) -> Setup {
    let server = Arc::new(
        tls::server_config(
            id,
            &ServerOptions {
                alpn: vec![Alpn::Http11],
                lean,
                ..ServerOptions::default()
            },
        )
        .unwrap(),
    );
    let mut client =
        tls::client_config(&tls::Roots::Certs(id.certs.clone()), &[Alpn::Http11], false).unwrap();
    client.resumption = if resume {
        rustls::client::Resumption::in_memory_sessions(64)
    } else {
        rustls::client::Resumption::disabled()
    };
    Setup {
        server,
        client: Arc::new(client),
    }
}

fn name() -> ServerName<'static> {
    ServerName::try_from("localhost").unwrap()
}

/// (handshakes per server CPU second, handshakes per wall second) in memory.
fn memory(s: &Setup, secs: f64) -> (f64, f64) {
    let (mut out, mut plain) = (Vec::with_capacity(1 << 16), Vec::new());
    let mut server_cpu = Duration::ZERO;
    let mut n = 0u64;
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < secs {
        let mut c = rustls::ClientConnection::new(s.client.clone(), name()).unwrap();
        let t = thread_cpu();
        let mut srv = ServerSession::new(s.server.clone()).unwrap();
        server_cpu += thread_cpu() - t;
        for _ in 0..4 {
            let mut wire = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut wire).unwrap();
            }
            if wire.is_empty() {
                break;
            }
            out.clear();
            let t = thread_cpu();
            srv.handle_input(&mut wire, &mut out, &mut plain).unwrap();
            server_cpu += thread_cpu() - t;
            if !out.is_empty() {
                c.read_tls(&mut &out[..]).unwrap();
                c.process_new_packets().unwrap();
            }
        }
        assert!(!srv.is_handshaking() && !c.is_handshaking());
        n += 1;
    }
    (
        n as f64 / server_cpu.as_secs_f64(),
        n as f64 / start.elapsed().as_secs_f64(),
    )
}

/// (handshakes per server CPU second, handshakes per wall second) over loopback.
fn loopback(s: &Setup, secs: f64) -> (f64, f64) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let cpu_ns = Arc::new(AtomicU64::new(0));
    let servers: Vec<_> = (0..2)
        .map(|_| {
            let l = l.try_clone().unwrap();
            let (config, stop, cpu_ns) = (s.server.clone(), stop.clone(), cpu_ns.clone());
            std::thread::spawn(move || {
                let t0 = thread_cpu();
                let mut scratch = vec![0u8; 1 << 16];
                let (mut out, mut plain) = (Vec::with_capacity(1 << 16), Vec::new());
                while let Ok((mut sock, _)) = l.accept() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    sock.set_nodelay(true).unwrap();
                    let mut session = ServerSession::new(config.clone()).unwrap();
                    loop {
                        let n = match sock.read(&mut scratch) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        out.clear();
                        plain.clear();
                        if session
                            .handle_input(&mut scratch[..n], &mut out, &mut plain)
                            .is_err()
                        {
                            break;
                        }
                        if !plain.is_empty() {
                            session.encrypt(&[b"ok"], &mut out).unwrap();
                        }
                        if sock.write_all(&out).is_err() {
                            break;
                        }
                    }
                }
                cpu_ns.fetch_add((thread_cpu() - t0).as_nanos() as u64, Ordering::Relaxed);
            })
        })
        .collect();
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let (config, done) = (s.client.clone(), done.clone());
            std::thread::spawn(move || {
                while start.elapsed().as_secs_f64() < secs {
                    let sock = TcpStream::connect(addr).unwrap();
                    sock.set_nodelay(true).unwrap();
                    let c = rustls::ClientConnection::new(config.clone(), name()).unwrap();
                    let mut t = rustls::StreamOwned::new(c, sock);
                    t.write_all(b"hi").unwrap();
                    let mut buf = [0u8; 2];
                    t.read_exact(&mut buf).unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let wall = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for _ in 0..2 {
        let _ = TcpStream::connect(addr); // wake the accepts
    }
    for s in servers {
        s.join().unwrap();
    }
    let n = done.load(Ordering::Relaxed) as f64;
    let cpu = cpu_ns.load(Ordering::Relaxed) as f64 / 1e9;
    (n / cpu, n / wall)
}

/// Nanoseconds to seal one `size`-byte record in a session of `suite`: lean, or with
/// rustls kept (its AEAD context stored, not rebuilt per call).
fn seal_ns(id: &Identity, suite: rustls::CipherSuite, size: usize, count: u32, lean: bool) -> f64 {
    let s = setup_with(id, false, lean);
    let mut p = (*tls::provider()).clone();
    p.cipher_suites.retain(|c| c.suite() == suite);
    let mut cc = rustls::ClientConfig::builder_with_provider(Arc::new(p))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates({
            let mut r = rustls::RootCertStore::empty();
            r.add(id.certs[0].clone()).unwrap();
            r
        })
        .with_no_client_auth();
    cc.resumption = rustls::client::Resumption::disabled();
    let mut c = rustls::ClientConnection::new(Arc::new(cc), name()).unwrap();
    let mut srv = ServerSession::new(s.server.clone()).unwrap();
    let (mut out, mut plain) = (Vec::new(), Vec::new());
    for _ in 0..4 {
        let mut wire = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut wire).unwrap();
        }
        out.clear();
        srv.handle_input(&mut wire, &mut out, &mut plain).unwrap();
        if !out.is_empty() {
            c.read_tls(&mut &out[..]).unwrap();
            c.process_new_packets().unwrap();
        }
    }
    assert_eq!(matches!(srv.phase(), tls::Phase::Lean(_)), lean);
    let msg = vec![b'x'; size];
    out = Vec::with_capacity(1 << 16);
    let t = thread_cpu();
    for _ in 0..count {
        out.clear();
        srv.encrypt(&[&msg], &mut out).unwrap();
    }
    (thread_cpu() - t).as_nanos() as f64 / f64::from(count)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn rsa_identity() -> Identity {
    let out = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ])
        .output()
        .expect("the RSA row needs the openssl command-line tool");
    assert!(out.status.success(), "openssl genpkey failed");
    let key = String::from_utf8(out.stdout).unwrap();
    tls::self_signed_with_key(&["localhost".into()], &key)
        .unwrap()
        .identity()
        .unwrap()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().map_or(3.0, |s| s.parse().expect("SECONDS"));
    let runs: usize = args.next().map_or(3, |s| s.parse().expect("RUNS"));
    let ecdsa = tls::self_signed(&["localhost".into()])
        .unwrap()
        .identity()
        .unwrap();
    let rsa = rsa_identity();
    println!("server-side handshakes per second per core, medians of {runs} runs of {secs} s\n");
    println!("| key | setup | per server core-second | wall rate (client + server on 2 cores) |");
    println!("|---|---|---|---|");
    for (key, id, resume) in [
        ("ECDSA P-256", &ecdsa, false),
        ("RSA-2048", &rsa, false),
        ("ECDSA P-256, resumed", &ecdsa, true),
        ("RSA-2048, resumed", &rsa, true),
    ] {
        let s = setup(id, resume);
        for (label, f) in [
            ("memory", memory as fn(&Setup, f64) -> (f64, f64)),
            ("loopback", loopback),
        ] {
            let results: Vec<(f64, f64)> = (0..runs).map(|_| f(&s, secs)).collect();
            let all: Vec<String> = results.iter().map(|r| format!("{:.0}", r.0)).collect();
            println!(
                "| {key} | {label} | {:.0} (runs: {}) | {:.0}/s |",
                median(results.iter().map(|r| r.0).collect()),
                all.join(", "),
                median(results.iter().map(|r| r.1).collect()),
            );
        }
    }
    println!("\nsealing one record (thread CPU, medians of {runs} runs of 200,000)\n");
    println!("| suite | lean, 100 B | lean, 1,000 B | rustls kept, 100 B |\n|---|---|---|---|");
    for suite in [
        rustls::CipherSuite::TLS13_AES_128_GCM_SHA256,
        rustls::CipherSuite::TLS13_AES_256_GCM_SHA384,
        rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    ] {
        let ns = |size, lean| {
            median(
                (0..runs)
                    .map(|_| seal_ns(&ecdsa, suite, size, 200_000, lean))
                    .collect(),
            )
        };
        println!(
            "| {suite:?} | {:.0} ns | {:.0} ns | {:.0} ns |",
            ns(100, true),
            ns(1000, true),
            ns(100, false)
        );
    }
}
