//! The life of one flood process's run, whatever the protocol: the ramp (a token
//! bucket at --rate, at most --max-inflight attempts waiting for a response head), the
//! hold, the close (all at once or gradual), one [`Sample`] per second and the final
//! [`ProcSummary`]. A [`Backend`] starts attempts, moves bytes and counts into a
//! [`Tally`]: HTTP/1.1 (and TLS) on mio in `engine`, HTTP/2 on tokio in `h2`.

use super::plan::{CloseMode, Plan, BURST};
use super::stats::{hist_pairs, new_hist, FailCounts, ProcSummary, ResumeCounts, Sample};
use host::sys;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Running totals of this process.
#[derive(Clone, Copy, Default)]
pub struct Counts {
    pub attempted: u64,
    pub opened: u64,
    pub open: u64,
    pub peak_open: u64,
    pub closed: u64,
    pub messages: u64,
    pub bytes: u64,
    pub fail: FailCounts,
    pub resume: ResumeCounts,
}

/// What a backend counts into.
pub struct Tally {
    pub counts: Counts,
    /// Latency stamps since the last sample, and over the whole run.
    pub hist_tick: hdrhistogram::Histogram<u64>,
    pub hist_all: hdrhistogram::Histogram<u64>,
    /// Attempts waiting for their response head.
    pub inflight: usize,
}

impl Tally {
    pub fn new() -> Tally {
        Tally {
            counts: Counts::default(),
            hist_tick: new_hist(),
            hist_all: new_hist(),
            inflight: 0,
        }
    }

    /// A stamp received `lat` microseconds after it was taken.
    pub fn latency(&mut self, lat: u64) {
        self.hist_tick.saturating_record(lat);
        self.hist_all.saturating_record(lat);
    }

    /// An attempt got its good response head: it is open now.
    pub fn opened(&mut self) {
        let c = &mut self.counts;
        c.open += 1;
        c.opened += 1;
        c.peak_open = c.peak_open.max(c.open);
        self.inflight -= 1;
    }

    /// A reconnect attempt got its good response head: open again.
    pub fn reopened(&mut self) {
        let c = &mut self.counts;
        c.open += 1;
        c.resume.reconnects += 1;
        c.peak_open = c.peak_open.max(c.open);
        self.inflight -= 1;
    }

    /// An open connection (or stream) ended.
    pub fn closed(&mut self) {
        self.counts.open -= 1;
        self.counts.closed += 1;
    }
}

/// One protocol's way of opening, moving and closing connections.
pub trait Backend {
    /// Start attempt number `plan.offset + local`; failures are counted, not returned.
    fn start(&mut self, local: u64);
    /// Wait up to `wait` for IO, and handle what came.
    fn turn(&mut self, wait: Duration) -> io::Result<()>;
    /// Fail attempts whose response head is overdue.
    fn expire(&mut self, now: Instant);
    /// The run is ending: cancel attempts still waiting for a response head.
    fn drop_pending(&mut self);
    /// Close up to `n` open connections, scanning from `cursor`; returns the new cursor.
    fn close_some(&mut self, n: u64, cursor: usize) -> usize;
    /// The run is closing: drop scheduled reconnects and schedule no more.
    fn stop_reconnects(&mut self) {}
    /// Connections waiting to reconnect (their backoff not over yet).
    fn reconnects_waiting(&self) -> usize {
        0
    }
    /// Borrow the counters.
    fn with_tally<R>(&mut self, f: impl FnOnce(&mut Tally) -> R) -> R;
}

/// Run `plan` on `b` to its end; `on_sample` gets one [`Sample`] per second.
pub fn run(
    plan: &Plan,
    b: &mut impl Backend,
    stop: &AtomicBool,
    on_sample: &mut dyn FnMut(Sample),
) -> ProcSummary {
    let start = Instant::now();
    let mut cpu = sys::CpuMeter::new();
    let rss_base = sys::rss_bytes();
    let mut sum = ProcSummary {
        rss_base,
        rss_at_peak: rss_base,
        ..Default::default()
    };
    let mut next: u64 = 0;
    let mut tokens = 1.0f64;
    let mut last_turn = Instant::now();
    let mut next_tick = start + Duration::from_secs(1);
    let mut hold_from: Option<Instant> = None;
    let mut closing: Option<(Instant, u64, usize)> = None; // (start, open then, cursor)
    let mut first_connect: Option<Instant> = None;
    let mut last_open = start;
    loop {
        let now = Instant::now();
        let open_now = b.with_tally(|t| t.counts.open);
        let stopping = stop.load(Ordering::Relaxed) || sys::interrupted();
        if closing.is_none() && (stopping || now - start >= plan.max_time) {
            // An interrupt closes at once: the user wants the summary now.
            let mode = if stopping { CloseMode::All } else { plan.close };
            closing = Some((now, open_now, 0));
            next = plan.count;
            b.stop_reconnects();
            b.drop_pending();
            if mode == CloseMode::All {
                b.close_some(u64::MAX, 0);
            }
        }
        // Ramp with a token bucket.
        if closing.is_none() && next < plan.count {
            let dt = now.duration_since(last_turn).as_secs_f64();
            let budget = if plan.rate > 0.0 {
                tokens = (tokens + plan.rate * dt).min((plan.rate / 20.0).max(1.0));
                tokens as u32
            } else {
                BURST
            };
            let mut started = 0;
            while started < budget
                && next < plan.count
                && b.with_tally(|t| t.inflight) < plan.max_inflight
            {
                first_connect.get_or_insert(now);
                b.start(next);
                next += 1;
                started += 1;
            }
            if plan.rate > 0.0 {
                tokens -= f64::from(started);
            }
        }
        last_turn = now;
        let (open_now, inflight_now) = b.with_tally(|t| (t.counts.open, t.inflight));
        let ramp_done = next >= plan.count && inflight_now == 0;
        if ramp_done && closing.is_none() {
            let from = *hold_from.get_or_insert(now);
            let hold_over = plan.hold.is_some_and(|h| now - from >= h);
            if hold_over || (open_now == 0 && b.reconnects_waiting() == 0) {
                // Reconnect attempts still under way end here too.
                b.stop_reconnects();
                b.drop_pending();
                let open_now = b.with_tally(|t| t.counts.open);
                closing = Some((now, open_now, 0));
                if plan.close == CloseMode::All || open_now == 0 {
                    b.close_some(u64::MAX, 0);
                }
            }
        }
        if let Some((since, open_then, cursor)) = closing.as_mut() {
            let open_now = b.with_tally(|t| t.counts.open);
            if plan.close == CloseMode::Gradual && open_now > 0 {
                let frac = (now.duration_since(*since).as_secs_f64() / plan.close_secs.max(0.001))
                    .min(1.0);
                let want_closed = (*open_then as f64 * frac).ceil() as u64;
                let closed_so_far = open_then.saturating_sub(open_now);
                *cursor = b.close_some(want_closed.saturating_sub(closed_so_far), *cursor);
            }
            if b.with_tally(|t| t.counts.open == 0 && t.inflight == 0) {
                break;
            }
        }
        // Sleep until the next token, tick, or close step; never long.
        let wait = if closing.is_some()
            || (next < plan.count && b.with_tally(|t| t.inflight) < plan.max_inflight)
        {
            Duration::from_millis(2)
        } else {
            next_tick
                .saturating_duration_since(now)
                .min(Duration::from_millis(50))
        };
        let opened_before = b.with_tally(|t| t.counts.opened);
        if let Err(e) = b.turn(wait) {
            if e.kind() != io::ErrorKind::Interrupted {
                tracing::error!("flood poll failed: {e}");
                break;
            }
        }
        if b.with_tally(|t| t.counts.opened) > opened_before {
            last_open = Instant::now();
        }
        b.expire(Instant::now());
        if Instant::now() >= next_tick {
            next_tick += Duration::from_secs(1);
            let s = b.with_tally(|t| sample(start, t, &mut cpu));
            if s.open >= sum.open_at_rss_peak && s.open > 0 {
                sum.open_at_rss_peak = s.open;
                sum.rss_at_peak = s.rss;
            }
            on_sample(s);
        }
    }
    let last = b.with_tally(|t| sample(start, t, &mut cpu));
    on_sample(last);
    b.with_tally(|t| {
        let c = &t.counts;
        sum.attempted = c.attempted;
        sum.opened = c.opened;
        sum.peak_open = c.peak_open;
        sum.failed = c.fail.total();
        sum.fail = c.fail;
        sum.closed = c.closed;
        sum.messages = c.messages;
        sum.bytes = c.bytes;
        sum.hist = hist_pairs(&t.hist_all);
        sum.resume = c.resume;
    });
    sum.first_connect_s = first_connect.map_or(0.0, |t| (t - start).as_secs_f64());
    sum.last_open_s = (last_open - start).as_secs_f64();
    sum.elapsed_s = start.elapsed().as_secs_f64();
    sum
}

fn sample(start: Instant, t: &mut Tally, cpu: &mut sys::CpuMeter) -> Sample {
    let (u, s) = cpu.sample();
    let c = &t.counts;
    let out = Sample {
        t: start.elapsed().as_secs_f64(),
        attempted: c.attempted,
        open: c.open,
        failed: c.fail.total(),
        closed: c.closed,
        messages: c.messages,
        bytes: c.bytes,
        rss: sys::rss_bytes(),
        cpu_user: u,
        cpu_sys: s,
        fail: c.fail,
        hist: hist_pairs(&t.hist_tick),
    };
    t.hist_tick.reset();
    out
}
