//! A loop's listening socket, one of the port's SO_REUSEPORT group: binding it,
//! accepting, leaving the group (a closed listener is the only kind the kernel stops
//! hashing clients to) and rejoining it on the same address, with the few facts
//! about accepting the loop keeps (paused by EMFILE, TCP_NODELAY inherited, accepts
//! since the last heap trim). Who is admitted, and when to leave or rejoin, is
//! `accept`'s.

use super::LISTENER;
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry};
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::SocketAddr;

/// Connections accepted (or TLS handshakes finished) between two heap trims.
pub(super) const TRIM_EVERY: u32 = 1024;

/// Accept backlog per listener; the kernel caps it at net.core.somaxconn.
const BACKLOG: i32 = 65_535;

pub(super) struct Listener {
    /// `None` while this process has left the listening group (see `accept`).
    socket: Option<TcpListener>,
    /// The address the listener is bound to, to rejoin the group.
    addr: SocketAddr,
    /// Connections accepted since the heap was last trimmed (see `accept`).
    accepted: u32,
    /// Accepting paused by EMFILE/ENFILE; retried on every tick.
    paused: bool,
    /// Accepted sockets arrive with TCP_NODELAY already set (inherited from the
    /// listener).
    nodelay_inherited: bool,
}

impl Listener {
    /// Registers `socket` (bound by [`bind_reuseport`]) for accepts in `registry`.
    pub(super) fn new(registry: &Registry, mut socket: TcpListener) -> io::Result<Listener> {
        registry.register(&mut socket, LISTENER, Interest::READABLE)?;
        Ok(Listener {
            addr: socket.local_addr()?,
            socket: Some(socket),
            accepted: 0,
            paused: false,
            nodelay_inherited: false,
        })
    }

    /// In the port's group (not left it).
    pub(super) fn is_listening(&self) -> bool {
        self.socket.is_some()
    }

    /// Accepts one connection; `None` while out of the group.
    pub(super) fn accept(&self) -> Option<io::Result<(TcpStream, SocketAddr)>> {
        Some(self.socket.as_ref()?.accept())
    }

    /// Out of descriptors: accepts wait for the next tick (edge-triggered: no new
    /// event would come for what is left in the backlog).
    pub(super) fn pause(&mut self) {
        self.paused = true;
    }

    /// Whether accepts were paused; they are not any more.
    pub(super) fn take_paused(&mut self) -> bool {
        std::mem::take(&mut self.paused)
    }

    /// Leaves the port's group: the socket is closed, so SO_REUSEPORT stops hashing
    /// clients to it. False if it had left already.
    pub(super) fn leave(&mut self, registry: &Registry) -> bool {
        let Some(mut socket) = self.socket.take() else {
            return false;
        };
        let _ = registry.deregister(&mut socket);
        true
    }

    /// A new socket on the group's address, to rejoin it with [`Listener::join`].
    pub(super) fn rebind(&self, nodelay: bool) -> io::Result<TcpListener> {
        bind_reuseport(self.addr, nodelay)
    }

    /// Listens on `socket` (from [`Listener::rebind`]) again.
    pub(super) fn join(&mut self, registry: &Registry, mut socket: TcpListener) -> io::Result<()> {
        registry.register(&mut socket, LISTENER, Interest::READABLE)?;
        self.socket = Some(socket);
        Ok(())
    }

    /// Sets TCP_NODELAY on an accepted socket, unless sockets are seen to inherit it
    /// from the listener (Linux copies it; checked on the first accept, so the
    /// storm path saves a setsockopt each).
    pub(super) fn set_nodelay(&mut self, stream: &TcpStream) {
        if self.nodelay_inherited {
            return;
        }
        if stream.nodelay().unwrap_or(false) {
            self.nodelay_inherited = true;
        } else {
            let _ = stream.set_nodelay(true);
        }
    }

    /// One more connection admitted.
    pub(super) fn count_accept(&mut self) {
        self.accepted = self.accepted.saturating_add(1);
    }

    /// True once [`TRIM_EVERY`] connections were admitted since it last said so.
    pub(super) fn trim_due(&mut self) -> bool {
        if self.accepted < TRIM_EVERY {
            return false;
        }
        self.accepted = 0;
        true
    }
}

/// A non-blocking listener sharing `addr` with the other loops (SO_REUSEPORT). With
/// `nodelay`, TCP_NODELAY is set on the listener so accepted sockets inherit it.
pub(crate) fn bind_reuseport(addr: SocketAddr, nodelay: bool) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    if nodelay {
        socket.set_nodelay(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(TcpListener::from_std(socket.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept_one(accept: impl Fn() -> io::Result<(TcpStream, SocketAddr)>) -> TcpStream {
        loop {
            match accept() {
                Ok((stream, _)) => return stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("accept: {e}"),
            }
        }
    }

    /// The accept path relies on Linux copying TCP_NODELAY from the listener; if a kernel
    /// does not, the loop sets it per socket (checked once), but we want to know.
    #[test]
    fn accepted_sockets_inherit_nodelay_from_the_listener() {
        let listener = bind_reuseport("127.0.0.1:0".parse().unwrap(), true).unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = std::net::TcpStream::connect(addr).unwrap();
        let accepted = accept_one(|| listener.accept());
        assert!(accepted.nodelay().unwrap());
    }

    /// Leaving closes the socket (a client is refused: the group is empty), once;
    /// rejoining listens on the same address again.
    #[test]
    fn a_listener_leaves_the_group_and_rejoins_it_on_its_address() {
        let poll = mio::Poll::new().unwrap();
        let socket = bind_reuseport("127.0.0.1:0".parse().unwrap(), false).unwrap();
        let mut listener = Listener::new(poll.registry(), socket).unwrap();
        let addr = listener.addr;
        assert!(listener.is_listening());
        assert!(listener.leave(poll.registry()));
        assert!(!listener.leave(poll.registry()), "left already");
        assert!(!listener.is_listening());
        assert!(listener.accept().is_none());
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "no listener left"
        );
        let socket = listener.rebind(false).unwrap();
        listener.join(poll.registry(), socket).unwrap();
        assert!(listener.is_listening());
        let _client = std::net::TcpStream::connect(addr).unwrap();
        accept_one(|| listener.accept().expect("listening"));
    }

    /// A pause lasts until taken; the heap trim comes every [`TRIM_EVERY`] accepts.
    #[test]
    fn pauses_and_trims_are_told_once() {
        let poll = mio::Poll::new().unwrap();
        let socket = bind_reuseport("127.0.0.1:0".parse().unwrap(), false).unwrap();
        let mut listener = Listener::new(poll.registry(), socket).unwrap();
        assert!(!listener.take_paused());
        listener.pause();
        assert!(listener.take_paused());
        assert!(!listener.take_paused());
        for _ in 1..TRIM_EVERY {
            listener.count_accept();
        }
        assert!(!listener.trim_due());
        listener.count_accept();
        assert!(listener.trim_due());
        assert!(!listener.trim_due());
    }
}
