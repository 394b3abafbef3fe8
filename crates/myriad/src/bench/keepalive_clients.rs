//! `bench keepalive`'s clients: N sockets in this process, each sending one request
//! and then only reading, watched with one `poll(2)` over all of them. Each is stamped
//! when its answer arrives and when the server closes it.
//!
//! Over TLS (`--tls`) a client is a lean `tls::ClientSession` (the one flood uses:
//! ~4 KB during the handshake, ~230 B after), driven by the same poll: the ClientHello
//! goes out at connect, the request once the handshake finished, and only decrypted
//! bytes count as the answer (the server's session tickets do not).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;
use tls::ClientSession;

/// The one request every client sends.
const REQUEST: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n";

/// One client connection's timeline.
pub struct Client {
    sock: TcpStream,
    /// `Some` over TLS; boxed so a plain client does not carry the session's room.
    tls: Option<Box<ClientSession>>,
    pub answered: Option<Instant>,
    pub closed: Option<Instant>,
}

/// How clients connect: plain, or TLS trusting the run's certificate.
pub struct Dial {
    addr: SocketAddr,
    tls: Option<Arc<tls::rustls::ClientConfig>>,
}

impl Dial {
    /// `ca`: the certificate file to trust when the server speaks TLS.
    pub fn new(addr: SocketAddr, ca: Option<std::path::PathBuf>) -> anyhow::Result<Dial> {
        let tls = match ca {
            Some(ca) => Some(Arc::new(tls::client_config(
                &tls::Roots::CaFile(ca),
                &[tls::Alpn::Http11],
                true,
            )?)),
            None => None,
        };
        Ok(Dial { addr, tls })
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A connected client that sent its request (plain) or its ClientHello (TLS).
    fn connect(&self) -> anyhow::Result<Client> {
        let mut sock = TcpStream::connect(self.addr)?;
        let tls = match &self.tls {
            None => {
                sock.write_all(REQUEST)?;
                None
            }
            Some(config) => {
                let mut s = ClientSession::new(config.clone(), tls::server_name("localhost")?)?;
                let mut hello = Vec::new();
                s.poll_output(&mut hello)?;
                sock.write_all(&hello)?;
                Some(Box::new(s))
            }
        };
        sock.set_nonblocking(true)?;
        Ok(Client {
            sock,
            tls,
            answered: None,
            closed: None,
        })
    }
}

/// The clients and their poll set.
#[derive(Default)]
pub struct Clients {
    pub clients: Vec<Client>,
    fds: Vec<libc::pollfd>,
    pub open: usize,
    /// Connections reset (or failing TLS) instead of closed.
    pub resets: u64,
    /// Records to send (handshake, request), reused.
    cipher: Vec<u8>,
    /// Decrypted bytes of one read, reused.
    plain: Vec<u8>,
}

impl Clients {
    /// Connects one more client; false if the connect failed.
    pub fn add(&mut self, dial: &Dial) -> bool {
        let Ok(c) = dial.connect() else {
            return false;
        };
        self.fds.push(libc::pollfd {
            fd: c.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        self.clients.push(c);
        self.open += 1;
        true
    }

    /// Whether every client has its answer or is gone.
    pub fn all_answered(&self) -> bool {
        self.clients
            .iter()
            .all(|c| c.answered.is_some() || c.closed.is_some())
    }

    /// One poll(2) over every open client, waiting at most `timeout_ms`; stamps
    /// answers and closes with the time poll returned.
    pub fn pump(&mut self, timeout_ms: i32) {
        let mut buf = [0u8; 4096];
        // SAFETY: fds is a live, correctly sized array of pollfd for the whole call.
        let r = unsafe {
            libc::poll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                timeout_ms,
            )
        };
        if r <= 0 {
            return;
        }
        let now = Instant::now();
        for (pfd, c) in self.fds.iter_mut().zip(self.clients.iter_mut()) {
            if pfd.revents == 0 || c.closed.is_some() {
                continue;
            }
            loop {
                match c.sock.read(&mut buf) {
                    Ok(0) => {
                        c.closed = Some(now);
                        break;
                    }
                    Ok(n) => {
                        let answered = match c.tls.as_mut() {
                            None => true,
                            Some(s) => {
                                match through_tls(
                                    s,
                                    &mut c.sock,
                                    &mut buf[..n],
                                    &mut self.cipher,
                                    &mut self.plain,
                                ) {
                                    Ok(plain) => plain,
                                    Err(()) => {
                                        self.resets += 1;
                                        c.closed = Some(now);
                                        break;
                                    }
                                }
                            }
                        };
                        if answered {
                            c.answered.get_or_insert(now);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        self.resets += 1;
                        c.closed = Some(now);
                        break;
                    }
                }
            }
            if c.closed.is_some() {
                // Negative fds are ignored by poll(2).
                pfd.fd = -1;
                self.open -= 1;
            }
            pfd.revents = 0;
        }
    }
}

/// Ciphertext read from a TLS client's socket: answers the handshake, sends the
/// request once it finished; true if application data (the answer) came out.
fn through_tls(
    s: &mut ClientSession,
    sock: &mut TcpStream,
    input: &mut [u8],
    cipher: &mut Vec<u8>,
    plain: &mut Vec<u8>,
) -> Result<bool, ()> {
    cipher.clear();
    plain.clear();
    let status = s.handle_input(input, cipher, plain).map_err(|_| ())?;
    if status.established {
        s.encrypt(&[REQUEST], cipher).map_err(|_| ())?;
    }
    // A few hundred bytes into an empty socket buffer: a full write or a broken socket.
    if !cipher.is_empty() {
        sock.write_all(cipher).map_err(|_| ())?;
    }
    Ok(!plain.is_empty())
}
