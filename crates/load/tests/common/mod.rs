//! A small push server that is not myriad: std only, written here so the load tools are
//! tested against something generic. It speaks chunked streaming, SSE, WebSocket
//! (server frames unmasked, client frames read and unmasked) and long-poll, records each
//! client's source address, and broadcasts on request.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Stream,
    Sse,
    Ws,
    Poll,
    /// Answers 403 to everything.
    Forbidden,
}

pub struct Server {
    pub addr: SocketAddr,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    pub peers: Arc<Mutex<Vec<IpAddr>>>,
    pub paths: Arc<Mutex<Vec<String>>>,
    /// Long-poll: messages published so far (each poll gets the ones after `since`).
    poll_log: Arc<Mutex<Vec<u64>>>,
    stop: Arc<AtomicBool>,
    pub pongs: Arc<AtomicU64>,
    kind: Kind,
}

/// Read a request head (blocking, bounded); None on EOF or timeout.
fn read_head(s: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut b = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).ok()? == 0 || buf.len() > 8192 {
            return None;
        }
        buf.push(b[0]);
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}

pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

impl Server {
    pub fn start(kind: Kind) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let server = Server {
            addr,
            conns: Arc::default(),
            peers: Arc::default(),
            paths: Arc::default(),
            poll_log: Arc::default(),
            stop: Arc::default(),
            pongs: Arc::default(),
            kind,
        };
        let (conns, peers, paths, log, stop, pongs) = (
            server.conns.clone(),
            server.peers.clone(),
            server.paths.clone(),
            server.poll_log.clone(),
            server.stop.clone(),
            server.pongs.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let (mut s, peer) = match listener.accept() {
                    Ok(x) => x,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    }
                };
                let (conns, peers, paths, log, stop, pongs) = (
                    conns.clone(),
                    peers.clone(),
                    paths.clone(),
                    log.clone(),
                    stop.clone(),
                    pongs.clone(),
                );
                std::thread::spawn(move || {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let Some(head) = read_head(&mut s) else {
                        return;
                    };
                    peers.lock().unwrap().push(peer.ip());
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                    paths.lock().unwrap().push(path.clone());
                    match kind {
                        Kind::Forbidden => {
                            let _ =
                                s.write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
                        }
                        Kind::Stream | Kind::Sse => {
                            let ctype = if kind == Kind::Sse {
                                "text/event-stream"
                            } else {
                                "text/plain"
                            };
                            let welcome = if kind == Kind::Sse {
                                format!(": welcome {path}\n\n")
                            } else {
                                format!("welcome {path}\n")
                            };
                            let _ = write!(
                                s,
                                "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{welcome}\r\n",
                                welcome.len()
                            );
                            conns.lock().unwrap().push(s);
                        }
                        Kind::Ws => {
                            let _ = s.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n\x81\x07welcome");
                            let mut reader = s.try_clone().unwrap();
                            conns.lock().unwrap().push(s);
                            // Read client frames: they must be masked pongs.
                            let mut hdr = [0u8; 6];
                            while reader.read_exact(&mut hdr).is_ok() {
                                let len = (hdr[1] & 0x7f) as usize;
                                let mut payload = vec![0u8; len];
                                if reader.read_exact(&mut payload).is_err() {
                                    break;
                                }
                                let unmasked: Vec<u8> = payload
                                    .iter()
                                    .enumerate()
                                    .map(|(i, b)| b ^ hdr[2 + i % 4])
                                    .collect();
                                if hdr[0] == 0x8A && hdr[1] & 0x80 != 0 && unmasked == b"hb" {
                                    pongs.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        Kind::Poll => {
                            let mut head = Some(head);
                            while let Some(h) = head.take() {
                                let since: u64 = h
                                    .split("since=")
                                    .nth(1)
                                    .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                                    .and_then(|d| d.parse().ok())
                                    .unwrap_or(0);
                                let deadline = Instant::now() + Duration::from_millis(300);
                                let msgs: Vec<(u64, u64)> = loop {
                                    let l = log.lock().unwrap();
                                    let m: Vec<(u64, u64)> = l
                                        .iter()
                                        .enumerate()
                                        .map(|(i, ts)| (i as u64 + 1, *ts))
                                        .filter(|(seq, _)| *seq > since)
                                        .collect();
                                    drop(l);
                                    if !m.is_empty()
                                        || Instant::now() > deadline
                                        || stop.load(Ordering::Relaxed)
                                    {
                                        break m;
                                    }
                                    std::thread::sleep(Duration::from_millis(5));
                                };
                                let items: Vec<String> = msgs
                                    .iter()
                                    .map(|(seq, ts)| {
                                        format!(r#"{{"seq":{seq},"data":"ts={ts} hi"}}"#)
                                    })
                                    .collect();
                                let last = msgs.last().map_or(since, |m| m.0);
                                let body = format!(
                                    r#"{{"messages":[{}],"last":{last},"gap":false}}"#,
                                    items.join(",")
                                );
                                if write!(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).is_err() {
                                    return;
                                }
                                head = read_head(&mut s);
                                if let Some(h) = &head {
                                    paths.lock().unwrap().push(
                                        h.split_whitespace().nth(1).unwrap_or("").to_string(),
                                    );
                                }
                            }
                        }
                    }
                });
            }
        });
        server
    }

    /// Wait until `n` subscribers are held (or panic after 20 s).
    pub fn wait_for(&self, n: usize) {
        let end = Instant::now() + Duration::from_secs(20);
        while self.held() < n {
            assert!(
                Instant::now() < end,
                "server holds {} of {n} connections",
                self.held()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn held(&self) -> usize {
        match self.kind {
            Kind::Poll | Kind::Forbidden => self.peers.lock().unwrap().len(),
            _ => self.conns.lock().unwrap().len(),
        }
    }

    /// Send one message to every held subscriber, stamped with the current time.
    pub fn broadcast(&self, text: &str) {
        let ts = now_us();
        let msg = format!("{text} ts={ts} pad");
        if self.kind == Kind::Poll {
            self.poll_log.lock().unwrap().push(ts);
            return;
        }
        for s in self.conns.lock().unwrap().iter_mut() {
            let _ = match self.kind {
                Kind::Sse => {
                    let ev = format!("id: 1\ndata: {msg}\n\n");
                    write!(s, "{:x}\r\n{ev}\r\n", ev.len())
                }
                Kind::Ws => {
                    let mut f = vec![0x81, msg.len() as u8];
                    f.extend_from_slice(msg.as_bytes());
                    s.write_all(&f)
                }
                _ => write!(s, "{:x}\r\n{msg}\r\n", msg.len()),
            };
        }
    }

    /// Heartbeats: an empty-ish chunk, an SSE comment, or a WebSocket ping "hb".
    pub fn heartbeat(&self) {
        for s in self.conns.lock().unwrap().iter_mut() {
            let _ = match self.kind {
                Kind::Sse => s.write_all(b"5\r\n: hb\n\r\n"),
                Kind::Ws => s.write_all(&[0x89, 2, b'h', b'b']),
                _ => s.write_all(b"1\r\n\n\r\n"),
            };
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.conns.lock().unwrap().clear();
    }
}
