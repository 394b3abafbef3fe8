//! Presence and fan-out costs without a store (uses only the API that predates
//! issue 10, so the same file measures the code before and after it):
//!
//! 1. bytes of presence per idle connection: N users online, one connection each;
//! 2. one user with M connections: time to log them all in, then out (quadratic
//!    before presence became O(1) per connection);
//! 3. broadcast: one subject with S online subscribers, 201 publishes, median
//!    time and ns per delivery (history on, so rings and their accounting count).
//!
//! `cargo run --release -p router --example presence_cost -- [N] [M] [S]`
//! (defaults 1,000,000 / 50,000 / 200,000). Prints; asserts nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use router::{ConnRef, Message, Reach, Router, RouterConfig, SubscriptionIndex};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .map_or(default, |s| s.parse().expect("a number"))
}

fn conn(i: u64) -> ConnRef {
    ConnRef {
        loop_id: (i % 2) as u16,
        token: i as u32,
    }
}

fn main() {
    let (n, m, s) = (arg(1, 1_000_000), arg(2, 50_000), arg(3, 200_000));

    let mut r = Router::new(RouterConfig::default(), SubscriptionIndex::new());
    let t = Instant::now();
    for u in 1..=n {
        r.handle_login(u, conn(u));
    }
    println!(
        "idle presence: {n} users online in {:.3} s, {} bytes = {:.1} B per connection",
        t.elapsed().as_secs_f64(),
        r.presence_bytes(),
        r.presence_bytes() as f64 / n as f64
    );
    drop(r);

    let mut r = Router::new(RouterConfig::default(), SubscriptionIndex::new());
    let t = Instant::now();
    for i in 0..m {
        r.handle_login(7, conn(i));
    }
    let login = t.elapsed();
    let bytes = r.presence_bytes();
    let t = Instant::now();
    for i in 0..m {
        r.handle_logout(7, conn(i), Instant::now());
    }
    println!(
        "one user, {m} connections: login all {:.3} s, logout all {:.3} s, {:.1} B per connection",
        login.as_secs_f64(),
        t.elapsed().as_secs_f64(),
        bytes as f64 / m as f64
    );
    drop(r);

    let index = SubscriptionIndex::from_edges((1..=s).map(|u| (u, 0)));
    let mut r = Router::new(RouterConfig::default(), index);
    for u in 1..=s {
        r.handle_login(u, conn(u));
    }
    let now = Instant::now();
    let mut sink = 0u64;
    let mut times: Vec<Duration> = (0..201)
        .map(|_| {
            let msg = Arc::new(Message {
                subject: 0,
                channel: None,
                payload: bytes::Bytes::from_static(
                    b"sixty bytes of payload, roughly what the bench sends......",
                ),
            });
            let t = Instant::now();
            let c = r.handle_publish(&msg, &Reach::Followers, now, &mut |d| {
                sink = sink.wrapping_add(u64::from(d.conn.token) ^ d.seq)
            });
            assert_eq!(u64::from(c.connections), s);
            t.elapsed()
        })
        .collect();
    let first = times.remove(0);
    times.sort_unstable();
    let med = times[times.len() / 2];
    println!(
        "broadcast to {s}: first {:.1} ms, median {:.1} ms = {:.1} ns per delivery, max {:.1} ms \
         (presence + history {} bytes, checksum {sink})",
        first.as_secs_f64() * 1e3,
        med.as_secs_f64() * 1e3,
        med.as_secs_f64() * 1e9 / s as f64,
        times[times.len() - 1].as_secs_f64() * 1e3,
        r.presence_bytes()
    );
}
