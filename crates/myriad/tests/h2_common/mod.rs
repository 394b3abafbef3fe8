//! HTTP/2 clients for the h2 tests: the `h2` crate (a real, independent HTTP/2 stack)
//! over tokio-rustls with ALPN `h2`, and a raw frame client over rustls for what a
//! well-behaved client never sends (malformed frames, streams beyond the limit).
#![allow(dead_code)] // each h2 test file uses a different part of the harness

use crate::common::Server;
use bytes::Bytes;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tls::rustls::{ClientConnection, StreamOwned};

pub const TIMEOUT: Duration = Duration::from_secs(10);

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn client_config(ca_file: &Path) -> Arc<tls::rustls::ClientConfig> {
    let roots = tls::Roots::CaFile(ca_file.to_path_buf());
    Arc::new(tls::client_config(&roots, &[tls::Alpn::H2], false).unwrap())
}

/// An `h2` crate client connection; its connection task runs on the current runtime.
/// `conn_window`: the client's connection-level receive window.
pub async fn h2_connect(
    server: &Server,
    ca_file: &Path,
    conn_window: u32,
) -> h2::client::SendRequest<Bytes> {
    h2_connect_to(server.addr, ca_file, conn_window).await
}

/// [`h2_connect`] by address (from a thread that does not hold the `Server`).
pub async fn h2_connect_to(
    addr: std::net::SocketAddr,
    ca_file: &Path,
    conn_window: u32,
) -> h2::client::SendRequest<Bytes> {
    let connector = tokio_rustls::TlsConnector::from(client_config(ca_file));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = tls::server_name("localhost").unwrap();
    let stream = connector.connect(name, tcp).await.expect("tls handshake");
    assert_eq!(
        stream.get_ref().1.alpn_protocol(),
        Some(&b"h2"[..]),
        "ALPN h2"
    );
    let (client, conn) = h2::client::Builder::new()
        .initial_connection_window_size(conn_window)
        .handshake(stream)
        .await
        .expect("h2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// Sends a request (`body` empty: END_STREAM on the headers) and waits for its head.
pub async fn h2_request(
    client: &h2::client::SendRequest<Bytes>,
    method: &str,
    path: &str,
    accept: Option<&str>,
    body: &[u8],
) -> Result<http::Response<h2::RecvStream>, h2::Error> {
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"));
    if let Some(accept) = accept {
        req = req.header("accept", accept);
    }
    let req = req.body(()).unwrap();
    let mut client = client.clone().ready().await?;
    let (response, mut send) = client.send_request(req, body.is_empty())?;
    if !body.is_empty() {
        send.send_data(Bytes::copy_from_slice(body), true)?;
    }
    tokio::time::timeout(TIMEOUT, response)
        .await
        .expect("response head in time")
}

/// Reads `body` until its text contains `needle` (returning credit as it reads).
pub async fn body_until(body: &mut h2::RecvStream, text: &mut String, needle: &str) {
    while !text.contains(needle) {
        let chunk = tokio::time::timeout(TIMEOUT, body.data())
            .await
            .unwrap_or_else(|_| panic!("no {needle:?} in time; got {text:?}"))
            .unwrap_or_else(|| panic!("stream ended before {needle:?}; got {text:?}"))
            .unwrap_or_else(|e| panic!("stream failed before {needle:?} ({e}); got {text:?}"));
        let _ = body.flow_control().release_capacity(chunk.len());
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// A whole response body (the stream must end).
pub async fn read_to_end(body: &mut h2::RecvStream) -> String {
    let mut text = String::new();
    loop {
        let next = tokio::time::timeout(TIMEOUT, body.data())
            .await
            .expect("body in time");
        match next {
            None => return text,
            Some(chunk) => {
                let chunk = chunk.expect("body data");
                let _ = body.flow_control().release_capacity(chunk.len());
                text.push_str(&String::from_utf8_lossy(&chunk));
            }
        }
    }
}

/// A raw HTTP/2 client over a blocking rustls connection: frames in and out by hand.
pub struct RawH2 {
    pub tls: StreamOwned<ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

/// One frame as read: type, flags, stream, payload.
#[derive(Debug)]
pub struct RawFrame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_be_bytes();
    let mut out = vec![len[1], len[2], len[3], kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An HPACK block for `GET path` (static-table method and scheme, literals without
/// indexing for the rest: no dynamic table involved).
pub fn get_block(path: &str, accept: &str) -> Vec<u8> {
    let mut b = vec![0x82, 0x87]; // :method GET, :scheme https
    let mut literal = |name: &str, value: &str| {
        b.push(0x00);
        b.push(name.len() as u8);
        b.extend_from_slice(name.as_bytes());
        b.push(value.len() as u8);
        b.extend_from_slice(value.as_bytes());
    };
    literal(":path", path);
    literal(":authority", "localhost");
    literal("accept", accept);
    b
}

/// An HPACK block for `method path` plus `extra` headers, all literals without
/// indexing except `:method GET` / `:method POST` and `:scheme https`.
pub fn request_block(method: &str, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut b = match method {
        "GET" => vec![0x82],
        "POST" => vec![0x83],
        other => literal(":method", other),
    };
    b.push(0x87);
    b.extend(literal(":path", path));
    b.extend(literal(":authority", "localhost"));
    for (name, value) in extra {
        b.extend(literal(name, value));
    }
    b
}

/// One header field as a literal without indexing, new name (names and values
/// shorter than 127 bytes).
pub fn literal(name: &str, value: &str) -> Vec<u8> {
    let mut b = vec![0x00, name.len() as u8];
    b.extend_from_slice(name.as_bytes());
    b.push(value.len() as u8);
    b.extend_from_slice(value.as_bytes());
    b
}

impl RawH2 {
    /// TLS with ALPN h2 only; nothing sent yet.
    pub fn connect(server: &Server, ca_file: &Path) -> RawH2 {
        let tcp = TcpStream::connect(server.addr).unwrap();
        tcp.set_read_timeout(Some(TIMEOUT)).unwrap();
        let name = tls::server_name("localhost").unwrap();
        let conn = ClientConnection::new(client_config(ca_file), name).unwrap();
        let mut tls = StreamOwned::new(conn, tcp);
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock).unwrap();
        }
        assert_eq!(tls.conn.alpn_protocol(), Some(&b"h2"[..]));
        RawH2 {
            tls,
            buf: Vec::new(),
        }
    }

    /// Preface and an empty SETTINGS (plus `settings` entries).
    pub fn start(server: &Server, ca_file: &Path, settings: &[(u16, u32)]) -> RawH2 {
        let mut raw = RawH2::connect(server, ca_file);
        let mut payload = Vec::new();
        for (id, value) in settings {
            payload.extend_from_slice(&id.to_be_bytes());
            payload.extend_from_slice(&value.to_be_bytes());
        }
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend(frame(4, 0, 0, &payload));
        raw.send(&hello);
        raw
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.tls.write_all(bytes).unwrap();
        self.tls.flush().unwrap();
    }

    /// The next frame; `None` at EOF.
    pub fn read_frame(&mut self) -> Option<RawFrame> {
        loop {
            if self.buf.len() >= 9 {
                let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
                if self.buf.len() >= 9 + len {
                    let f = RawFrame {
                        kind: self.buf[3],
                        flags: self.buf[4],
                        stream: u32::from_be_bytes([
                            self.buf[5],
                            self.buf[6],
                            self.buf[7],
                            self.buf[8],
                        ]) & 0x7fff_ffff,
                        payload: self.buf[9..9 + len].to_vec(),
                    };
                    self.buf.drain(..9 + len);
                    return Some(f);
                }
            }
            let mut chunk = [0u8; 16384];
            match self.tls.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }

    /// Frames until one matches `pred` (panics at EOF).
    pub fn until(&mut self, what: &str, pred: impl Fn(&RawFrame) -> bool) -> RawFrame {
        loop {
            let f = self
                .read_frame()
                .unwrap_or_else(|| panic!("connection ended before {what}"));
            if pred(&f) {
                return f;
            }
        }
    }

    /// Reads until GOAWAY: its error code.
    pub fn goaway_code(&mut self) -> u32 {
        let f = self.until("GOAWAY", |f| f.kind == 7);
        u32::from_be_bytes([f.payload[4], f.payload[5], f.payload[6], f.payload[7]])
    }

    /// A PING and its ACK: the connection is alive and everything sent before the
    /// PING was read. Returns the frames that came before the ACK (panics on GOAWAY).
    pub fn ping(&mut self, data: [u8; 8]) -> Vec<RawFrame> {
        self.send(&frame(6, 0, 0, &data));
        let mut before = Vec::new();
        loop {
            let f = self
                .read_frame()
                .unwrap_or_else(|| panic!("connection ended before the PING ACK; got {before:?}"));
            assert_ne!(f.kind, 7, "GOAWAY before the PING ACK: {f:?}");
            if f.kind == 6 && f.flags & 1 == 1 && f.payload == data {
                return before;
            }
            before.push(f);
        }
    }

    /// Reads until the peer closes; the frames read.
    pub fn until_eof(&mut self) -> Vec<RawFrame> {
        let mut all = Vec::new();
        while let Some(f) = self.read_frame() {
            all.push(f);
        }
        all
    }
}
