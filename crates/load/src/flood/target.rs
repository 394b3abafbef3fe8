//! Where flood's connections go and come from: URL templates (`%d` = user id, `%c` =
//! the connection's rooms), the user range, and the source-address range. Pure
//! parsing; no sockets.
//!
//! Connection number `g` (global across child processes) maps deterministically to a
//! target (`g mod targets`), a source address (`g mod sources`, of the child's own block
//! when the parent split them) and a user, so child processes need only their offset
//! to agree with each other.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};

/// Why a flag value was rejected.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("bad URL {0:?}: expected http://host[:port]/path (https://, ws:// and wss:// are accepted too)")]
    Url(String),
    #[error("cannot resolve {0:?} to an IPv4 address")]
    Resolve(String),
    #[error("bad range {0:?}: expected FIRST-LAST")]
    Range(String),
    #[error("bad source {0:?}: expected an IPv4 address or A.B.C.D-A.B.C.E")]
    Source(String),
}

/// A piece of a request path template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Text(String),
    /// `%d`: the connection's user id.
    User,
    /// `%c`: the connection's rooms (`--rooms`), joined by the rooms' separator.
    Rooms,
}

/// One target server: its address and the request path template.
#[derive(Clone, Debug)]
pub struct Target {
    pub addr: SocketAddr,
    /// The `Host` header value.
    pub host: String,
    /// The path, split at `%d` and `%c`.
    pub parts: Vec<Part>,
    /// `https://` or `wss://`: TLS to this target.
    pub tls: bool,
    /// The host without port or brackets: TLS server name (SNI, certificate check).
    pub server_name: String,
}

impl Target {
    /// Parse `http://host[:port]/path` (or `https://`, `ws://`, `wss://`) with an
    /// optional `%d` in the path.
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        let (tls, rest) = [
            ("http://", false),
            ("ws://", false),
            ("https://", true),
            ("wss://", true),
        ]
        .iter()
        .find_map(|(scheme, tls)| url.strip_prefix(scheme).map(|r| (*tls, r)))
        .ok_or_else(|| TargetError::Url(url.to_string()))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return Err(TargetError::Url(url.to_string()));
        }
        // `[v6]:port`, `[v6]`, `host:port`, `host`.
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => {
                let (h, after) = v6
                    .split_once(']')
                    .ok_or_else(|| TargetError::Url(url.to_string()))?;
                (h, after.strip_prefix(':'))
            }
            None => match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            },
        };
        let port = port.unwrap_or(if tls { "443" } else { "80" });
        let with_port = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|_| TargetError::Resolve(authority.to_string()))?
            .find(|a| a.is_ipv4())
            .ok_or_else(|| TargetError::Resolve(authority.to_string()))?;
        Ok(Target {
            addr,
            host: authority.to_string(),
            parts: parts(path),
            tls,
            server_name: host.to_string(),
        })
    }

    /// Whether the path names the connection's rooms.
    pub fn has_rooms(&self) -> bool {
        self.parts.contains(&Part::Rooms)
    }

    /// The request path of one connection: its user and, for `%c`, its rooms
    /// (`rooms` written by the caller's closure).
    pub fn path(&self, user: u64, out: &mut Vec<u8>, rooms: &mut dyn FnMut(&mut Vec<u8>)) {
        for p in &self.parts {
            match p {
                Part::Text(t) => out.extend_from_slice(t.as_bytes()),
                Part::User => out.extend_from_slice(user.to_string().as_bytes()),
                Part::Rooms => rooms(out),
            }
        }
    }
}

/// A path template split at its `%d` and `%c`.
fn parts(path: &str) -> Vec<Part> {
    let mut out = Vec::new();
    let mut rest = path;
    while let Some(i) = rest.find('%') {
        let part = match rest.get(i + 1..i + 2) {
            Some("d") => Part::User,
            Some("c") => Part::Rooms,
            _ => {
                out.push(Part::Text(rest[..=i].to_string()));
                rest = &rest[i + 1..];
                continue;
            }
        };
        if i > 0 {
            out.push(Part::Text(rest[..i].to_string()));
        }
        out.push(part);
        rest = &rest[i + 2..];
    }
    if !rest.is_empty() {
        out.push(Part::Text(rest.to_string()));
    }
    out
}

/// Parse `FIRST-LAST` (inclusive) or a single number.
pub fn parse_range(s: &str) -> Result<(u64, u64), TargetError> {
    let bad = || TargetError::Range(s.to_string());
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        ),
        None => {
            let v = s.trim().parse().map_err(|_| bad())?;
            (v, v)
        }
    };
    if a > b {
        return Err(bad());
    }
    Ok((a, b))
}

/// Parse source addresses: each item is `A.B.C.D` or `A.B.C.D-A.B.C.E` (or
/// `A.B.C.D-E`), items may be comma-separated or repeated flags.
pub fn parse_sources(items: &[String]) -> Result<Vec<Ipv4Addr>, TargetError> {
    let mut out = Vec::new();
    for item in items
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let bad = || TargetError::Source(item.to_string());
        match item.split_once('-') {
            None => out.push(item.parse().map_err(|_| bad())?),
            Some((a, b)) => {
                let a: Ipv4Addr = a.parse().map_err(|_| bad())?;
                let b: Ipv4Addr = match b.parse::<Ipv4Addr>() {
                    Ok(ip) => ip,
                    Err(_) => {
                        let last: u8 = b.parse().map_err(|_| bad())?;
                        let o = a.octets();
                        Ipv4Addr::new(o[0], o[1], o[2], last)
                    }
                };
                let (a, b) = (u32::from(a), u32::from(b));
                if a > b || b - a > 1 << 20 {
                    return Err(bad());
                }
                out.extend((a..=b).map(Ipv4Addr::from));
            }
        }
    }
    Ok(out)
}

/// The user of connection `g`: cycling through `users` if given, else `first + g`.
pub fn user_of(g: u64, users: Option<(u64, u64)>, first: u64) -> u64 {
    match users {
        Some((a, b)) => a + g % (b - a + 1),
        None => first + g,
    }
}

/// Whether every target is on loopback (then 127.0.0.x sources can be picked automatically).
pub fn all_loopback(targets: &[Target]) -> bool {
    targets.iter().all(|t| t.addr.ip().is_loopback())
}

/// Source addresses picked when none were given: enough 127.0.0.x addresses (from
/// 127.0.0.2) that `n` connections per target fit in the local port range.
pub fn auto_sources(n: u64, targets: usize, ports_per_ip: u64) -> Vec<Ipv4Addr> {
    let per_target = n.div_ceil(targets.max(1) as u64);
    // Keep a fifth of the ports free for the rest of the machine and TIME_WAIT.
    let usable = (ports_per_ip * 4 / 5).max(1);
    let count = per_target.div_ceil(usable).clamp(1, 250);
    (0..count)
        .map(|i| Ipv4Addr::new(127, 0, 0, 2 + i as u8))
        .collect()
}

/// The number of ephemeral ports per source IP from `ip_local_port_range`.
pub fn ports_per_ip() -> u64 {
    let range = host::sys::read_proc("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut it = range
        .split_whitespace()
        .filter_map(|s| s.parse::<u64>().ok());
    match (it.next(), it.next()) {
        (Some(a), Some(b)) if b >= a => b - a + 1,
        _ => 28_232,
    }
}

/// An IP as the `IpAddr` socket APIs want.
pub fn ip(v4: Ipv4Addr) -> IpAddr {
    IpAddr::V4(v4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_templates() {
        let t = Target::parse("http://127.0.0.1:8000/sub/%d?x=1").unwrap();
        assert_eq!(t.addr, "127.0.0.1:8000".parse().unwrap());
        let mut p = Vec::new();
        t.path(42, &mut p, &mut |_| {});
        assert_eq!(p, b"/sub/42?x=1");
        let t = Target::parse("ws://localhost:9/").unwrap();
        assert_eq!(t.addr.port(), 9);
        assert_eq!(t.parts, [Part::Text("/".into())]);
        let t = Target::parse("ws://localhost:9/ws/%d?a=%25&channel=%c%").unwrap();
        assert!(t.has_rooms());
        let mut p = Vec::new();
        t.path(7, &mut p, &mut |o| o.extend_from_slice(b"r1&channel=r2"));
        assert_eq!(p, b"/ws/7?a=%25&channel=r1&channel=r2%");
        assert!(!t.tls);
        let t = Target::parse("https://localhost/sse/%d").unwrap();
        assert_eq!((t.addr.port(), t.tls), (443, true));
        assert_eq!(
            (t.server_name.as_str(), t.host.as_str()),
            ("localhost", "localhost")
        );
        let t = Target::parse("wss://127.0.0.1:8443/ws/%d").unwrap();
        assert_eq!(
            (t.addr.port(), t.tls, t.server_name.as_str()),
            (8443, true, "127.0.0.1")
        );
        assert!(Target::parse("ftp://x/").is_err());
        assert!(Target::parse("http:///x").is_err());
    }

    #[test]
    fn ranges_and_sources() {
        assert_eq!(parse_range("5-9").unwrap(), (5, 9));
        assert_eq!(parse_range("7").unwrap(), (7, 7));
        assert!(parse_range("9-5").is_err());
        let s =
            parse_sources(&["127.0.0.2-127.0.0.4".into(), "127.0.0.9,127.0.1.1-3".into()]).unwrap();
        assert_eq!(s.len(), 3 + 1 + 3);
        assert_eq!(s[6], Ipv4Addr::new(127, 0, 1, 3));
        assert!(parse_sources(&["1.2.3".into()]).is_err());
    }

    #[test]
    fn users_cycle() {
        assert_eq!(user_of(0, Some((10, 12)), 1), 10);
        assert_eq!(user_of(4, Some((10, 12)), 1), 11);
        assert_eq!(user_of(4, None, 100), 104);
    }

    #[test]
    fn auto_sources_cover_the_port_range() {
        assert_eq!(auto_sources(1000, 1, 28_000).len(), 1);
        let s = auto_sources(200_000, 1, 28_000);
        assert!(s.len() as u64 * 28_000 * 4 / 5 >= 200_000);
        assert_eq!(s[0], Ipv4Addr::new(127, 0, 0, 2));
    }
}
