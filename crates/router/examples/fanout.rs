//! Measures the router at friends-graph scale (issue 3): index build time and
//! bytes per directed edge from a store, presence memory with every user online,
//! publish fan-out planning time for the highest-degree subject, and the cost of
//! live changes: the worst single `subscribe` / `unsubscribe` over [`CHURN`]
//! changes (a stripe fold or split included), and bytes per edge after them.
//!
//! `cargo run --release -p router --example fanout -- sqlite:/tmp/ba.db [CHURN]`
//! (load the store first with `myriad friends load`). Prints; asserts nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use router::{ConnRef, Message, Reach, Router, RouterConfig, SubscriptionIndex};

/// Publishes timed after the first one, for the min, median and max.
const REPEATS: usize = 1001;
/// Live index changes timed one by one (half removals of existing edges, half
/// new edges), unless the second argument says otherwise.
const CHURN: usize = 2_000_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .ok_or("usage: fanout STORE_URL [CHURN]")?;
    let churn: usize = match std::env::args().nth(2) {
        Some(n) => n.parse()?,
        None => CHURN,
    };
    let mut store = store::open(&url)?;

    let t = Instant::now();
    let count = store.edge_count()?;
    let mut b = router::IndexBuilder::with_capacity(count as usize);
    let mut max_id = 0u64;
    store.for_each_edge(&mut |subscriber, subject| {
        max_id = max_id.max(subscriber).max(subject);
        b.push(subscriber, subject);
    })?;
    let streamed = t.elapsed();
    let index: SubscriptionIndex = b.build();
    let built = t.elapsed();
    let bytes = index.memory_bytes();
    println!(
        "index: {} directed edges in {} stripes, read from store {:.2} s, built {:.2} s total, \
         {} bytes = {:.2} B/edge",
        index.edge_count(),
        index.stripe_count(),
        streamed.as_secs_f64(),
        built.as_secs_f64(),
        bytes,
        bytes as f64 / index.edge_count().max(1) as f64
    );
    let (top, degree) = index.max_degree_subject().ok_or("empty graph")?;
    println!("highest degree: subject {top} with {degree} subscribers");

    let mut r = Router::new(RouterConfig::default(), index);
    let t = Instant::now();
    for user in 1..=max_id {
        r.handle_login(
            user,
            ConnRef {
                loop_id: (user % 2) as u16,
                token: user as u32,
            },
        );
    }
    println!(
        "presence: {} users online in {:.2} s, {} bytes = {:.1} B/user",
        max_id,
        t.elapsed().as_secs_f64(),
        r.presence_bytes(),
        r.presence_bytes() as f64 / max_id as f64
    );

    let now = Instant::now();
    let mut sink = 0u64;
    let mut publish = |r: &mut Router| {
        let msg = Arc::new(Message::to_subject(
            top,
            bytes::Bytes::from_static(b"hello"),
        ));
        let t = Instant::now();
        let counts = r.handle_publish(&msg, &Reach::Followers, now, &mut |d| {
            sink = sink.wrapping_add(u64::from(d.conn.token) ^ d.seq)
        });
        (t.elapsed(), counts)
    };
    let (first, counts) = publish(&mut r);
    println!(
        "fan-out to subject {top}: {} connections, {} users; first publish (allocates rings) {:.1} µs",
        counts.connections,
        counts.users,
        first.as_secs_f64() * 1e6
    );
    let mut times: Vec<Duration> = (0..REPEATS).map(|_| publish(&mut r).0).collect();
    times.sort_unstable();
    println!(
        "steady publish over {REPEATS}: min {:.1} µs, median {:.1} µs, max {:.1} µs ({:.1} ns per delivery at the median)",
        times[0].as_secs_f64() * 1e6,
        times[REPEATS / 2].as_secs_f64() * 1e6,
        times[REPEATS - 1].as_secs_f64() * 1e6,
        times[REPEATS / 2].as_secs_f64() * 1e9 / f64::from(counts.connections.max(1))
    );
    println!(
        "presence + history after publishes: {} bytes (checksum {sink})",
        r.presence_bytes()
    );

    // Live changes: one new follower of the top subject through store and index,
    // then a forced compaction (the pause a router takes every ~base/16 changes).
    let newcomer = max_id + 1;
    // The first write after open creates the WAL / prepares statements: warm up.
    store.add(&[(newcomer, top)])?;
    store.remove(&[(newcomer, top)])?;
    let t = Instant::now();
    store.add(&[(newcomer, top)])?;
    let store_add = t.elapsed();
    let t = Instant::now();
    r.subscribe(newcomer, top);
    let index_add = t.elapsed();
    let t = Instant::now();
    store.remove(&[(newcomer, top)])?;
    let store_remove = t.elapsed();
    r.unsubscribe(newcomer, top);
    println!(
        "live change on subject {top}: store add {:.0} µs, index add {:.1} µs, store remove {:.0} µs",
        store_add.as_secs_f64() * 1e6,
        index_add.as_secs_f64() * 1e6,
        store_remove.as_secs_f64() * 1e6,
    );

    churn_index(&mut r, max_id, churn)?;
    let t = Instant::now();
    let mut index = r.index().clone();
    let cloned = t.elapsed();
    let t = Instant::now();
    index.compact();
    println!(
        "explicit full compact() after the churn: {:.3} s (clone {:.2} s), {:.2} B/edge after",
        t.elapsed().as_secs_f64(),
        cloned.as_secs_f64(),
        index.memory_bytes() as f64 / index.edge_count().max(1) as f64
    );
    Ok(())
}

/// CPU time this thread has run: unlike the wall clock it does not count time the
/// thread sat preempted on this shared 2-core machine.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(
        rc, 0,
        "CLOCK_THREAD_CPUTIME_ID is always available on Linux"
    );
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Steal ticks of all CPUs (time the hypervisor ran something else), 0 if unknown.
fn steal_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu = stat.lines().next().unwrap_or_default();
    cpu.split_whitespace()
        .nth(8)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0)
}

/// The same number of timed calls, read-only (`contains`): the latency a call
/// that does no real work shows on this machine, to read the churn maxima against.
fn noise_floor(r: &Router, max_id: u64, calls: usize) {
    let mut rng = XorShift(0x5eed);
    let (mut max, mut cpu_max, mut over) = (Duration::ZERO, Duration::ZERO, 0usize);
    for _ in 0..calls {
        let (u, s) = (1 + rng.below(max_id), 1 + rng.below(max_id));
        let (c, t) = (thread_cpu(), Instant::now());
        std::hint::black_box(r.index().contains(u, s));
        let (t, c) = (t.elapsed(), thread_cpu() - c);
        max = max.max(t);
        cpu_max = cpu_max.max(c);
        over += usize::from(t > Duration::from_millis(1));
    }
    println!(
        "  noise floor, {calls} read-only contains() calls timed the same way: max {:.1} µs wall, \
         {:.1} µs thread CPU; over 1 ms: {over}",
        max.as_secs_f64() * 1e6,
        cpu_max.as_secs_f64() * 1e6
    );
}

/// xorshift64: a deterministic workload without a dependency.
struct XorShift(u64);
impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Applies `changes` live changes through the router (as the gateway does under
/// its lock) and prints the latency distribution of single calls and the memory
/// before and after. Picking the edges (and the `subscribers` lookup that finds
/// an existing one to remove) is outside the timed region.
fn churn_index(
    r: &mut Router,
    max_id: u64,
    changes: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let before = r.index().memory_bytes() as f64 / r.index().edge_count().max(1) as f64;
    let (_, _, folds_before) = r.index().counters();
    let stripes_before = r.index().stripe_count();
    let mut rng = XorShift(0x0c0f_fee5);
    let mut ns: Vec<u32> = Vec::with_capacity(changes);
    // Calls that folded or split a stripe, timed apart: on a shared machine the
    // overall max can be a preemption, which then shows in plain calls too.
    let mut fold_ns: Vec<u32> = Vec::new();
    let mut hits = 0usize;
    let mut cpu_max = Duration::ZERO;
    let steal_before = steal_ticks();
    let started = Instant::now();
    for k in 0..changes {
        let subject = 1 + rng.below(max_id);
        let folds_then = (r.index().counters().2, r.index().stripe_count());
        let (t, cpu, changed) = if k % 2 == 0 {
            let subs = r.subscribers(subject);
            if subs.is_empty() {
                continue;
            }
            let u = subs[rng.below(subs.len() as u64) as usize];
            let (c, t) = (thread_cpu(), Instant::now());
            let changed = r.unsubscribe(u, subject);
            (t.elapsed(), thread_cpu() - c, changed)
        } else {
            let u = 1 + rng.below(max_id);
            let (c, t) = (thread_cpu(), Instant::now());
            let changed = r.subscribe(u, subject);
            (t.elapsed(), thread_cpu() - c, changed)
        };
        hits += usize::from(changed);
        cpu_max = cpu_max.max(cpu);
        let n = u32::try_from(t.as_nanos()).unwrap_or(u32::MAX);
        if (r.index().counters().2, r.index().stripe_count()) != folds_then {
            fold_ns.push(n);
        } else {
            ns.push(n);
        }
    }
    let wall = started.elapsed();
    let steal = steal_ticks().saturating_sub(steal_before);
    let (plain, plain_max) = (ns.len(), ns.iter().copied().max().unwrap_or(0));
    ns.extend_from_slice(&fold_ns);
    ns.sort_unstable();
    fold_ns.sort_unstable();
    let pct = |v: &[u32], p: f64| v[((v.len() - 1) as f64 * p) as usize] as f64 / 1e3;
    let index = r.index();
    let (_, _, folds) = index.counters();
    println!(
        "churn: {} timed calls ({hits} changed the index) in {:.2} s; stripes {stripes_before} -> {}, \
         {} stripe folds",
        ns.len(),
        wall.as_secs_f64(),
        index.stripe_count(),
        folds - folds_before
    );
    println!(
        "churn latency, all calls: p50 {:.2} µs, p99 {:.2} µs, p99.9 {:.1} µs, p99.99 {:.1} µs, \
         max {:.1} µs (wall; max thread CPU time of one call {:.1} µs); over 1 ms: {}, over 2 ms: {}",
        pct(&ns, 0.5),
        pct(&ns, 0.99),
        pct(&ns, 0.999),
        pct(&ns, 0.9999),
        pct(&ns, 1.0),
        cpu_max.as_secs_f64() * 1e6,
        ns.iter().filter(|&&n| n > 1_000_000).count(),
        ns.iter().filter(|&&n| n > 2_000_000).count()
    );
    if !fold_ns.is_empty() {
        println!(
            "  {} calls that folded or split a stripe: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs; \
             {plain} plain calls: max {:.1} µs",
            fold_ns.len(),
            pct(&fold_ns, 0.5),
            pct(&fold_ns, 0.99),
            pct(&fold_ns, 1.0),
            f64::from(plain_max) / 1e3,
        );
    }
    println!("  the host took {steal} ticks of steal time from this VM meanwhile (/proc/stat)");
    noise_floor(r, max_id, ns.len());
    println!(
        "index memory: {before:.2} B/edge before the churn, {:.2} B/edge after \
         ({} edges, {} delta entries pending)",
        index.memory_bytes() as f64 / index.edge_count().max(1) as f64,
        index.edge_count(),
        index.delta_len()
    );
    Ok(())
}
