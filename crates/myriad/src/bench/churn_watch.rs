//! `bench churn --churn-rooms`: are the join/leave pushes exactly once and in
//! order? Watchers ([`Watchers`]: SSE connections without a user, each on up to
//! [`ROOMS_PER_WATCHER`] rooms with `presence=1`) are held from before the churn
//! until everyone left; per (room, user) they check that the pushes alternate
//! joined, left, joined, … from a join and end with a leave (a lost, repeated or
//! reordered push breaks that), and count the joins. The truth they are held
//! against: a churning user connects once per cycle of its worker with its user
//! set (even and odd cycles use two sets, so a user is back a whole cycle after
//! its close, never before the server saw that close: a reconnect overlapping its
//! old connection would rightly be no leave and no join, presence being per
//! user), so with every connect answered its joins must equal those cycles.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Rooms one watcher connection subscribes to (the server's `--max-channels`
/// default is 64).
const ROOMS_PER_WATCHER: u32 = 50;

/// What the watchers saw of one (room, user).
#[derive(Clone, Copy, Default)]
pub(super) struct Track {
    pub joins: u32,
    pub leaves: u32,
    /// Announced present (the last push was a join).
    present: bool,
    /// Pushes that broke the alternation (a join while present, a leave while not).
    pub broken: u32,
}

/// What one watcher saw, by (room, user).
type Seen = HashMap<(u32, u64), Track>;

pub(super) struct Watchers {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<anyhow::Result<Seen>>>,
}

impl Watchers {
    /// Opens the watchers of rooms `r1 ..= r<rooms>` and returns once every one of
    /// them is subscribed (its answer's head read).
    pub(super) fn start(addr: SocketAddr, rooms: u32) -> anyhow::Result<Watchers> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for first in (1..=rooms).step_by(ROOMS_PER_WATCHER as usize) {
            let last = (first + ROOMS_PER_WATCHER - 1).min(rooms);
            let query: Vec<String> = (first..=last).map(|k| format!("channel=r{k}")).collect();
            let mut s = TcpStream::connect(addr)?;
            s.set_read_timeout(Some(Duration::from_millis(500)))?;
            write!(
                s,
                "GET /sse?{}&presence=1 HTTP/1.1\r\nHost: bench\r\n\r\n",
                query.join("&")
            )?;
            let mut r = BufReader::with_capacity(256 * 1024, s);
            let mut line = String::new();
            // The head (the subscriptions are made before it is written).
            loop {
                line.clear();
                anyhow::ensure!(r.read_line(&mut line)? > 0, "watcher: closed");
                anyhow::ensure!(
                    !line.starts_with("HTTP/") || line.contains(" 200"),
                    "watcher: {line}"
                );
                if line == "\r\n" {
                    break;
                }
            }
            let stop = stop.clone();
            threads.push(std::thread::spawn(move || watch(r, &stop)));
        }
        Ok(Watchers { stop, threads })
    }

    /// Stops the watchers; what they saw, by (room, user).
    pub(super) fn finish(self) -> anyhow::Result<Seen> {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = HashMap::new();
        for t in self.threads {
            let seen = t
                .join()
                .map_err(|_| anyhow::anyhow!("watcher panicked"))??;
            all.extend(seen);
        }
        Ok(all)
    }
}

/// Reads one watcher's stream until `stop`: its presence pushes by (room, user).
fn watch(mut r: BufReader<TcpStream>, stop: &AtomicBool) -> anyhow::Result<Seen> {
    let mut seen = Seen::new();
    let mut line = String::new();
    while !stop.load(Ordering::Relaxed) {
        // A read timed out keeps its partial line in `line`: the rest follows.
        if line.ends_with('\n') {
            line.clear();
        }
        match r.read_line(&mut line) {
            Ok(0) => anyhow::bail!("watcher: the server closed the stream"),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        if !line.ends_with('\n') {
            continue;
        }
        // Other lines (`event:`, `id:`, `retry:`) are skipped.
        let Some(data) = line.trim_end().strip_prefix("data: ") else {
            continue;
        };
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(data) else {
            continue;
        };
        let Some(room) = doc["channel"]
            .as_str()
            .and_then(|c| c.strip_prefix('r'))
            .and_then(|k| k.parse::<u32>().ok())
        else {
            continue;
        };
        let (joined, user) = match (doc["joined"].as_u64(), doc["left"].as_u64()) {
            (Some(u), _) => (true, u),
            (_, Some(u)) => (false, u),
            _ => continue,
        };
        let t = seen.entry((room, user)).or_default();
        if joined == t.present {
            t.broken += 1;
        }
        if joined {
            t.joins += 1;
        } else {
            t.leaves += 1;
        }
        t.present = joined;
    }
    // Everyone left before the stop: a user still announced present missed a leave.
    for t in seen.values_mut() {
        if t.present {
            t.broken += 1;
        }
    }
    Ok(seen)
}

/// One churn worker as the judge needs it: its users (the even cycles' from
/// `first_user`, the odd cycles' `odd_offset` above), cycles with each set, and
/// failed connects.
pub(super) struct Worker {
    pub first_user: u64,
    pub users: u64,
    pub odd_offset: u64,
    pub cycles: [u64; 2],
    pub failed: u64,
}

/// The exactly-once, in-order row: what the watchers saw against the workers'
/// connects.
pub(super) fn judge(
    report: &mut super::report::Report,
    seen: &HashMap<(u32, u64), Track>,
    workers: &[Worker],
) {
    use super::report::{count, met};
    let (mut joins, mut leaves, mut broken, mut broken_keys) = (0u64, 0u64, 0u64, 0u64);
    let mut by_user: HashMap<u64, u64> = HashMap::new();
    for (&(_, user), t) in seen {
        joins += u64::from(t.joins);
        leaves += u64::from(t.leaves);
        broken += u64::from(t.broken);
        broken_keys += u64::from(t.broken > 0);
        *by_user.entry(user).or_default() += u64::from(t.joins);
    }
    let (mut judged, mut fewer, mut more, mut connects) = (0u64, 0u64, 0u64, 0u64);
    for w in workers.iter().filter(|w| w.failed == 0) {
        for (set, cycles) in w.cycles.into_iter().enumerate() {
            let first = w.first_user + set as u64 * w.odd_offset;
            for user in first..first + w.users {
                let got = by_user.get(&user).copied().unwrap_or(0);
                judged += 1;
                connects += cycles;
                fewer += u64::from(got < cycles);
                more += u64::from(got > cycles);
            }
        }
    }
    report.row(
        "join/leave pushes to watchers: each once, in order, per (room, user)",
        format!(
            "{} joins, {} leaves over {} (room, user); {broken} out of turn in {broken_keys}; \
             joins = connects for {} of {} users judged ({fewer} fewer, {more} more; {} connects)",
            count(joins as f64),
            count(leaves as f64),
            count(seen.len() as f64),
            count((judged - fewer - more) as f64),
            count(judged as f64),
            count(connects as f64),
        ),
        "all once, in order",
        met(broken == 0 && fewer == 0 && more == 0 && judged > 0),
    );
    report.note(
        "Join/leave check: SSE watchers without a user hold presence=1 on every room from \
         before the churn until everyone left; per (room, user) the pushes must alternate \
         joined, left, … from a join and end with a leave (a lost, repeated or reordered \
         push breaks it), and each churning user's joins must equal its connects (its \
         worker's cycles with its user set: odd cycles use users n above the even ones', \
         so no reconnect overlaps its old connection; workers with failed connects are \
         not judged). With a grace, a reconnect within it is rightly no join: judge with \
         --server-flag=--presence-grace=0."
            .to_string(),
    );
}
