//! One second of a process's life: [`Sample`] and the [`Sampler`] that makes it from
//! [`ProcessMetrics`] counters and `/proc`.
//!
//! Rates are deltas of cumulative counters divided by the measured interval, so a late
//! sampler gives right rates, not inflated ones. This module does not schedule itself
//! (see `monitor`) and writes nothing.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::kernel::SocketMemory;
use crate::metrics::{HistogramSnapshot, ProcessMetrics};
use crate::procfs;

/// Machine-wide figures (all processes), from `/proc`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineSample {
    /// Online CPUs.
    pub cpus: u64,
    /// Busy CPU in cores (0..=cpus): user + sys + the rest that is not idle.
    pub cpu_total: f64,
    /// User CPU in cores.
    pub cpu_user: f64,
    /// System CPU (with irq and softirq) in cores.
    pub cpu_sys: f64,
    pub mem_total_bytes: u64,
    pub mem_used_bytes: u64,
    pub mem_free_bytes: u64,
    pub mem_cache_bytes: u64,
    pub mem_available_bytes: u64,
    /// Sockets of any kind in use.
    pub sockets_used: u64,
    /// TCP sockets in use (v4 + v6).
    pub tcp_inuse: u64,
    pub tcp_orphan: u64,
    pub tcp_tw: u64,
    pub tcp_alloc: u64,
    /// Kernel TCP buffer memory in pages (`mem` of `/proc/net/sockstat`).
    pub tcp_mem_pages: u64,
    /// The same in bytes.
    pub tcp_mem_bytes: u64,
    /// Socket slab caches in bytes (`/proc/slabinfo`; `None` when not readable).
    pub sock_slab_bytes: Option<u64>,
}

/// One process over the last interval (about a second). Rates are per second; CPU is in
/// cores (1.0 = one core busy all the time); latencies are microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Unix time of the sample, seconds.
    pub time: f64,
    /// Seconds since the monitor started.
    pub uptime_s: f64,
    pub pid: u32,
    /// Gateway event loops in this process.
    pub loops: usize,
    pub threads: u64,
    pub cpu_user: f64,
    pub cpu_sys: f64,
    pub rss_bytes: u64,
    /// RSS at the last sample without connections: what the process weighs idle.
    pub rss_idle_bytes: u64,
    /// (RSS − idle RSS) / connections: user-space memory per connection (0 without any).
    pub user_bytes_per_conn: f64,
    /// Kernel TCP buffer growth per TCP socket added since idle, machine-wide (0 until
    /// `kernel::MIN_SOCKETS_ADDED` sockets were added). With `slab_bytes_per_conn` it is the kernel memory per socket of
    /// [`crate::kernel`]; client sockets on the same box count too.
    pub kernel_bytes_per_conn: f64,
    /// Socket slab growth per TCP socket added since idle, machine-wide (0 when slabinfo
    /// is unreadable or too few sockets were added). See [`crate::kernel`].
    pub slab_bytes_per_conn: f64,
    pub connections: u64,
    pub connects_per_s: f64,
    pub closes_per_s: f64,
    pub messages_in_per_s: f64,
    /// Deliveries per second.
    pub messages_out_per_s: f64,
    pub bytes_out_per_s: f64,
    pub lag_avg_us: f64,
    pub lag_p50_us: u64,
    pub lag_p90_us: u64,
    pub lag_p99_us: u64,
    pub lag_max_us: u64,
    /// Lag ticks measured in the interval (about 100 per loop per second).
    pub lag_ticks: u64,
    pub queued_bytes: u64,
    /// Slow-consumer drops since start.
    pub slow_drops: u64,
    pub slow_drops_per_s: f64,
    pub latency_p50_us: u64,
    pub latency_p99_us: u64,
    pub latency_max_us: u64,
    /// Delivery batches measured in the interval.
    pub latency_batches: u64,
    /// Cumulative counters, for Prometheus.
    pub connects_total: u64,
    pub closes_total: u64,
    pub messages_in_total: u64,
    pub messages_out_total: u64,
    pub bytes_out_total: u64,
    pub cpu_user_seconds_total: f64,
    pub cpu_sys_seconds_total: f64,
    pub machine: MachineSample,
}

impl Sample {
    /// Set every per-interval figure (rates, CPU, lag, latency) to zero, keeping gauges
    /// and totals: for a sample whose interval was too short to mean anything.
    pub fn zero_rates(&mut self) {
        self.cpu_user = 0.0;
        self.cpu_sys = 0.0;
        self.connects_per_s = 0.0;
        self.closes_per_s = 0.0;
        self.messages_in_per_s = 0.0;
        self.messages_out_per_s = 0.0;
        self.bytes_out_per_s = 0.0;
        self.slow_drops_per_s = 0.0;
        self.lag_avg_us = 0.0;
        (
            self.lag_p50_us,
            self.lag_p90_us,
            self.lag_p99_us,
            self.lag_max_us,
            self.lag_ticks,
        ) = (0, 0, 0, 0, 0);
        (
            self.latency_p50_us,
            self.latency_p99_us,
            self.latency_max_us,
            self.latency_batches,
        ) = (0, 0, 0, 0);
        self.machine.cpu_total = 0.0;
        self.machine.cpu_user = 0.0;
        self.machine.cpu_sys = 0.0;
    }
}

/// Counter values at the previous sample.
struct Previous {
    at: Instant,
    utime: u64,
    stime: u64,
    cpu: procfs::CpuTimes,
    connects: u64,
    closes: u64,
    messages_in: u64,
    messages_out: u64,
    bytes_out: u64,
    slow_drops: u64,
    lag: HistogramSnapshot,
    latency: HistogramSnapshot,
}

/// Turns cumulative counters into one-second samples. One per process.
pub struct Sampler {
    metrics: std::sync::Arc<ProcessMetrics>,
    started: Instant,
    page: u64,
    ticks: f64,
    rss_idle: u64,
    /// Kernel socket memory at the last sample without connections (the per-socket baseline).
    socket_idle: SocketMemory,
    /// Whether `/proc/slabinfo` is read (see [`Sampler::without_slab`]).
    slab: bool,
    prev: Previous,
}

impl Sampler {
    /// Take the baseline now; the first [`Sampler::sample`] covers the time since.
    pub fn new(metrics: std::sync::Arc<ProcessMetrics>) -> Sampler {
        Sampler::start(metrics, true)
    }

    /// Samples without reading `/proc/slabinfo`: machine-wide figures that another
    /// process of the server reads already (a supervisor's child). Each read costs
    /// ~0.4 ms of kernel time under the slab allocator's global mutex, and 53
    /// gateways holding a million read it every second, each in turn. The socket
    /// slab then reads as unknown (`sock_slab_bytes` none, `slab_bytes_per_conn` 0),
    /// as where slabinfo is unreadable.
    pub fn without_slab(metrics: std::sync::Arc<ProcessMetrics>) -> Sampler {
        Sampler::start(metrics, false)
    }

    fn start(metrics: std::sync::Arc<ProcessMetrics>, slab: bool) -> Sampler {
        let page = procfs::page_size();
        let me = procfs::read_self().unwrap_or_default();
        let prev = Previous {
            at: Instant::now(),
            utime: me.utime_ticks,
            stime: me.stime_ticks,
            cpu: procfs::read_cpu_times().unwrap_or_default(),
            connects: metrics.sum(|l| &l.connects),
            closes: metrics.sum(|l| &l.closes),
            messages_in: metrics.sum(|l| &l.messages_in),
            messages_out: metrics.sum(|l| &l.messages_out),
            bytes_out: metrics.sum(|l| &l.bytes_out),
            slow_drops: metrics.sum(|l| &l.slow_drops),
            lag: metrics.lag_snapshot(),
            latency: metrics.latency_snapshot(),
        };
        metrics.take_lag_max();
        metrics.take_latency_max();
        Sampler {
            metrics,
            started: prev.at,
            page,
            ticks: procfs::clock_ticks() as f64,
            rss_idle: me.rss_pages * page,
            socket_idle: SocketMemory::from_readings(
                &procfs::read_sockstat().unwrap_or_default(),
                read_slab(slab).as_ref(),
            ),
            slab,
            prev,
        }
    }

    /// Measure the interval since the previous call.
    pub fn sample(&mut self) -> Sample {
        let now = Instant::now();
        let dt = now.duration_since(self.prev.at).as_secs_f64().max(1e-3);
        let m = &self.metrics;
        let me = procfs::read_self().unwrap_or_default();
        let cpu = procfs::read_cpu_times().unwrap_or_default();
        let mem = procfs::read_meminfo().unwrap_or_default();
        let ss = procfs::read_sockstat().unwrap_or_default();
        let slab = read_slab(self.slab);

        let connections = m.sum(|l| &l.connections);
        let rss = me.rss_pages * self.page;
        let socket_mem = SocketMemory::from_readings(&ss, slab.as_ref());
        if connections == 0 {
            self.rss_idle = rss;
            self.socket_idle = socket_mem;
        }
        let per_socket = socket_mem.per_socket_since(&self.socket_idle);
        let per_conn = |bytes: f64| {
            if connections == 0 {
                0.0
            } else {
                bytes / connections as f64
            }
        };

        let connects = m.sum(|l| &l.connects);
        let closes = m.sum(|l| &l.closes);
        let messages_in = m.sum(|l| &l.messages_in);
        let messages_out = m.sum(|l| &l.messages_out);
        let bytes_out = m.sum(|l| &l.bytes_out);
        let slow_drops = m.sum(|l| &l.slow_drops);
        let lag_all = m.lag_snapshot();
        let latency_all = m.latency_snapshot();
        let lag = lag_all.since(&self.prev.lag);
        let latency = latency_all.since(&self.prev.latency);
        // Quantiles are bucket upper edges; the max is exact, so cap them by it.
        let lag_max = m.take_lag_max();
        let latency_max = m.take_latency_max();
        let capped = |q: u64, max: u64| if max > 0 { q.min(max) } else { q };
        let rate = |now: u64, before: u64| now.saturating_sub(before) as f64 / dt;
        let cores = |now: u64, before: u64| now.saturating_sub(before) as f64 / self.ticks / dt;

        let cpu_dt = cpu.total.saturating_sub(self.prev.cpu.total).max(1) as f64;
        let machine_share = |now: u64, before: u64| {
            now.saturating_sub(before) as f64 / cpu_dt * cpu.cpus.max(1) as f64
        };
        let tcp_mem_bytes = ss.tcp_mem_pages * self.page;
        let machine = MachineSample {
            cpus: cpu.cpus,
            cpu_total: machine_share(
                cpu.total - cpu.idle,
                self.prev.cpu.total - self.prev.cpu.idle,
            ),
            cpu_user: machine_share(cpu.user, self.prev.cpu.user),
            cpu_sys: machine_share(cpu.sys, self.prev.cpu.sys),
            mem_total_bytes: mem.total,
            mem_used_bytes: mem.used,
            mem_free_bytes: mem.free,
            mem_cache_bytes: mem.cache,
            mem_available_bytes: mem.available,
            sockets_used: ss.sockets_used,
            tcp_inuse: ss.tcp_inuse,
            tcp_orphan: ss.tcp_orphan,
            tcp_tw: ss.tcp_tw,
            tcp_alloc: ss.tcp_alloc,
            tcp_mem_pages: ss.tcp_mem_pages,
            tcp_mem_bytes,
            sock_slab_bytes: slab.map(|s| s.socket_bytes),
        };
        let sample = Sample {
            time: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            uptime_s: now.duration_since(self.started).as_secs_f64(),
            pid: std::process::id(),
            loops: m.loops.len(),
            threads: me.threads,
            cpu_user: cores(me.utime_ticks, self.prev.utime),
            cpu_sys: cores(me.stime_ticks, self.prev.stime),
            rss_bytes: rss,
            rss_idle_bytes: self.rss_idle,
            user_bytes_per_conn: per_conn(rss.saturating_sub(self.rss_idle) as f64),
            kernel_bytes_per_conn: per_socket.map_or(0.0, |p| p.buffers),
            slab_bytes_per_conn: per_socket.and_then(|p| p.slab).unwrap_or(0.0),
            connections,
            connects_per_s: rate(connects, self.prev.connects),
            closes_per_s: rate(closes, self.prev.closes),
            messages_in_per_s: rate(messages_in, self.prev.messages_in),
            messages_out_per_s: rate(messages_out, self.prev.messages_out),
            bytes_out_per_s: rate(bytes_out, self.prev.bytes_out),
            lag_avg_us: lag.mean_us(),
            lag_p50_us: capped(lag.quantile_us(0.5), lag_max),
            lag_p90_us: capped(lag.quantile_us(0.9), lag_max),
            lag_p99_us: capped(lag.quantile_us(0.99), lag_max),
            lag_max_us: lag_max,
            lag_ticks: lag.count,
            queued_bytes: m.sum(|l| &l.queued_bytes),
            slow_drops,
            slow_drops_per_s: rate(slow_drops, self.prev.slow_drops),
            latency_p50_us: capped(latency.quantile_us(0.5), latency_max),
            latency_p99_us: capped(latency.quantile_us(0.99), latency_max),
            latency_max_us: latency_max,
            latency_batches: latency.count,
            connects_total: connects,
            closes_total: closes,
            messages_in_total: messages_in,
            messages_out_total: messages_out,
            bytes_out_total: bytes_out,
            cpu_user_seconds_total: me.utime_ticks as f64 / self.ticks,
            cpu_sys_seconds_total: me.stime_ticks as f64 / self.ticks,
            machine,
        };
        self.prev = Previous {
            at: now,
            utime: me.utime_ticks,
            stime: me.stime_ticks,
            cpu,
            connects,
            closes,
            messages_in,
            messages_out,
            bytes_out,
            slow_drops,
            lag: lag_all,
            latency: latency_all,
        };
        sample
    }
}

/// `/proc/slabinfo` when `read`, else unknown.
fn read_slab(read: bool) -> Option<procfs::SlabStats> {
    if read {
        procfs::read_slabinfo()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::Duration;

    #[test]
    fn a_sampler_without_slab_leaves_the_socket_slab_unknown() {
        let m = ProcessMetrics::new(1);
        let mut with = Sampler::new(m.clone());
        let mut without = Sampler::without_slab(m.clone());
        let (a, b) = (with.sample(), without.sample());
        assert_eq!(
            a.machine.sock_slab_bytes.is_some(),
            procfs::read_slabinfo().is_some(),
            "read where readable"
        );
        assert_eq!(b.machine.sock_slab_bytes, None);
        assert_eq!(b.slab_bytes_per_conn, 0.0);
        assert!(b.machine.cpus > 0, "the other machine figures are read");
    }

    #[test]
    fn rates_and_quantiles_come_from_the_interval() {
        let m = ProcessMetrics::new(2);
        m.loops[0].connects.fetch_add(5, Relaxed);
        m.loops[0].lag().record(Duration::from_millis(30)); // before the baseline: not counted
        let mut s = Sampler::new(m.clone());
        m.loops[0].connections.fetch_add(3, Relaxed);
        m.loops[1].connections.fetch_add(2, Relaxed);
        m.loops[1].connects.fetch_add(5, Relaxed);
        m.loops[1].messages_out.fetch_add(1000, Relaxed);
        for _ in 0..9 {
            m.loops[0].record_lag(Duration::from_micros(100));
        }
        m.loops[1].record_lag(Duration::from_millis(5));
        m.loops[1].record_delivery_latency(Duration::from_micros(700));
        std::thread::sleep(Duration::from_millis(50));
        let a = s.sample();
        assert_eq!(a.connections, 5);
        assert_eq!(a.connects_total, 10);
        assert_eq!(
            a.lag_ticks, 10,
            "the lag recorded before the baseline is excluded"
        );
        assert!((a.lag_avg_us - 590.0).abs() < 1e-9, "{}", a.lag_avg_us);
        assert_eq!(a.lag_max_us, 5000);
        assert!((100..=111).contains(&a.lag_p90_us), "p90 {}", a.lag_p90_us);
        assert!((700..=767).contains(&a.latency_p50_us));
        // 5 connects and 1000 deliveries over the same interval, whatever its length.
        assert!(a.connects_per_s > 0.0);
        assert!((a.messages_out_per_s / a.connects_per_s - 200.0).abs() < 1e-6);
        assert!(a.rss_bytes > 0 && a.machine.mem_total_bytes > 0 && a.pid == std::process::id());
        let b = s.sample();
        assert_eq!((b.lag_ticks, b.lag_max_us, b.connects_per_s), (0, 0, 0.0));
    }
}
