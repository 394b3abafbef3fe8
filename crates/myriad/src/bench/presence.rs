//! `bench presence`: N users (default 10,000), one connection each, all in one
//! channel; then `GET /presence/<channel>` (the whole list: the server's
//! `--max-presence-members` is set to N) and its `/stats`, each asked
//! [`REQUESTS`] times in a row on one keep-alive connection. The figure is the
//! list's p99, against issue 42's ≤ 10 ms for a 10,000-member channel.

use super::held::{base_url, flood_args, Held, Live};
use super::report::{count, met, ms, Report};
use super::{BenchArgs, Ctx};
use std::io::{Read, Write};
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
pub(super) struct Api {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Api {
    pub(super) fn connect(addr: std::net::SocketAddr) -> anyhow::Result<Api> {
        let s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.set_nodelay(true)?;
        Ok(Api { s, buf: Vec::new() })
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

    fn fill(&mut self) -> anyhow::Result<()> {
        let mut chunk = [0u8; 64 * 1024];
        let n = self.s.read(&mut chunk)?;
        anyhow::ensure!(n > 0, "the server closed the API connection");
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}
