//! Live counters and gauges that the gateway's event loops write and the monitor reads.
//!
//! Every field is an atomic written with `Relaxed` ordering: each loop owns one
//! [`LoopMetrics`], so there is no contention and no lock on the hot path. Readers (the
//! sampler thread, once a second) see values that may be a few nanoseconds stale, which
//! is fine for statistics. This module does no IO and computes no rates; see
//! `sample` and `monitor` for that.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// Values below this many microseconds get one bucket each (exact).
const LINEAR_LIMIT: u64 = 8;
/// Sub-buckets per power of two above [`LINEAR_LIMIT`]: 8 gives about 12 % resolution,
/// enough to tell a 1 ms lag from a 1.2 ms one.
const SUB_BITS: u32 = 3;
/// Largest power of two tracked (2^36 µs ≈ 19 hours); larger values land in the last bucket.
const MAX_EXPONENT: u32 = 36;
/// Number of buckets of a [`Histogram`].
pub const BUCKETS: usize =
    LINEAR_LIMIT as usize + ((MAX_EXPONENT - SUB_BITS + 1) as usize) * (1 << SUB_BITS);

/// A lock-free histogram of microsecond values in log-scale buckets.
///
/// Counts only ever grow (cumulative), so any number of readers can take snapshots and
/// subtract the previous one to get an interval's distribution. The one exception is
/// [`Histogram::take_max`], which the single sampler uses to get the per-interval maximum.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_us: AtomicU64,
    max_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
            max_us: AtomicU64::new(0),
        }
    }
}

/// The bucket index of a value in microseconds.
pub fn bucket_of(us: u64) -> usize {
    if us < LINEAR_LIMIT {
        return us as usize;
    }
    let exp = 63 - us.leading_zeros(); // >= SUB_BITS because us >= 8
    if exp > MAX_EXPONENT {
        return BUCKETS - 1;
    }
    let sub = (us >> (exp - SUB_BITS)) & ((1 << SUB_BITS) - 1);
    LINEAR_LIMIT as usize + ((exp - SUB_BITS) as usize) * (1 << SUB_BITS) + sub as usize
}

/// The smallest value (µs) that falls in bucket `i`.
pub fn bucket_low(i: usize) -> u64 {
    if i < LINEAR_LIMIT as usize {
        return i as u64;
    }
    let k = i - LINEAR_LIMIT as usize;
    let exp = (k >> SUB_BITS) as u32 + SUB_BITS;
    let sub = (k & ((1 << SUB_BITS) - 1)) as u64;
    (1u64 << exp) + (sub << (exp - SUB_BITS))
}

/// The largest value (µs) that falls in bucket `i` (inclusive).
pub fn bucket_high(i: usize) -> u64 {
    if i + 1 >= BUCKETS {
        return u64::MAX;
    }
    bucket_low(i + 1) - 1
}

impl Histogram {
    /// Record one value. Lock-free: three `fetch_add`s and a `fetch_max`.
    pub fn record(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(us)].fetch_add(1, Relaxed);
        self.count.fetch_add(1, Relaxed);
        self.sum_us.fetch_add(us, Relaxed);
        self.max_us.fetch_max(us, Relaxed);
    }

    /// A copy of the cumulative counts (not the max; see [`Histogram::take_max`]).
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: self.buckets.iter().map(|b| b.load(Relaxed)).collect(),
            count: self.count.load(Relaxed),
            sum_us: self.sum_us.load(Relaxed),
        }
    }

    /// The largest value since the previous call, resetting it. Only the one sampler of
    /// the process calls this; a second caller would steal the first one's maximum.
    pub fn take_max(&self) -> u64 {
        self.max_us.swap(0, Relaxed)
    }
}

/// Cumulative counts copied out of a [`Histogram`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// Count per bucket (see [`bucket_low`]); empty means "all zero".
    pub buckets: Vec<u64>,
    /// Number of values recorded.
    pub count: u64,
    /// Sum of the values in microseconds.
    pub sum_us: u64,
}

impl HistogramSnapshot {
    /// Add another snapshot's counts into this one (to merge loops).
    pub fn add(&mut self, other: &HistogramSnapshot) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum_us += other.sum_us;
    }

    /// The counts recorded since `earlier` (saturating, in case of a reset).
    pub fn since(&self, earlier: &HistogramSnapshot) -> HistogramSnapshot {
        let buckets = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, n)| n.saturating_sub(earlier.buckets.get(i).copied().unwrap_or(0)))
            .collect();
        HistogramSnapshot {
            buckets,
            count: self.count.saturating_sub(earlier.count),
            sum_us: self.sum_us.saturating_sub(earlier.sum_us),
        }
    }

    /// Mean in microseconds (0 when empty).
    pub fn mean_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_us as f64 / self.count as f64
        }
    }

    /// The value at quantile `q` (0..=1) in microseconds: the upper edge of the bucket
    /// holding it, so the answer never understates (0 when empty).
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                // The last bucket is open-ended: report its lower edge rather than u64::MAX.
                return if i + 1 >= BUCKETS {
                    bucket_low(i)
                } else {
                    bucket_high(i)
                };
            }
        }
        0
    }
}

/// The statistics of one gateway event loop.
#[derive(Default)]
pub struct LoopMetrics {
    /// Gauge: open client connections owned by this loop.
    pub connections: AtomicU64,
    /// Counter: accepted connections.
    pub connects: AtomicU64,
    /// Counter: closed connections.
    pub closes: AtomicU64,
    /// Counter: messages published through this loop's API requests.
    pub messages_in: AtomicU64,
    /// Counter: deliveries queued to connections.
    pub messages_out: AtomicU64,
    /// Counter: bytes written to client sockets.
    pub bytes_out: AtomicU64,
    /// Gauge: output bytes waiting on slow sockets.
    pub queued_bytes: AtomicU64,
    /// Counter: deliveries dropped or connections cut by the slow-consumer policy.
    pub slow_drops: AtomicU64,
    /// Counter: refused credentials (tokens, API keys, WebSocket token refreshes).
    pub auth_failures: AtomicU64,
    /// Counter: sends submitted through io_uring (`--io-uring`), one per connection
    /// per batch.
    pub batched_sends: AtomicU64,
    /// Gauge: 1 while the loop's listener is in the port's listening group (a full
    /// gateway process sharing the port leaves it), else 0.
    pub listening: AtomicU64,
    lag: Histogram,
    delivery_latency: Histogram,
}

impl LoopMetrics {
    /// How late the loop's 10 ms tick fired (the event-loop lag).
    pub fn record_lag(&self, lag: Duration) {
        self.lag.record(lag);
    }

    /// Publish-received → written-to-socket time, recorded once per delivery batch.
    pub fn record_delivery_latency(&self, latency: Duration) {
        self.delivery_latency.record(latency);
    }

    /// The loop-lag histogram.
    pub fn lag(&self) -> &Histogram {
        &self.lag
    }

    /// The delivery-latency histogram.
    pub fn delivery_latency(&self) -> &Histogram {
        &self.delivery_latency
    }
}

/// The metrics of one process: one [`LoopMetrics`] per gateway loop.
pub struct ProcessMetrics {
    /// One entry per event loop, in loop order.
    pub loops: Vec<Arc<LoopMetrics>>,
}

impl ProcessMetrics {
    /// Metrics for a process with `loops` event loops, all zero.
    pub fn new(loops: usize) -> Arc<ProcessMetrics> {
        Arc::new(ProcessMetrics {
            loops: (0..loops)
                .map(|_| Arc::new(LoopMetrics::default()))
                .collect(),
        })
    }

    /// Sum of one field over all loops.
    pub fn sum(&self, field: impl Fn(&LoopMetrics) -> &AtomicU64) -> u64 {
        self.loops.iter().map(|l| field(l).load(Relaxed)).sum()
    }

    /// The merged cumulative lag histogram of all loops.
    pub fn lag_snapshot(&self) -> HistogramSnapshot {
        let mut s = HistogramSnapshot::default();
        for l in &self.loops {
            s.add(&l.lag.snapshot());
        }
        s
    }

    /// The merged cumulative delivery-latency histogram of all loops.
    pub fn latency_snapshot(&self) -> HistogramSnapshot {
        let mut s = HistogramSnapshot::default();
        for l in &self.loops {
            s.add(&l.delivery_latency.snapshot());
        }
        s
    }

    /// The largest lag over all loops since the previous call (µs), resetting it.
    pub fn take_lag_max(&self) -> u64 {
        self.loops
            .iter()
            .map(|l| l.lag.take_max())
            .max()
            .unwrap_or(0)
    }

    /// The largest delivery latency over all loops since the previous call (µs), resetting it.
    pub fn take_latency_max(&self) -> u64 {
        self.loops
            .iter()
            .map(|l| l.delivery_latency.take_max())
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_cover_their_values() {
        for i in 0..BUCKETS - 1 {
            assert_eq!(
                bucket_high(i) + 1,
                bucket_low(i + 1),
                "gap after bucket {i}"
            );
            assert_eq!(bucket_of(bucket_low(i)), i);
            assert_eq!(bucket_of(bucket_high(i)), i);
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        // Resolution: a bucket is at most 1/8 of its lower edge wide above the linear part.
        for i in LINEAR_LIMIT as usize..BUCKETS - 1 {
            let w = bucket_high(i) - bucket_low(i) + 1;
            assert!(w * 8 <= bucket_low(i), "bucket {i} too wide: {w}");
        }
    }

    #[test]
    fn quantiles_of_a_known_distribution() {
        let h = Histogram::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.snapshot();
        assert_eq!(s.count, 1000);
        assert_eq!(s.sum_us, 500_500);
        assert!((s.mean_us() - 500.5).abs() < 1e-9);
        let p50 = s.quantile_us(0.5);
        assert!((500..=563).contains(&p50), "p50 {p50}");
        let p90 = s.quantile_us(0.9);
        assert!((900..=1023).contains(&p90), "p90 {p90}");
        assert_eq!(h.take_max(), 1000);
        assert_eq!(h.take_max(), 0, "take_max resets");
    }

    #[test]
    fn interval_is_the_difference_of_snapshots() {
        let m = ProcessMetrics::new(2);
        m.loops[0].record_lag(Duration::from_millis(1));
        let before = m.lag_snapshot();
        m.loops[1].record_lag(Duration::from_millis(40));
        m.loops[0].record_lag(Duration::from_millis(40));
        let d = m.lag_snapshot().since(&before);
        assert_eq!(d.count, 2);
        assert!(d.quantile_us(0.5) >= 40_000);
        assert_eq!(m.take_lag_max(), 40_000);
        m.loops[0].connections.fetch_add(3, Relaxed);
        m.loops[1].connections.fetch_add(4, Relaxed);
        assert_eq!(m.sum(|l| &l.connections), 7);
    }
}
