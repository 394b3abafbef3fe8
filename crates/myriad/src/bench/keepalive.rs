//! `bench keepalive`: N HTTP/1.1 clients each send one request (`GET /healthz`) and go
//! idle on a kept-alive connection. The server must close each one its keep-alive
//! timeout after the response; the figure is the time from the last response until
//! the server has closed them all, and its RSS afterwards.
//!
//! The clients are sockets in this process watched with one `poll(2)` over all of them
//! ([`super::keepalive_clients`]; over TLS with `--tls`): flood's transports all keep a
//! request open, which is what this is not.

use super::held::{watch, Live, Probe};
use super::keepalive_clients::{Client, Clients, Dial};
use super::report::{bytes, count, met, Report};
use super::{BenchArgs, Ctx};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Extra time allowed past the keep-alive timeout before giving up on closes.
const EXTRA_WAIT: Duration = Duration::from_secs(30);
/// Connects between two reads of the responses (plain).
const CONNECT_BATCH: u64 = 256;
/// The same over TLS: each connect also needs a poll to finish its handshake and send
/// its request, and a TLS connect takes longer, so answers are read more often.
const CONNECT_BATCH_TLS: u64 = 32;
/// The tolerance of the target: timeout + 1 s.
const TOLERANCE_S: f64 = 1.0;

pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> anyhow::Result<Report> {
    let dir = ctx.dir("keepalive")?;
    let n = args.connections();
    let live = Live::new("keepalive");
    let mut report = Report::new(
        "keepalive",
        &format!("{} idle keep-alive clients", count(n as f64)),
        &dir,
    );
    let server_csv = dir.join("server.csv");
    let timeout = args.keepalive_timeout.to_string();
    let server = Arc::new(ctx.server(&server_csv, &["--keepalive-timeout", &timeout])?);
    report.csvs.push(server_csv);
    let rss_idle = server.rss();
    let mut probe = Probe::new(vec![server.clone()]);
    probe.sample();

    // Connect and send; a blocking connect on loopback returns at the handshake.
    // Responses are read between batches of connects, so each is stamped when it
    // arrives rather than after the last connect.
    let dial = Dial::new(server.addr, super::context::tls_ca())?;
    let batch = if dial.is_tls() {
        CONNECT_BATCH_TLS
    } else {
        CONNECT_BATCH
    };
    let mut set = Clients::default();
    let mut connect_errors = 0u64;
    let t_connect = Instant::now();
    for i in 0..n {
        if !set.add(&dial) {
            connect_errors += 1;
        }
        if i % batch == batch - 1 {
            set.pump(0);
        }
    }
    live.emit(format!(
        "{} connected and sent in {:.2} s ({connect_errors} errors)",
        set.clients.len(),
        t_connect.elapsed().as_secs_f64()
    ));

    let deadline = Instant::now() + Duration::from_secs_f64(args.keepalive_timeout) + EXTRA_WAIT;
    let mut rss_held = 0u64;
    let mut next_line = Instant::now() + Duration::from_secs(1);
    while set.open > 0 && Instant::now() < deadline {
        set.pump(10);
        let now = Instant::now();
        if now >= next_line {
            next_line += Duration::from_secs(1);
            let s = probe.sample();
            if rss_held == 0 && set.all_answered() {
                rss_held = s.rss;
            }
            live.line(None, &s);
            live.emit(format!(
                "clients: {} answered, {} open",
                set.clients.iter().filter(|c| c.answered.is_some()).count(),
                set.open
            ));
        }
    }
    let (clients, open, resets) = (set.clients, set.open, set.resets);
    let answered: Vec<&Client> = clients.iter().filter(|c| c.answered.is_some()).collect();
    let last_answer = answered.iter().filter_map(|c| c.answered).max();
    let last_close = clients.iter().filter_map(|c| c.closed).max();
    let mut delays: Vec<f64> = answered
        .iter()
        .filter_map(|c| Some(c.closed?.duration_since(c.answered?).as_secs_f64()))
        .collect();
    delays.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        delays
            .get(((delays.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    let still_open = open;
    let answered = answered.len() as u64;
    drop(clients);
    watch(&live, &mut probe, 5.0, &mut |s| s.connections == 0);
    live.emit(format!("everyone gone; settling {:.0} s", args.settle));
    watch(&live, &mut probe, args.settle, &mut |_| false);
    let rss_after = server.rss();

    report.row(
        "clients answered",
        format!(
            "{} of {} ({connect_errors} connect errors)",
            count(answered as f64),
            count(n as f64)
        ),
        "all",
        met(answered == n),
    );
    let span = match (last_answer, last_close) {
        (Some(a), Some(c)) if still_open == 0 => Some(c.saturating_duration_since(a).as_secs_f64()),
        _ => None,
    };
    let limit = args.keepalive_timeout + TOLERANCE_S;
    report.row(
        "time from the last response until the server closed all",
        match span {
            Some(s) => format!("{s:.2} s"),
            None => format!(
                "{still_open} still open after {:.0} s",
                (Duration::from_secs_f64(args.keepalive_timeout) + EXTRA_WAIT).as_secs_f64()
            ),
        },
        &format!("keep-alive timeout + ≤ 1 s (≤ {limit:.1} s)"),
        met(span.is_some_and(|s| s <= limit)),
    );
    report.row(
        "per connection: response → close, p50 / max",
        format!("{:.2} s / {:.2} s", pct(0.5), pct(1.0)),
        &format!("≤ {limit:.1} s"),
        met(pct(1.0) <= limit),
    );
    report.fact("connections reset instead of closed", count(resets as f64));
    let ratio = rss_after as f64 / rss_idle.max(1) as f64;
    report.row(
        "server RSS back after the closes",
        format!(
            "{} vs {} idle, {} with all idle clients ({:+.1} %)",
            bytes(rss_after as f64),
            bytes(rss_idle as f64),
            bytes(rss_held as f64),
            (ratio - 1.0) * 100.0
        ),
        "back to idle ± 10 %",
        met((ratio - 1.0).abs() <= 0.10),
    );
    report.note(format!(
        "Server started with --keepalive-timeout {}; each client sends `GET /healthz` \
         (HTTP/1.1, so kept alive by default) and never sends again{}.",
        args.keepalive_timeout,
        if dial.is_tls() {
            " (over TLS 1.3: the request goes once the handshake finished)"
        } else {
            ""
        }
    ));
    report.live = live.lines();
    Ok(report)
}
