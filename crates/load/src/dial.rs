//! A blocking client connection to a server's HTTP API, plain (`http://`) or TLS
//! (`https://`, rustls's buffered client over a `TcpStream`): what msggen's
//! publishers and the bench's API calls use. Few connections, so rustls's own buffers
//! are fine here (flood, with thousands, uses the lean `tls` sessions instead).

use anyhow::{bail, Context};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tls::rustls::{ClientConfig, ClientConnection, StreamOwned};

/// Where and how to connect: the address, the Host header, and TLS if `https://`.
#[derive(Clone)]
pub struct Dialer {
    pub addr: SocketAddr,
    /// `host[:port]` as in the URL (the Host header).
    pub host: String,
    tls: Option<(
        Arc<ClientConfig>,
        tls::rustls::pki_types::ServerName<'static>,
    )>,
}

/// Whom an `https://` client trusts: a CA file, nobody checked, or the system bundle.
pub fn roots(ca: &Option<PathBuf>, insecure: bool) -> anyhow::Result<tls::Roots> {
    Ok(match (ca, insecure) {
        (Some(_), true) => bail!("give --ca or --insecure, not both"),
        (Some(f), false) => tls::Roots::CaFile(f.clone()),
        (None, true) => tls::Roots::Insecure,
        (None, false) => tls::Roots::System,
    })
}

impl Dialer {
    /// From a base URL `http://host[:port]` or `https://host[:port]` (a path is ignored).
    pub fn new(url: &str, roots: &tls::Roots) -> anyhow::Result<Dialer> {
        Dialer::with_alpn(url, roots, &[tls::Alpn::Http11])
    }

    /// [`Dialer::new`] offering `alpn` on TLS (`bench abuse`'s HTTP/2 cases ask for h2).
    pub fn with_alpn(url: &str, roots: &tls::Roots, alpn: &[tls::Alpn]) -> anyhow::Result<Dialer> {
        let (secure, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else {
            bail!("bad URL {url:?}: expected http://host:port or https://host:port");
        };
        let host = rest.split('/').next().unwrap_or(rest).to_string();
        let (name, with_port) = match host.rsplit_once(':') {
            Some((name, _)) => (name.to_string(), host.clone()),
            None => (
                host.clone(),
                format!("{host}:{}", if secure { 443 } else { 80 }),
            ),
        };
        let addr = with_port
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {host}"))?
            .find(|a| a.is_ipv4())
            .with_context(|| format!("no IPv4 address for {host}"))?;
        let tls = if secure {
            let config = tls::client_config(roots, alpn, false).context("TLS client setup")?;
            Some((Arc::new(config), tls::server_name(&name)?))
        } else {
            None
        };
        Ok(Dialer { addr, host, tls })
    }

    /// A connected stream with `timeout` on connect, reads and writes; a TLS stream has
    /// finished its handshake.
    pub fn connect(&self, timeout: Duration) -> anyhow::Result<Conn> {
        let s = TcpStream::connect_timeout(&self.addr, timeout).context("connect")?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        let Some((config, name)) = &self.tls else {
            return Ok(Conn::Plain(s));
        };
        let conn = ClientConnection::new(config.clone(), name.clone())?;
        let mut stream = StreamOwned::new(conn, s);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .context("TLS handshake")?;
        }
        Ok(Conn::Tls(Box::new(stream)))
    }
}

/// One API connection.
pub enum Conn {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_address_host_and_default_ports() {
        let d = Dialer::new("http://127.0.0.1:8000", &tls::Roots::System).unwrap();
        assert_eq!((d.addr.port(), d.host.as_str()), (8000, "127.0.0.1:8000"));
        assert!(d.tls.is_none());
        let d = Dialer::new("https://127.0.0.1/x", &tls::Roots::Insecure).unwrap();
        assert_eq!(d.addr.port(), 443);
        assert!(d.tls.is_some());
        assert!(Dialer::new("ftp://x", &tls::Roots::System).is_err());
    }
}
