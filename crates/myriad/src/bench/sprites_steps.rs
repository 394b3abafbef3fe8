//! `bench sprites`' throwing steps: every client throws at a rate for `--duration`
//! seconds, then rests on its open connection while the last sprites arrive; a step is
//! judged on its own counts and on the merged histogram of exactly its sprites. With
//! `--rates`, a ladder of total publish rates, continued one step past the first miss
//! (`ladder::climb`) so the cliff shows.
//!
//! A step passes when publishes/s reached ≥ 95 % of the offered rate, every sprite
//! published was received exactly once (received = published), no sprite took longer
//! than 1 s from throw to receipt, and no send or poll failed.
//!
//! Not here: the server, the clients' processes, holding (`sprites`).

use super::held::Live;
use super::ladder::STEP_MAX_LATENCY_US;
use super::report::{count, met, ms};
use load::flood::stats::{new_hist, quantile};
use load::sprites_child::{Line, SpritesChildren};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Share of the offered publishes/s a step must sustain.
pub const MIN_SUSTAINED: f64 = 0.95;
/// Longest wait after a step for its last sprites to arrive, and how long nothing
/// must change before the wait ends early (a sprite lost).
const DRAIN_MAX: Duration = Duration::from_secs(15);
const QUIET: Duration = Duration::from_secs(3);
/// After this, every child has written a line that follows the rest.
const LINE_AFTER_REST: Duration = Duration::from_millis(1_300);
/// Header of `ladder-sprites.csv` (`rate_msg_s` lets `myriad plot` draw it against the rate).
pub const CSV_HEADER: &str = "rate_msg_s,every_s,published,published_per_s,received,lat_p50_us,lat_p99_us,lat_max_us,send_errors,poll_errors,server_cpu_pct,nats_cpu_pct,client_cpu_pct,secs,ok";

/// One step's outcome.
#[derive(Clone, Debug, Default)]
pub struct Step {
    /// Offered publishes/s (clients / seconds between one client's throws).
    pub rate: f64,
    pub every: f64,
    pub secs: f64,
    pub published: u64,
    pub received: u64,
    pub send_errors: u64,
    pub poll_errors: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// Percent of one core: the supervised server's processes (supervisor, router,
    /// gateways and its nats-server), the nats-server among them, and the clients'.
    pub server_cpu: f64,
    pub nats_cpu: f64,
    pub client_cpu: f64,
    pub ok: bool,
}

impl Step {
    pub fn published_per_s(&self) -> f64 {
        self.published as f64 / self.secs.max(1e-9)
    }

    pub fn csv_row(&self) -> String {
        format!(
            "{},{:.4},{},{:.1},{},{},{},{},{},{},{:.1},{:.1},{:.1},{:.1},{}\n",
            self.rate,
            self.every,
            self.published,
            self.published_per_s(),
            self.received,
            self.p50_us,
            self.p99_us,
            self.max_us,
            self.send_errors,
            self.poll_errors,
            self.server_cpu,
            self.nats_cpu,
            self.client_cpu,
            self.secs,
            u8::from(self.ok)
        )
    }
}

/// Whether a step passes (see the module doc).
pub fn passes(s: &Step) -> bool {
    s.published_per_s() >= MIN_SUSTAINED * s.rate
        && s.published > 0
        && s.received == s.published
        && s.max_us <= STEP_MAX_LATENCY_US
        && s.send_errors == 0
        && s.poll_errors == 0
}

/// Runs one step: `n` clients throwing `rate` sprites a second between them for
/// `secs`, a live line a second.
pub fn run(
    clients: &mut SpritesChildren,
    server: u32,
    live: &Live,
    n: u64,
    rate: f64,
    secs: f64,
) -> Step {
    let every = n as f64 / rate.max(1e-9);
    clients.gather(Duration::ZERO);
    clients.take_hist();
    let t0 = clients.total();
    let cpu0 = (Instant::now(), tree_cpu(server));
    let mut hist = new_hist();
    let mut client_cpu = 0.0;
    let mut ticks = 0u32;
    clients.throw(every);
    let started = Instant::now();
    live.emit(format!(
        "step {rate} sprites/s: each of {} clients throws every {every:.2} s",
        count(n as f64)
    ));
    while started.elapsed().as_secs_f64() < secs {
        let alive = clients.gather(Duration::from_secs(1));
        let h = clients.take_hist();
        let t = clients.total();
        client_cpu += t.cpu_pct;
        ticks += 1;
        live.emit(format!(
            "{:>4.0} s: published {}, received {}, errors {} send / {} poll; p50 {} p99 {} max {}; clients' cpu {:.0} %",
            started.elapsed().as_secs_f64(),
            count((t.published - t0.published) as f64),
            count((t.received - t0.received) as f64),
            t.send_errors - t0.send_errors,
            t.poll_errors - t0.poll_errors,
            ms(quantile(&h, 0.5)),
            ms(quantile(&h, 0.99)),
            ms(h.max()),
            t.cpu_pct
        ));
        let _ = hist.add(&h);
        if !alive {
            break;
        }
    }
    clients.rest();
    let secs = started.elapsed().as_secs_f64();
    let cpu1 = (Instant::now(), tree_cpu(server));
    // The last sprites: until every one published is received, as counted by lines
    // the children wrote after the rest (each writes one a second), or until nothing
    // changed for `QUIET`.
    let drain = Instant::now();
    let mut last = (clients.total(), Instant::now());
    while drain.elapsed() < DRAIN_MAX {
        clients.gather(Duration::from_millis(250));
        let t = clients.total();
        // A throw ends published or as a send error (a failed connect is an error
        // without a throw, hence saturating).
        let in_flight = t.sent.saturating_sub(t.published + t.send_errors);
        let all_in = t.received - t0.received >= t.published - t0.published && in_flight == 0;
        if all_in && drain.elapsed() >= LINE_AFTER_REST {
            break;
        }
        if (t.received, t.published) != (last.0.received, last.0.published) {
            last = (t, Instant::now());
        } else if last.1.elapsed() >= QUIET {
            break;
        }
    }
    let _ = hist.add(clients.take_hist());
    let t: Line = clients.total();
    let dt = cpu1.0.duration_since(cpu0.0).as_secs_f64().max(1e-9);
    let server_cpu = (cpu1.1 .0 - cpu0.1 .0) / dt * 100.0;
    let nats_cpu = (cpu1.1 .1 - cpu0.1 .1) / dt * 100.0;
    let mut step = Step {
        rate,
        every,
        secs,
        published: t.published - t0.published,
        received: t.received - t0.received,
        send_errors: t.send_errors - t0.send_errors,
        poll_errors: t.poll_errors - t0.poll_errors,
        p50_us: quantile(&hist, 0.5),
        p99_us: quantile(&hist, 0.99),
        max_us: hist.max(),
        server_cpu,
        nats_cpu,
        client_cpu: client_cpu / f64::from(ticks.max(1)),
        ok: false,
    };
    step.ok = passes(&step);
    step
}

/// CPU seconds so far of `root` and every process under it, and of the
/// `nats-server` among them (the supervisor's `/stats` lists its own processes only).
pub fn tree_cpu(root: u32) -> (f64, f64) {
    let hz = observe::procfs::clock_ticks() as f64;
    let (mut all, mut nats) = (0.0, 0.0);
    let mut pids = vec![root];
    while let Some(pid) = pids.pop() {
        if let Ok(s) = observe::procfs::read_proc_stat(pid) {
            let cpu = (s.utime_ticks + s.stime_ticks) as f64 / hz;
            all += cpu;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim() == "nats-server" {
                nats += cpu;
            }
        }
        pids.extend(children_of(pid));
    }
    (all, nats)
}

/// Children of `pid` started from any of its threads.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// The steps as a Markdown table.
pub fn table(steps: &[Step]) -> String {
    let mut t = String::from(
        "| offered sprites/s | every | published (/s) | received | p50 | p99 | max | errors send / poll | server CPU (its nats-server) | clients' CPU | ok |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for s in steps {
        let _ = writeln!(
            t,
            "| {} | {:.2} s | {} ({}/s) | {} | {} | {} | {} | {} / {} | {:.0} % ({:.0} %) | {:.0} % | {} |",
            count(s.rate),
            s.every,
            count(s.published as f64),
            count(s.published_per_s()),
            count(s.received as f64),
            ms(s.p50_us),
            ms(s.p99_us),
            ms(s.max_us),
            s.send_errors,
            s.poll_errors,
            s.server_cpu,
            s.nats_cpu,
            s.client_cpu,
            met(s.ok)
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Step {
        Step {
            rate: 100.0,
            secs: 10.0,
            published: 1_000,
            received: 1_000,
            max_us: 20_000,
            ..Default::default()
        }
    }

    #[test]
    fn a_step_passes_only_when_every_rule_holds() {
        assert!(passes(&good()));
        let slow = Step {
            published: 940,
            received: 940,
            ..good()
        };
        assert!(!passes(&slow), "under 95 % of the offered rate");
        let lost = Step {
            received: 999,
            ..good()
        };
        assert!(!passes(&lost), "a sprite not received");
        let twice = Step {
            received: 1_001,
            ..good()
        };
        assert!(!passes(&twice), "a sprite received twice");
        let late = Step {
            max_us: 1_000_001,
            ..good()
        };
        assert!(!passes(&late), "a sprite later than 1 s");
        let refused = Step {
            send_errors: 1,
            ..good()
        };
        assert!(!passes(&refused), "an error");
    }
}
