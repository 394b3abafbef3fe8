//! What flood writes: a non-blocking socket with its connect started (bound to a source
//! address), the HTTP/1.1 request head per transport, WebSocket client frames, and the
//! one write path that encrypts first when the connection is TLS.

use super::resume::Since;
use super::scan::Transport;
use super::target::ip;
use socket2::{Domain, Socket, Type};
use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use tls::ClientSession;

/// `IP_BIND_ADDRESS_NO_PORT` (linux/in.h): choose the port at connect time, so each
/// source address gets a full port range per destination rather than one overall.
const IP_BIND_ADDRESS_NO_PORT: libc::c_int = 24;

/// A non-blocking socket bound to `source` (if any), with its connect started.
pub fn open_socket(addr: SocketAddr, source: Option<Ipv4Addr>) -> io::Result<TcpStream> {
    let sock = Socket::new(Domain::IPV4, Type::STREAM.nonblocking().cloexec(), None)?;
    sock.set_nodelay(true)?;
    if let Some(src) = source {
        let one: libc::c_int = 1;
        // SAFETY: setsockopt reads an int we own; an unknown option only returns an error.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_IP,
                IP_BIND_ADDRESS_NO_PORT,
                &one as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        sock.bind(&SocketAddr::new(ip(src), 0).into())?;
    }
    match sock.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(sock.into())
}

/// The request head for one connection to `host`, its path written by `path`;
/// `since` resumes (SSE: `Last-Event-ID`, the others `?since=`).
pub fn build_request(
    out: &mut Vec<u8>,
    t: Transport,
    host: &str,
    path: impl FnOnce(&mut Vec<u8>),
    since: Option<Since>,
    headers: &[String],
) {
    out.clear();
    out.extend_from_slice(b"GET ");
    path(out);
    match since {
        Some(since) if t != Transport::Sse => {
            let sep = if out.contains(&b'?') { '&' } else { '?' };
            out.extend_from_slice(format!("{sep}since={since}").as_bytes());
        }
        _ => {}
    }
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\nUser-Agent: myriad-flood\r\n");
    out.extend_from_slice(match t {
        Transport::Stream => b"Accept: */*\r\n".as_slice(),
        Transport::Sse => b"Accept: text/event-stream\r\nCache-Control: no-cache\r\n",
        Transport::Ws | Transport::Socketio | Transport::Pusher => {
            b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        }
        Transport::Poll => b"Accept: application/json\r\nConnection: keep-alive\r\n",
    });
    if let (Some(since), Transport::Sse) = (since, t) {
        out.extend_from_slice(format!("Last-Event-ID: {since}\r\n").as_bytes());
    }
    for h in headers {
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// A masked client frame (RFC 6455 §5.3: clients always mask), from wire's encoder.
pub fn ws_frame(opcode: wire::Opcode, payload: &[u8], key: u32) -> Vec<u8> {
    wire::ws_client_frame(opcode, true, key.to_be_bytes(), payload)
}

/// Write `data` in one call, encrypted first on a TLS connection (`buf` is the shared
/// ciphertext buffer). Every write of flood fits an almost empty socket buffer (request
/// heads, pongs, a close frame), so a short write is an error, not a queue.
pub fn send(
    mut sock: &TcpStream,
    tls: Option<&mut ClientSession>,
    data: &[u8],
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    let bytes = match tls {
        Some(t) => {
            buf.clear();
            t.encrypt(&[data], buf)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            &buf[..]
        }
        None => data,
    };
    write_once(&mut sock, bytes)
}

/// One write that must take everything.
pub fn write_once(sock: &mut &TcpStream, bytes: &[u8]) -> io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    let n = sock.write(bytes)?;
    if n != bytes.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "request did not fit the socket buffer",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flood::target::Target;

    #[test]
    fn requests_per_transport() {
        let t = Target::parse("http://127.0.0.1:1/poll/%d").unwrap();
        let path = |o: &mut Vec<u8>| t.path(9, o, &mut |_| {});
        let mut out = Vec::new();
        let at = |epoch, seq| Some(Since { epoch, seq });
        build_request(
            &mut out,
            Transport::Poll,
            &t.host,
            path,
            at(None, 4),
            &["X-A: b".into()],
        );
        let s = String::from_utf8(out.clone()).unwrap();
        assert!(
            s.starts_with("GET /poll/9?since=4 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n"),
            "{s}"
        );
        assert!(s.ends_with("X-A: b\r\n\r\n"));
        build_request(&mut out, Transport::Ws, &t.host, path, None, &[]);
        let s = String::from_utf8(out.clone()).unwrap();
        assert!(s.contains("Upgrade: websocket") && s.starts_with("GET /poll/9 "));
        // Resuming: SSE by header, the others by query.
        build_request(&mut out, Transport::Sse, &t.host, path, at(Some(3), 7), &[]);
        let s = String::from_utf8(out.clone()).unwrap();
        assert!(s.starts_with("GET /poll/9 HTTP") && s.contains("\r\nLast-Event-ID: 3-7\r\n"));
        build_request(
            &mut out,
            Transport::Stream,
            &t.host,
            path,
            at(Some(3), 7),
            &[],
        );
        assert!(String::from_utf8(out)
            .unwrap()
            .starts_with("GET /poll/9?since=3-7 "));
    }

    #[test]
    fn client_frames_are_masked() {
        let f = ws_frame(wire::Opcode::Pong, b"abc", 0x01020304);
        assert_eq!(&f[..2], &[0x8A, 0x83]);
        let unmasked: Vec<u8> = f[6..]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ f[2 + i % 4])
            .collect();
        assert_eq!(unmasked, b"abc");
    }
}
