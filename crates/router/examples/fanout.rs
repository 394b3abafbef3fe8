//! Measures the router at friends-graph scale (issue 3): index build time and
//! bytes per directed edge from a store, presence memory with every user online,
//! and publish fan-out planning time for the highest-degree subject.
//!
//! `cargo run --release -p router --example fanout -- sqlite:/tmp/ba.db`
//! (load the store first with `myriad friends load`). Prints; asserts nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use router::{ConnRef, Message, Router, RouterConfig, SubscriptionIndex};

/// Publishes timed after the first one, for the median and max.
const REPEATS: usize = 101;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args().nth(1).ok_or("usage: fanout STORE_URL")?;
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
        "index: {} directed edges, read from store {:.2} s, built {:.2} s total, {} bytes = {:.2} B/edge",
        index.edge_count(),
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
                shard: (user % 2) as u16,
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
        let msg = Arc::new(Message {
            subject: top,
            payload: bytes::Bytes::from_static(b"hello"),
        });
        let t = Instant::now();
        let counts = r.handle_publish(msg, now, &mut |c, seq| {
            sink = sink.wrapping_add(u64::from(c.token) ^ seq)
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
        "steady publish over {REPEATS}: median {:.1} µs, max {:.1} µs ({:.1} ns per delivery)",
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
    let mut index = r.index().clone();
    let cloned = t.elapsed();
    let t = Instant::now();
    index.compact();
    let compact = t.elapsed();
    let t = Instant::now();
    store.remove(&[(newcomer, top)])?;
    let store_remove = t.elapsed();
    println!(
        "live change on subject {top}: store add {:.0} µs, index add {:.1} µs, store remove {:.0} µs; \
         full compaction {:.2} s (clone {:.2} s)",
        store_add.as_secs_f64() * 1e6,
        index_add.as_secs_f64() * 1e6,
        store_remove.as_secs_f64() * 1e6,
        compact.as_secs_f64(),
        cloned.as_secs_f64()
    );
    Ok(())
}
