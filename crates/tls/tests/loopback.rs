//! Server sessions on real loopback sockets: rustls's blocking client with each ALPN,
//! OpenSSL's `s_client` (a TLS stack that is not rustls) with each TLS 1.3 suite and a
//! KeyUpdate, a TLS 1.2 renegotiation attempt, certificate reload for new connections
//! only, SIGHUP as a reload request, and the kTLS hook.

mod common;

use common::pki;
use rustls::pki_types::ServerName;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tls::{Alpn, CertSource, Phase, ReloadableConfig, ServerOptions, ServerSession};

/// An echo server: each connection gets a [`ServerSession`] from `config.current()`;
/// plaintext comes back as `echo:<data>`; a line containing `bye` also closes.
/// `on_session` sees each session once established (for the kTLS test).
fn serve(
    config: Arc<ReloadableConfig>,
    on_session: fn(&TcpStream, &mut ServerSession),
) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for sock in l.incoming() {
            let Ok(sock) = sock else { return };
            let session = ServerSession::new(config.current()).unwrap();
            std::thread::spawn(move || echo(sock, session, on_session));
        }
    });
    addr
}

fn echo(mut sock: TcpStream, mut s: ServerSession, on_session: fn(&TcpStream, &mut ServerSession)) {
    // The caller's handshake timeout: a head timeout, here a read timeout.
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut scratch = vec![0u8; 64 * 1024];
    let (mut out, mut plain) = (Vec::new(), Vec::new());
    loop {
        let n = match sock.read(&mut scratch) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        out.clear();
        plain.clear();
        let r = s.handle_input(&mut scratch[..n], &mut out, &mut plain);
        if matches!(r, Ok(st) if st.established) {
            on_session(&sock, &mut s);
        }
        let mut close = r.is_err() || matches!(r, Ok(st) if st.peer_closed);
        if !plain.is_empty() {
            s.encrypt(&[b"echo:", &plain], &mut out).unwrap();
            if plain.windows(3).any(|w| w == b"bye") {
                s.close(&mut out);
                close = true;
            }
        }
        if sock.write_all(&out).is_err() || close {
            return;
        }
    }
}

fn no_hook(_: &TcpStream, _: &mut ServerSession) {}

fn config_for(pki: &common::Pki, alpn: &[Alpn]) -> Arc<ReloadableConfig> {
    Arc::new(
        ReloadableConfig::new(
            CertSource::Given(pki.leaf.identity().unwrap()),
            ServerOptions {
                alpn: alpn.to_vec(),
                ..ServerOptions::default()
            },
        )
        .unwrap(),
    )
}

/// rustls's blocking client: connect, check ALPN, one round trip.
fn rustls_round_trip(
    addr: SocketAddr,
    ca: &tls::TestCa,
    alpn: &[&[u8]],
    msg: &[u8],
) -> (Option<Vec<u8>>, Vec<u8>) {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.cert_der()).unwrap();
    let mut cc = rustls::ClientConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cc.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    let conn =
        rustls::ClientConnection::new(Arc::new(cc), ServerName::try_from("localhost").unwrap())
            .unwrap();
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    tls.write_all(msg).unwrap();
    let mut buf = vec![0u8; 5 + msg.len()];
    tls.read_exact(&mut buf).unwrap();
    (tls.conn.alpn_protocol().map(|a| a.to_vec()), buf)
}

#[test]
fn rustls_clients_over_loopback_with_each_alpn() {
    let pki = pki();
    let addr = serve(config_for(&pki, &[Alpn::H2, Alpn::Http11]), no_hook);
    for (offer, want) in [
        (&[&b"h2"[..], b"http/1.1"][..], Some(b"h2".to_vec())),
        (&[&b"http/1.1"[..]][..], Some(b"http/1.1".to_vec())),
        (&[][..], None),
    ] {
        let (alpn, reply) = rustls_round_trip(addr, &pki.ca, offer, b"hello over loopback");
        assert_eq!(alpn, want);
        assert_eq!(reply, b"echo:hello over loopback");
    }
}

/// Run `openssl s_client` with `args`, feeding `input` lines slowly (so each is its own
/// record or command); returns stdout + stderr. Panics clearly when openssl is missing.
fn s_client(addr: SocketAddr, ca: &std::path::Path, args: &[&str], input: &[&str]) -> String {
    let mut child = Command::new("openssl")
        .arg("s_client")
        .args(["-connect", &addr.to_string(), "-servername", "localhost"])
        .args(["-CAfile", ca.to_str().unwrap(), "-verify_return_error"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("these tests need the openssl command-line tool (Debian: apt-get install openssl)");
    let mut stdin = child.stdin.take().unwrap();
    for line in input {
        std::thread::sleep(Duration::from_millis(300));
        if stdin.write_all(format!("{line}\n").as_bytes()).is_err() {
            break;
        }
    }
    // stdin stays open (EOF would make s_client quit; -ign_eof would turn off its command
    // letters), so s_client ends when the server closes after "bye"; bounded anyway.
    let end = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn openssl_clients_with_each_tls13_suite_and_a_key_update() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, pki.ca.cert_pem()).unwrap();
    let addr = serve(config_for(&pki, &[Alpn::H2, Alpn::Http11]), no_hook);
    for suite in [
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
    ] {
        let out = s_client(
            addr,
            &ca,
            &["-tls1_3", "-ciphersuites", suite, "-alpn", "h2"],
            &["hello", "K", "after update", "bye"],
        );
        assert!(out.contains("Verify return code: 0 (ok)"), "{suite}: {out}");
        assert!(
            out.contains(&format!("Cipher is {suite}")),
            "{suite}: {out}"
        );
        assert!(out.contains("ALPN protocol: h2"), "{suite}: {out}");
        assert!(
            out.contains("KEYUPDATE"),
            "s_client sent a KeyUpdate: {out}"
        );
        assert!(out.contains("echo:hello"), "{suite}: {out}");
        assert!(
            out.contains("echo:after update"),
            "records after the KeyUpdate: {out}"
        );
        assert!(out.contains("echo:bye"), "{suite}: {out}");
    }
}

/// rustls refuses TLS 1.2 renegotiation (a `no_renegotiation` warning), and the session
/// is not renegotiated.
#[test]
fn openssl_tls12_renegotiation_is_refused() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, pki.ca.cert_pem()).unwrap();
    let addr = serve(config_for(&pki, &[Alpn::Http11]), no_hook);
    let out = s_client(
        addr,
        &ca,
        &["-tls1_2"],
        &["hello", "R", "still there", "bye"],
    );
    assert!(out.contains("Protocol  : TLSv1.2"), "{out}");
    assert!(out.contains("echo:hello"), "{out}");
    assert!(out.contains("RENEGOTIATING"), "s_client tried: {out}");
    assert!(
        out.contains("no renegotiation") || out.contains("no_renegotiation"),
        "the server said no: {out}"
    );
}

#[test]
fn reload_changes_the_certificate_for_new_connections_only() {
    let dir = tempfile::tempdir().unwrap();
    let first = pki();
    let (cert, key) = first.leaf.write(dir.path()).unwrap();
    let config = Arc::new(
        ReloadableConfig::new(
            CertSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            ServerOptions::default(),
        )
        .unwrap(),
    );
    let addr = serve(config.clone(), no_hook);
    // An open connection under the first certificate.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(first.ca.cert_der()).unwrap();
    let cc = rustls::ClientConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let conn =
        rustls::ClientConnection::new(Arc::new(cc), ServerName::try_from("localhost").unwrap())
            .unwrap();
    let mut old = rustls::StreamOwned::new(conn, TcpStream::connect(addr).unwrap());
    old.write_all(b"one").unwrap();
    let mut buf = [0u8; 8];
    old.read_exact(&mut buf).unwrap();
    // New files, from another CA; reload.
    let second = pki();
    second.leaf.write(dir.path()).unwrap();
    config.reload().unwrap();
    assert_eq!(config.generation(), 1);
    let (_, reply) = rustls_round_trip(addr, &second.ca, &[], b"new");
    assert_eq!(reply, b"echo:new");
    // The open connection keeps working with the first certificate's session.
    old.write_all(b"two").unwrap();
    old.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"echo:two");
    // A broken file: reload fails, says why, and the second certificate stays.
    std::fs::write(&key, "not a key").unwrap();
    let err = config.reload().unwrap_err().to_string();
    assert!(err.contains("private key"), "{err}");
    assert_eq!(config.generation(), 1);
    let (_, reply) = rustls_round_trip(addr, &second.ca, &[], b"still");
    assert_eq!(reply, b"echo:still");
}

#[test]
fn sighup_is_a_reload_request() {
    tls::sighup::install();
    assert!(!tls::sighup::take());
    // SAFETY: raising a signal this process handles.
    unsafe { libc::raise(libc::SIGHUP) };
    assert!(tls::sighup::take(), "the flag is set, the process lives");
    assert!(!tls::sighup::take(), "and taken once");
}

fn offload(sock: &TcpStream, s: &mut ServerSession) {
    use std::os::fd::AsRawFd;
    let before = s.phase();
    match tls::ktls::offload_tx(sock.as_raw_fd(), s) {
        Ok(()) => assert!(matches!(
            tls::ktls::probe(),
            tls::ktls::Availability::Available
        )),
        Err(tls::ktls::KtlsError::Unavailable(_)) => {
            assert!(matches!(
                tls::ktls::probe(),
                tls::ktls::Availability::Unavailable(_)
            ));
            assert_eq!(s.phase(), before, "a refused offload changes nothing");
        }
        Err(e) => panic!("kTLS offload: {e}"),
    }
}

/// Where the kernel has kTLS, the transmit side moves there and the client still reads
/// our data; where it does not (this development machine), the hook says so and the
/// session carries on in user space. Either way the client gets its echo.
#[test]
fn ktls_offload_where_available_else_reported_unavailable() {
    let pki = pki();
    let availability = tls::ktls::probe();
    eprintln!("kTLS on this kernel: {availability:?}");
    let addr = serve(config_for(&pki, &[Alpn::Http11]), offload);
    let (_, reply) = rustls_round_trip(addr, &pki.ca, &[], b"through the hook");
    assert_eq!(reply, b"echo:through the hook");
    assert!(matches!(
        ServerSession::new(config_for(&pki, &[]).current())
            .unwrap()
            .phase(),
        Phase::Handshaking
    ));
}
