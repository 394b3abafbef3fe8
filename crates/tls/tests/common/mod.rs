//! Shared by the tls tests: a test CA with a leaf for localhost, server configs, and
//! rustls's own buffered client (an implementation independent of our session code)
//! joined to a [`ServerSession`] over memory.

#![allow(dead_code)]

use rustls::pki_types::ServerName;
use std::io::{Read, Write};
use std::sync::Arc;
use tls::{Alpn, ServerOptions, ServerSession, Status, TestCa};

pub struct Pki {
    pub ca: TestCa,
    pub leaf: tls::Generated,
}

pub fn pki() -> Pki {
    let ca = TestCa::new("tls tests CA").unwrap();
    let leaf = ca
        .issue(&["localhost".to_string(), "127.0.0.1".to_string()])
        .unwrap();
    Pki { ca, leaf }
}

pub fn server_config(pki: &Pki, opts: &ServerOptions) -> Arc<rustls::ServerConfig> {
    Arc::new(tls::server_config(&pki.leaf.identity().unwrap(), opts).unwrap())
}

pub fn opts(alpn: &[Alpn]) -> ServerOptions {
    ServerOptions {
        alpn: alpn.to_vec(),
        ..ServerOptions::default()
    }
}

/// A rustls client config trusting the test CA, with ALPN, versions and suites chosen.
pub fn client_config(
    pki: &Pki,
    alpn: &[&[u8]],
    tls12_only: bool,
    suite: Option<rustls::CipherSuite>,
) -> Arc<rustls::ClientConfig> {
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(s) = suite {
        provider.cipher_suites.retain(|c| c.suite() == s);
    }
    let versions: &[&rustls::SupportedProtocolVersion] = if tls12_only {
        &[&rustls::version::TLS12]
    } else {
        rustls::ALL_VERSIONS
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.cert_der()).unwrap();
    let mut c = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    // No ticket store: it would grow with every handshake and blur memory counts.
    c.resumption = rustls::client::Resumption::disabled();
    Arc::new(c)
}

pub fn client(config: Arc<rustls::ClientConfig>) -> rustls::ClientConnection {
    rustls::ClientConnection::new(config, ServerName::try_from("localhost").unwrap()).unwrap()
}

/// Both ends over memory. `split` picks how many bytes each server read gets (so
/// records arrive cut at arbitrary points); the server's plaintext collects in `got`.
pub struct Pair {
    pub client: rustls::ClientConnection,
    pub server: ServerSession,
    pub got: Vec<u8>,
    pub status: Status,
}

impl Pair {
    pub fn new(client: rustls::ClientConnection, server: ServerSession) -> Pair {
        Pair {
            client,
            server,
            got: Vec::new(),
            status: Status::default(),
        }
    }

    /// Client → server: everything the client wants to send, fed in pieces.
    pub fn send_to_server(
        &mut self,
        split: &mut dyn FnMut(usize) -> usize,
    ) -> Result<Vec<u8>, tls::TlsError> {
        let mut wire = Vec::new();
        while self.client.wants_write() {
            self.client.write_tls(&mut wire).unwrap();
        }
        let mut out = Vec::new();
        let mut at = 0;
        while at < wire.len() {
            let n = split(wire.len() - at).clamp(1, wire.len() - at);
            // A fresh copy, like a read into the pump's scratch buffer.
            let mut scratch = wire[at..at + n].to_vec();
            let st = self
                .server
                .handle_input(&mut scratch, &mut out, &mut self.got)?;
            self.status.established |= st.established;
            self.status.peer_closed |= st.peer_closed;
            at += n;
        }
        Ok(out)
    }

    /// Server output → client; returns the client's verdict on it.
    pub fn send_to_client(&mut self, out: &[u8]) -> Result<(), rustls::Error> {
        let mut rd = out;
        while !rd.is_empty() {
            self.client.read_tls(&mut rd).unwrap();
            self.client.process_new_packets()?;
        }
        Ok(())
    }

    /// Run the handshake to the end with whole reads.
    pub fn handshake(&mut self) {
        for _ in 0..10 {
            let out = self.send_to_server(&mut |n| n).unwrap();
            self.send_to_client(&out).unwrap();
            if !self.client.is_handshaking() && !self.client.wants_write() {
                break;
            }
        }
        assert!(
            !self.client.is_handshaking(),
            "client finished its handshake"
        );
        assert!(
            !self.server.is_handshaking(),
            "server finished its handshake"
        );
    }

    /// Plaintext the client has received so far.
    pub fn client_reads(&mut self) -> Vec<u8> {
        let mut v = Vec::new();
        match self.client.reader().read_to_end(&mut v) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("client read: {e}"),
        }
        v
    }

    pub fn client_writes(&mut self, data: &[u8]) {
        self.client.writer().write_all(data).unwrap();
    }
}
