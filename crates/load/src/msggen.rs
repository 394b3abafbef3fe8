//! `myriad msggen` (SPEC G2): publish to random subjects at a steady rate over P
//! keep-alive HTTP/1.1 connections (`POST /pub/<id>`), uniform or power-law subject
//! choice, each payload stamped `ts=<unix micros> ` so `flood` can measure
//! publish→receive latency.
//!
//! One blocking thread per publisher is fine here: P is small (tens), and each thread
//! paces itself to rate / P, publisher i starting i / rate after the others' start so
//! that the P streams interleave into one evenly spaced stream (in phase, they
//! published in bursts of P: a server that merges what arrives during a fan-out was
//! flattered and one that does not was penalised; docs/decisions/writes-coalescing-and-io-uring.md). With
//! `--nats URL` the publishers publish through the broker instead (SPEC C4): a NATS request to `myriad.pub.<subject>`, whose answer
//! is the same JSON as `POST /pub/<subject>`'s. With `--pusher ID:KEY:SECRET` each
//! publish is a Pusher Channels event, `POST /apps/<id>/events` signed as the
//! `pusher` server SDKs sign it, to the channel `--path` names: the one publish path
//! to myriad and to any other Pusher server (Sockudo, soketi).

use crate::dial::{Conn, Dialer};
use anyhow::{bail, Context};
use host::sys;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod send;
use send::{nats_subject, publish_nats, publish_once, Target};

/// Largest response accepted from the server (head + body).
const MAX_RESPONSE: usize = 64 * 1024;
/// A publisher that fell behind sends at most this many messages back to back.
const MAX_CATCH_UP: u32 = 100;
/// Socket read/write timeout of a publisher.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// How subjects are picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dist {
    /// Every subject in 1..=max equally likely.
    Uniform,
    /// Subject k with probability ∝ k^-exponent (a few hot subjects, a long tail).
    Power,
}

/// Flags of `myriad msggen`.
#[derive(clap::Args, Clone, Debug)]
pub struct MsggenArgs {
    /// Server base URL; messages go to POST <url><path>.
    #[arg(long, default_value = "http://127.0.0.1:8000")]
    pub url: String,
    /// Path template; `%d` becomes the subject. With --nats its last segment names
    /// the subject published to (`/pub/%d0000000`: the subject × 10⁷).
    #[arg(long, default_value = "/pub/%d")]
    pub path: String,
    /// Messages per second over all publishers (0 = as fast as possible).
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// Subjects are 1..=max.
    #[arg(long, default_value_t = 10_000)]
    pub max: u64,
    /// Concurrent keep-alive publisher connections.
    #[arg(long, default_value_t = 4)]
    pub publishers: usize,
    /// Subject choice.
    #[arg(long, value_enum, default_value = "uniform")]
    pub dist: Dist,
    /// Power-law exponent for --dist power.
    #[arg(long, default_value_t = 1.0)]
    pub exponent: f64,
    /// Seconds to publish.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Pad each payload to this many bytes (the stamp is always there).
    #[arg(long, default_value_t = 0)]
    pub size: usize,
    /// Random seed (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Publish through this NATS server (`myriad.pub.<subject>` requests to a
    /// `serve --role router`) instead of HTTP to --url; as a back-end would, with
    /// replies on `_INBOX.>` (the publisher's permissions in
    /// deploy/nats-authorization.conf).
    #[arg(long)]
    pub nats: Option<String>,
    /// Publish Pusher events through the Pusher HTTP API of this app
    /// (`ID:KEY:SECRET`): signed `POST /apps/<ID>/events` to the channel --path names
    /// (`%d` the subject, e.g. `bench` or `room-%d`), event name `bench`.
    #[arg(long, value_name = "ID:KEY:SECRET")]
    pub pusher: Option<String>,
    /// With --nats: its credentials and TLS, as `serve` takes them.
    #[command(flatten)]
    pub nats_auth: nats_link::NatsAuthArgs,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// No per-second lines on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// `https://`: trust the CA certificates in this PEM file (a test CA, or the file
    /// `serve --tls self-signed` wrote) instead of the system bundle.
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// `https://`: do not verify the server's certificate at all.
    #[arg(long)]
    pub insecure: bool,
}

impl Default for MsggenArgs {
    fn default() -> Self {
        MsggenArgs {
            url: "http://127.0.0.1:8000".into(),
            path: "/pub/%d".into(),
            rate: 1000.0,
            max: 10_000,
            publishers: 4,
            dist: Dist::Uniform,
            exponent: 1.0,
            duration: 10.0,
            size: 0,
            seed: None,
            pusher: None,
            nats: None,
            nats_auth: nats_link::NatsAuthArgs::default(),
            json: false,
            quiet: false,
            ca: None,
            insecure: false,
        }
    }
}

/// The end of a msggen run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MsggenSummary {
    /// Publishes answered with a 2xx status.
    pub sent: u64,
    /// Failed publishes (connect, IO, or non-2xx status).
    pub errors: u64,
    pub elapsed_s: f64,
    pub achieved_rate: f64,
    /// Sum of "connections" in the server's replies: deliveries it reported.
    pub deliveries: u64,
    /// Sum of "users" in the replies.
    pub users: u64,
    /// Publish request round trip, microseconds.
    pub rtt_p50_us: u64,
    pub rtt_p99_us: u64,
    pub rtt_max_us: u64,
    /// The last error seen, if any.
    pub last_error: Option<String>,
    /// How many errors of each kind (the error's text; at most [`MAX_ERROR_KINDS`]
    /// kinds, the rest counted as "other"), so a soak can say what failed.
    pub error_kinds: std::collections::BTreeMap<String, u64>,
}

/// Distinct error texts counted apart in [`MsggenSummary::error_kinds`].
const MAX_ERROR_KINDS: usize = 16;

#[derive(Default)]
/// The counts every sender task adds to and the summary reads.
struct Tallies {
    sent: AtomicU64,
    errors: AtomicU64,
    deliveries: AtomicU64,
    users: AtomicU64,
    last_error: Mutex<Option<String>>,
    error_kinds: Mutex<std::collections::BTreeMap<String, u64>>,
    rtt: Mutex<Option<hdrhistogram::Histogram<u64>>>,
}

/// `myriad msggen`.
pub fn run(args: MsggenArgs) -> anyhow::Result<()> {
    sys::catch_interrupt();
    let json = args.json;
    let s = run_with(args, &AtomicBool::new(false))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    }
    Ok(())
}

/// Publish until --duration passes, `stop` becomes true, or Ctrl-C (if caught).
pub fn run_with(args: MsggenArgs, stop: &AtomicBool) -> anyhow::Result<MsggenSummary> {
    if args.max == 0 || args.publishers == 0 {
        bail!("--max and --publishers must be at least 1");
    }
    let pusher = args
        .pusher
        .as_deref()
        .map(auth::PusherApp::parse)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--pusher: {e}"))?;
    if pusher.is_some() && args.nats.is_some() {
        bail!("--pusher publishes over HTTP: drop --nats");
    }
    let target = match &args.nats {
        Some(url) => {
            let config =
                nats_link::NatsConfig::from_flags(url, &args.nats_auth)?.with_inbox("_INBOX");
            Target::Nats(Arc::new(nats_link::Link::connect(
                &config,
                "myriad msggen",
                |_| {},
            )?))
        }
        None => {
            let dialer = Dialer::new(&args.url, &crate::dial::roots(&args.ca, args.insecure)?)?;
            dialer.connect(Duration::from_secs(3)).with_context(|| {
                format!(
                    "cannot reach {} ({}): is the server running?",
                    args.url, dialer.addr
                )
            })?;
            Target::Http(dialer)
        }
    };
    let shared = Arc::new(Tallies {
        rtt: Mutex::new(Some(crate::flood::stats::new_hist())),
        ..Default::default()
    });
    let done = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(args.duration.max(0.0));
    let seed = args.seed.unwrap_or_else(sys::unix_micros);
    let mut threads = Vec::new();
    for i in 0..args.publishers {
        let (shared, done, args, target, pusher) = (
            shared.clone(),
            done.clone(),
            args.clone(),
            target.clone(),
            pusher.clone(),
        );
        threads.push(std::thread::spawn(move || {
            publisher(
                &args,
                &target,
                pusher.as_ref(),
                seed.wrapping_add(i as u64 * 7919),
                start + first_offset(args.rate, i),
                deadline,
                &done,
                &shared,
            )
        }));
    }
    let (mut last_sent, mut last_deliv) = (0, 0);
    let mut next = start + Duration::from_secs(1);
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) && !sys::interrupted() {
        std::thread::sleep(
            next.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(50)),
        );
        if Instant::now() >= next {
            next += Duration::from_secs(1);
            let (s, d) = (
                shared.sent.load(Ordering::Relaxed),
                shared.deliveries.load(Ordering::Relaxed),
            );
            if !args.quiet {
                eprintln!(
                    "{:>6.1}s sent {:>7}/s deliveries {:>9}/s errors {}",
                    start.elapsed().as_secs_f64(),
                    s - last_sent,
                    d - last_deliv,
                    shared.errors.load(Ordering::Relaxed)
                );
            }
            (last_sent, last_deliv) = (s, d);
        }
    }
    done.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let elapsed = start.elapsed().as_secs_f64();
    let sent = shared.sent.load(Ordering::Relaxed);
    // The publishers have joined, so the lock is free and the histogram still there.
    let rtt = shared
        .rtt
        .lock()
        .expect("publishers joined")
        .take()
        .expect("histogram set at start");
    let (p50, p99, max) = crate::flood::stats::percentiles(&rtt);
    let summary = MsggenSummary {
        sent,
        errors: shared.errors.load(Ordering::Relaxed),
        elapsed_s: elapsed,
        achieved_rate: sent as f64 / elapsed.max(1e-9),
        deliveries: shared.deliveries.load(Ordering::Relaxed),
        users: shared.users.load(Ordering::Relaxed),
        rtt_p50_us: p50,
        rtt_p99_us: p99,
        rtt_max_us: max,
        last_error: shared.last_error.lock().map(|e| e.clone()).unwrap_or(None),
        error_kinds: shared
            .error_kinds
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default(),
    };
    if !args.quiet {
        eprintln!(
            "msggen summary: {} sent ({:.0}/s), {} errors, {} deliveries reported, rtt p50 {}us p99 {}us{}",
            summary.sent,
            summary.achieved_rate,
            summary.errors,
            summary.deliveries,
            p50,
            p99,
            summary.last_error.as_ref().map(|e| format!("; last error: {e}")).unwrap_or_default()
        );
    }
    Ok(summary)
}

/// Pick a subject in 1..=max.
pub fn pick_subject(rng: &mut impl Rng, dist: Dist, max: u64, exponent: f64) -> u64 {
    match dist {
        Dist::Uniform => rng.gen_range(1..=max),
        Dist::Power => {
            // Inverse transform of the continuous power law on [1, max+1): O(1) memory
            // for any max, close to Zipf for the ranks that matter.
            let u: f64 = rng.gen();
            let n = (max + 1) as f64;
            let x = if (exponent - 1.0).abs() < 1e-9 {
                n.powf(u)
            } else {
                let a = 1.0 - exponent;
                ((n.powf(a) - 1.0) * u + 1.0).powf(1.0 / a)
            };
            (x.floor() as u64).clamp(1, max)
        }
    }
}

/// The payload: the stamp first, then padding to `size`.
pub fn payload(size: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(format!("ts={} ", sys::unix_micros()).as_bytes());
    while out.len() < size {
        out.push(b'x');
    }
}

/// When publisher `i` sends first, after the start: i/P of its own interval (P/rate),
/// i.e. i/rate, so the aggregate is one message every 1/rate.
fn first_offset(rate: f64, i: usize) -> Duration {
    if rate > 0.0 {
        Duration::from_secs_f64(i as f64 / rate)
    } else {
        Duration::ZERO
    }
}

#[allow(clippy::too_many_arguments)]
fn publisher(
    args: &MsggenArgs,
    target: &Target,
    pusher: Option<&auth::PusherApp>,
    seed: u64,
    first: Instant,
    deadline: Instant,
    done: &AtomicBool,
    shared: &Tallies,
) {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let interval = if args.rate > 0.0 {
        Duration::from_secs_f64(args.publishers as f64 / args.rate)
    } else {
        Duration::ZERO
    };
    let mut next = first;
    let mut conn: Option<Conn> = None;
    let (mut req, mut body, mut resp) = (Vec::new(), Vec::new(), vec![0u8; MAX_RESPONSE]);
    while !done.load(Ordering::Relaxed) && Instant::now() < deadline {
        let now = Instant::now();
        if next > now {
            std::thread::sleep((next - now).min(Duration::from_millis(50)));
            continue;
        }
        // Behind schedule: catch up, but not in an unbounded burst.
        if now.duration_since(next) > interval * MAX_CATCH_UP {
            next = now;
        }
        next += interval;
        let subject = pick_subject(&mut rng, args.dist, args.max, args.exponent);
        payload(args.size, &mut body);
        let t0 = Instant::now();
        let result = match target {
            Target::Nats(link) => nats_subject(&args.path, subject)
                .and_then(|subject| publish_nats(link, subject, &body)),
            Target::Http(dialer) if pusher.is_some() => {
                let app = pusher.expect("matched just above");
                let channel = args.path.replace("%d", &subject.to_string());
                pusher_request(&mut req, app, &dialer.host, &channel, &body);
                publish_once(&mut conn, dialer, &req, &mut resp)
            }
            Target::Http(dialer) => {
                req.clear();
                let path = args.path.replace("%d", &subject.to_string());
                write!(req, "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n", dialer.host, body.len())
                    .expect("writing to a Vec cannot fail");
                req.extend_from_slice(&body);
                publish_once(&mut conn, dialer, &req, &mut resp)
            }
        };
        match result {
            Ok((status, connections, users)) if (200..300).contains(&status) => {
                shared.sent.fetch_add(1, Ordering::Relaxed);
                shared.deliveries.fetch_add(connections, Ordering::Relaxed);
                shared.users.fetch_add(users, Ordering::Relaxed);
                if let Ok(mut h) = shared.rtt.lock() {
                    if let Some(h) = h.as_mut() {
                        h.saturating_record(t0.elapsed().as_micros().max(1) as u64);
                    }
                }
            }
            Ok((status, _, _)) => error(shared, format!("HTTP status {status}")),
            Err(e) => {
                conn = None;
                error(shared, format!("{e:#}"));
                // Do not spin on a dead server.
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// A Pusher event `bench` on `channel` with `data` (the stamped payload, as text),
/// signed at this second as the `pusher` server SDKs sign it.
pub fn pusher_request(
    req: &mut Vec<u8>,
    app: &auth::PusherApp,
    host: &str,
    channel: &str,
    data: &[u8],
) {
    let body = serde_json::json!({
        "name": "bench",
        "channels": [channel],
        "data": String::from_utf8_lossy(data),
    })
    .to_string();
    let path = format!("/apps/{}/events", app.id);
    let query = app.sign_api_request(
        "POST",
        &path,
        body.as_bytes(),
        sys::unix_micros() / 1_000_000,
    );
    req.clear();
    write!(req, "POST {path}?{query} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len())
        .expect("writing to a Vec cannot fail");
}

fn error(shared: &Tallies, msg: String) {
    shared.errors.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut kinds) = shared.error_kinds.lock() {
        let known = kinds.contains_key(&msg) || kinds.len() < MAX_ERROR_KINDS;
        *kinds
            .entry(if known { msg.clone() } else { "other".into() })
            .or_default() += 1;
    }
    if let Ok(mut e) = shared.last_error.lock() {
        *e = Some(msg);
    }
}

#[cfg(test)]
mod tests;
