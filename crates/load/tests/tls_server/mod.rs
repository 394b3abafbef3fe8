//! A small TLS push server that is not myriad, for flood's `https://`, `wss://` and
//! `--h2` tests: tokio, tokio-rustls (rustls's buffered API, not the `tls` crate's
//! sessions) and the `h2` crate's server. One server answers every transport, chosen by
//! the request as myriad does: `/ws/` with an upgrade → WebSocket, `/poll/` →
//! long-poll, `Accept: text/event-stream` → SSE, anything else → chunked stream.
//! Over HTTP/2 (ALPN `h2`, or prior knowledge on a plain listener) the same answers go
//! as DATA frames. It counts subscriptions, TCP connections and WebSocket pongs, and
//! broadcasts stamped messages on request.

#![allow(dead_code)]

use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::broadcast;

#[derive(Default)]
pub struct Counters {
    /// Subscriptions started (stream, SSE, WebSocket) plus long-polls answered; never
    /// decremented, so each test case starts its own server.
    pub subs: AtomicUsize,
    /// TCP connections accepted.
    pub tcp: AtomicUsize,
    /// HTTP/2 connections past their handshake, and streams opened on them.
    pub h2_conns: AtomicUsize,
    pub h2_streams: AtomicUsize,
    pub pongs: AtomicUsize,
}

pub struct TlsServer {
    pub addr: SocketAddr,
    pub counters: Arc<Counters>,
    tx: broadcast::Sender<Msg>,
    poll_log: Arc<Mutex<Vec<u64>>>,
    stop: Arc<AtomicBool>,
}

#[derive(Clone, Debug)]
enum Msg {
    Text(String),
    Ping,
}

pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

impl TlsServer {
    /// `tls`: serve TLS with this config (offering `h2` and `http/1.1` by ALPN), or
    /// plain TCP with HTTP/2 prior knowledge when `None`.
    pub fn start(tls: Option<Arc<tls::rustls::ServerConfig>>) -> TlsServer {
        Self::start_with(tls, false)
    }

    /// Plain TCP, HTTP/1.1 (a baseline for measurements).
    pub fn start_plain_h1() -> TlsServer {
        Self::start_with(None, true)
    }

    fn start_with(tls: Option<Arc<tls::rustls::ServerConfig>>, plain_h1: bool) -> TlsServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, _) = broadcast::channel(1024);
        let server = TlsServer {
            addr,
            counters: Arc::default(),
            tx: tx.clone(),
            poll_log: Arc::default(),
            stop: Arc::default(),
        };
        let ctx = Ctx {
            counters: server.counters.clone(),
            tx,
            poll_log: server.poll_log.clone(),
        };
        let stop = server.stop.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
                while !stop.load(Ordering::Relaxed) {
                    let accepted =
                        tokio::time::timeout(Duration::from_millis(100), listener.accept()).await;
                    let Ok(Ok((sock, _))) = accepted else {
                        continue;
                    };
                    ctx.counters.tcp.fetch_add(1, Ordering::Relaxed);
                    let (ctx, acceptor) = (ctx.clone(), acceptor.clone());
                    tokio::spawn(async move {
                        match acceptor {
                            Some(a) => {
                                let Ok(tls) = a.accept(sock).await else {
                                    return;
                                };
                                let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                                if h2 {
                                    ctx.serve_h2(tls).await;
                                } else {
                                    ctx.serve_h1(tls).await;
                                }
                            }
                            None if plain_h1 => ctx.serve_h1(sock).await,
                            None => ctx.serve_h2(sock).await,
                        }
                    });
                }
            });
        });
        server
    }

    pub fn wait_for(&self, n: usize) {
        let end = Instant::now() + Duration::from_secs(20);
        while self.counters.subs.load(Ordering::Relaxed) < n {
            assert!(
                Instant::now() < end,
                "server holds {} of {n} subscriptions",
                self.counters.subs.load(Ordering::Relaxed)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// One stamped message to every subscriber (and to the long-poll log).
    pub fn broadcast(&self, text: &str) {
        let ts = now_us();
        self.poll_log.lock().unwrap().push(ts);
        let _ = self.tx.send(Msg::Text(format!("{text} ts={ts} pad")));
    }

    /// A WebSocket ping "hb" to every WebSocket subscriber.
    pub fn ping(&self) {
        let _ = self.tx.send(Msg::Ping);
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[derive(Clone)]
struct Ctx {
    counters: Arc<Counters>,
    tx: broadcast::Sender<Msg>,
    poll_log: Arc<Mutex<Vec<u64>>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Stream,
    Sse,
    Ws,
    Poll,
}

fn kind(path: &str, accept_sse: bool, upgrade: bool) -> Kind {
    if path.starts_with("/ws/") && upgrade {
        Kind::Ws
    } else if path.starts_with("/poll/") {
        Kind::Poll
    } else if accept_sse {
        Kind::Sse
    } else {
        Kind::Stream
    }
}

fn since_of(path: &str) -> u64 {
    path.split("since=")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|d| d.parse().ok())
        .unwrap_or(0)
}

/// The body for one message in a transport (unframed: HTTP/1.1 adds chunking).
fn event(kind: Kind, msg: &str) -> String {
    match kind {
        Kind::Sse => format!("id: 1\ndata: {msg}\n\n"),
        _ => format!("{msg}\n"),
    }
}

fn welcome(kind: Kind) -> &'static str {
    if kind == Kind::Sse {
        ": welcome\n\n"
    } else {
        "welcome\n"
    }
}

impl Ctx {
    /// Long-poll: the messages after `since`, waiting up to 300 ms for one.
    async fn poll_body(&self, since: u64) -> String {
        let deadline = Instant::now() + Duration::from_millis(300);
        let msgs: Vec<(u64, u64)> = loop {
            let m: Vec<(u64, u64)> = self
                .poll_log
                .lock()
                .unwrap()
                .iter()
                .enumerate()
                .map(|(i, ts)| (i as u64 + 1, *ts))
                .filter(|(seq, _)| *seq > since)
                .collect();
            if !m.is_empty() || Instant::now() > deadline {
                break m;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let items: Vec<String> = msgs
            .iter()
            .map(|(seq, ts)| format!(r#"{{"seq":{seq},"data":"ts={ts} hi"}}"#))
            .collect();
        let last = msgs.last().map_or(since, |m| m.0);
        format!(
            r#"{{"messages":[{}],"last":{last},"gap":false}}"#,
            items.join(",")
        )
    }

    async fn serve_h1<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(&self, mut s: S) {
        loop {
            let Some(head) = read_head(&mut s).await else {
                return;
            };
            let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
            let lower = head.to_ascii_lowercase();
            let k = kind(
                &path,
                lower.contains("accept: text/event-stream"),
                lower.contains("upgrade: websocket"),
            );
            match k {
                Kind::Poll => {
                    let body = self.poll_body(since_of(&path)).await;
                    self.counters.subs.fetch_add(1, Ordering::Relaxed);
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if s.write_all(resp.as_bytes()).await.is_err() || s.flush().await.is_err() {
                        return;
                    }
                }
                Kind::Ws => return self.serve_ws(s).await,
                Kind::Stream | Kind::Sse => return self.serve_chunked(s, k).await,
            }
        }
    }

    async fn serve_chunked<S: AsyncRead + AsyncWrite + Unpin>(&self, mut s: S, k: Kind) {
        let ctype = if k == Kind::Sse {
            "text/event-stream"
        } else {
            "text/plain"
        };
        let w = welcome(k);
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{w}\r\n",
            w.len()
        );
        let mut rx = self.tx.subscribe();
        if s.write_all(head.as_bytes()).await.is_err() || s.flush().await.is_err() {
            return;
        }
        self.counters.subs.fetch_add(1, Ordering::Relaxed);
        while let Ok(m) = rx.recv().await {
            if let Msg::Text(t) = m {
                let ev = event(k, &t);
                let chunk = format!("{:x}\r\n{ev}\r\n", ev.len());
                if s.write_all(chunk.as_bytes()).await.is_err() || s.flush().await.is_err() {
                    break;
                }
            }
        }
    }

    async fn serve_ws<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(&self, s: S) {
        let (mut rd, mut wr) = tokio::io::split(s);
        let mut rx = self.tx.subscribe();
        if wr
            .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n\x81\x07welcome")
            .await
            .is_err()
            || wr.flush().await.is_err()
        {
            return;
        }
        self.counters.subs.fetch_add(1, Ordering::Relaxed);
        let counters = self.counters.clone();
        // Client frames: they must be masked pongs carrying "hb".
        let reader = tokio::spawn(async move {
            let mut hdr = [0u8; 6];
            while rd.read_exact(&mut hdr).await.is_ok() {
                let mut payload = vec![0u8; (hdr[1] & 0x7f) as usize];
                if rd.read_exact(&mut payload).await.is_err() {
                    break;
                }
                let unmasked: Vec<u8> = payload
                    .iter()
                    .enumerate()
                    .map(|(i, b)| b ^ hdr[2 + i % 4])
                    .collect();
                if hdr[0] == 0x8A && hdr[1] & 0x80 != 0 && unmasked == b"hb" {
                    counters.pongs.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        while let Ok(m) = rx.recv().await {
            let frame = match m {
                Msg::Text(t) => {
                    let mut f = vec![0x81, t.len() as u8];
                    f.extend_from_slice(t.as_bytes());
                    f
                }
                Msg::Ping => vec![0x89, 2, b'h', b'b'],
            };
            if wr.write_all(&frame).await.is_err() || wr.flush().await.is_err() {
                break;
            }
        }
        reader.abort();
    }

    async fn serve_h2<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(&self, s: S) {
        let Ok(mut conn) = h2::server::handshake(s).await else {
            return;
        };
        self.counters.h2_conns.fetch_add(1, Ordering::Relaxed);
        while let Some(Ok((req, mut respond))) = conn.accept().await {
            self.counters.h2_streams.fetch_add(1, Ordering::Relaxed);
            let ctx = self.clone();
            tokio::spawn(async move {
                let path = req
                    .uri()
                    .path_and_query()
                    .map(|p| p.to_string())
                    .unwrap_or_default();
                let sse = req
                    .headers()
                    .get("accept")
                    .is_some_and(|a| a.as_bytes() == b"text/event-stream");
                let k = kind(&path, sse, false);
                let resp = http::Response::builder().status(200).body(()).unwrap();
                if k == Kind::Poll {
                    let body = ctx.poll_body(since_of(&path)).await;
                    ctx.counters.subs.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut send) = respond.send_response(resp, false) {
                        let _ = send.send_data(Bytes::from(body), true);
                    }
                    return;
                }
                let mut rx = ctx.tx.subscribe();
                let Ok(mut send) = respond.send_response(resp, false) else {
                    return;
                };
                if send
                    .send_data(Bytes::from_static(welcome(k).as_bytes()), false)
                    .is_err()
                {
                    return;
                }
                ctx.counters.subs.fetch_add(1, Ordering::Relaxed);
                while let Ok(m) = rx.recv().await {
                    if let Msg::Text(t) = m {
                        if send.send_data(Bytes::from(event(k, &t)), false).is_err() {
                            break;
                        }
                    }
                }
            });
        }
    }
}

async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> Option<String> {
    let mut buf = Vec::new();
    let mut b = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut b))
            .await
            .ok()?
            .ok()?;
        if n == 0 || buf.len() > 8192 {
            return None;
        }
        buf.push(b[0]);
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}
