//! `bench presence`: N users (default 10,000), one connection each, all in one
//! channel; then `GET /presence/<channel>` (the whole list: the server's
//! `--max-presence-members` is set to N) and its `/stats`, each asked
//! [`REQUESTS`] times in a row on one keep-alive connection. The figure is the
//! list's p99, against issue 42's ≤ 10 ms for a 10,000-member channel.

use super::held::{base_url, flood_args, Held, Live};
use super::report::{count, met, ms, Report};
use super::{BenchArgs, Ctx};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Members of the channel unless `--connections` says otherwise (the size).
const DEFAULT_MEMBERS: u64 = 10_000;
/// Requests per endpoint.
const REQUESTS: usize = 1_000;
/// The channel every connection joins.
const CHANNEL: &str = "presence-bench";

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    anyhow::ensure!(
        super::context::scheme() == "http",
        "bench presence asks over plain HTTP: --tls is not supported"
    );
    let dir = ctx.dir("presence")?;
    let n = args.connections.unwrap_or(DEFAULT_MEMBERS).max(1);
    let live = Live::new("presence");
    let mut report = Report::new(
        "presence",
        &format!(
            "GET /presence/<channel> on a channel of {}",
            count(n as f64)
        ),
        &dir,
    );
    let cap = n.to_string();
    let server = ctx.server(&dir.join("server.csv"), &["--max-presence-members", &cap])?;
    let server = std::sync::Arc::new(server);
    let url = format!("{}/sub/%d?channel={CHANNEL}", base_url(&server));
    let mut a = flood_args(vec![url], n, args.transport()?, None);
    a.users = Some(format!("1-{n}"));
    let held = Held::start(a, live.clone(), vec![server.clone()]);
    let open = held.wait_open(n, Duration::from_secs(120));
    let mut api = Api::connect(server.addr)?;
    let stats_path = format!("/presence/{CHANNEL}/stats");
    let deadline = Instant::now() + Duration::from_secs(30);
    let members = loop {
        let doc: serde_json::Value = serde_json::from_slice(&api.get(&stats_path)?)?;
        let users = doc["users"].as_u64().unwrap_or(0);
        if users >= open || Instant::now() >= deadline {
            break users;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    live.emit(format!("{members} members: asking {REQUESTS} times each"));
    let (list, list_bytes) = api.time(&format!("/presence/{CHANNEL}"))?;
    let (stats, _) = api.time(&stats_path)?;
    held.finish()?;
    report.row(
        "members in the channel",
        format!("{} of {}", count(members as f64), count(n as f64)),
        "all",
        met(members == n),
    );
    report.row(
        &format!(
            "GET /presence/<channel> p99, {} members listed",
            count(members as f64)
        ),
        ms(list.p99),
        "≤ 10 ms",
        met(list.p99 <= 10_000),
    );
    report.fact(
        "list p50 / max, answer size",
        format!(
            "{} / {}, {} bytes",
            ms(list.p50),
            ms(list.max),
            count(list_bytes as f64)
        ),
    );
    report.fact(
        "GET /presence/<channel>/stats p50 / p99",
        format!("{} / {}", ms(stats.p50), ms(stats.p99)),
    );
    report.note(format!(
        "{REQUESTS} requests per endpoint one after the other on one keep-alive connection, \
         timed from the request's write to the last byte of the answer; the connections \
         are idle meanwhile (no churn)."
    ));
    report.live = live.lines();
    Ok(report)
}

/// Latencies of one endpoint, µs.
struct Timing {
    p50: u64,
    p99: u64,
    max: u64,
}

/// One keep-alive HTTP/1.1 connection to the API.
///
/// Besides the time the caller sees, each answer is timed without the client's
/// own scheduling: from the request's write to the kernel's receive stamp of the
/// answer's last bytes (`SO_TIMESTAMPNS`), [`Api::last_server_us`]. On a loaded box
/// a client thread can wait for a core after its answer arrived; that wait is in
/// the caller's time, not in this one.
pub(super) struct Api {
    s: TcpStream,
    buf: Vec<u8>,
    /// When the last request was written (Unix ns).
    sent_ns: u64,
    /// The kernel's receive stamp of the last bytes read (Unix ns).
    received_ns: u64,
}

/// Now as Unix ns (the clock `SO_TIMESTAMPNS` stamps with).
fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Api {
    pub(super) fn connect(addr: std::net::SocketAddr) -> anyhow::Result<Api> {
        let s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.set_nodelay(true)?;
        let on: libc::c_int = 1;
        // SAFETY: a valid socket and a c_int option of the right size.
        let rc = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&s),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        anyhow::ensure!(
            rc == 0,
            "SO_TIMESTAMPNS: {}",
            std::io::Error::last_os_error()
        );
        Ok(Api {
            s,
            buf: Vec::new(),
            sent_ns: 0,
            received_ns: 0,
        })
    }

    /// The last answer's time without the client: from its request's write to the
    /// kernel's receive stamp of its last bytes, µs.
    pub(super) fn last_server_us(&self) -> u64 {
        self.received_ns.saturating_sub(self.sent_ns) / 1_000
    }

    /// `path` asked [`REQUESTS`] times: the latencies and the answer's size.
    fn time(&mut self, path: &str) -> anyhow::Result<(Timing, usize)> {
        let mut us = Vec::with_capacity(REQUESTS);
        let mut size = 0;
        for _ in 0..REQUESTS {
            let t = Instant::now();
            size = self.get(path)?.len();
            us.push(t.elapsed().as_micros() as u64);
        }
        us.sort_unstable();
        let at = |q: f64| us[((us.len() as f64 * q) as usize).min(us.len() - 1)];
        let timing = Timing {
            p50: at(0.5),
            p99: at(0.99),
            max: us[us.len() - 1],
        };
        Ok((timing, size))
    }

    /// The body of `GET path`, which must answer 200 with a `Content-Length`.
    pub(super) fn get(&mut self, path: &str) -> anyhow::Result<Vec<u8>> {
        self.sent_ns = unix_ns();
        write!(self.s, "GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n")?;
        let end = loop {
            if let Some(at) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            self.fill()?;
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        anyhow::ensure!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .ok_or_else(|| anyhow::anyhow!("{path}: no Content-Length in {head}"))?;
        while self.buf.len() < end + length {
            self.fill()?;
        }
        let body = self.buf[end..end + length].to_vec();
        self.buf.drain(..end + length);
        Ok(body)
    }

    /// Reads what arrived, noting its receive stamp.
    fn fill(&mut self) -> anyhow::Result<()> {
        let mut chunk = [0u8; 64 * 1024];
        let mut control = [0u64; 16];
        let mut iov = libc::iovec {
            iov_base: chunk.as_mut_ptr().cast(),
            iov_len: chunk.len(),
        };
        // SAFETY: msghdr is plain data; zeroed is its empty value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.s);
        let n = loop {
            // SAFETY: iov and control point at live buffers of the sizes given.
            let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
            if n >= 0 {
                break n as usize;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e.into());
            }
        };
        anyhow::ensure!(n > 0, "the server closed the API connection");
        // SAFETY: walking the control messages recvmsg wrote into `control`.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                    self.received_ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}
