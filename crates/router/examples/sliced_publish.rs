//! How long one slice of a sliced publish holds the router: a subject with S
//! online subscribers, published with `step_publish(budget)` for several budgets;
//! per budget, the first step (which copies the recipient list) and the worst and
//! median later step over 21 publishes, against the unsliced `handle_publish`.
//!
//! `cargo run --release -p router --example sliced_publish -- [S]` (default
//! 200,000). Prints; asserts nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use router::{ConnRef, Message, Router, RouterConfig, SubscriptionIndex};

fn main() {
    let s: u64 = std::env::args()
        .nth(1)
        .map_or(200_000, |a| a.parse().expect("a number"));
    let index = SubscriptionIndex::from_edges((1..=s).map(|u| (u, 0)));
    let mut r = Router::new(RouterConfig::default(), index);
    for u in 1..=s {
        r.handle_login(
            u,
            ConnRef {
                loop_id: 0,
                token: u as u32,
            },
        );
    }
    let now = Instant::now();
    let msg = || {
        Arc::new(Message {
            subject: 0,
            payload: bytes::Bytes::from_static(b"payload"),
        })
    };
    let mut sink = 0u64;
    // Warm the rings.
    r.handle_publish(msg(), now, &mut |_, _| {});
    let mut whole: Vec<Duration> = (0..21)
        .map(|_| {
            let t = Instant::now();
            r.handle_publish(msg(), now, &mut |c, q| {
                sink = sink.wrapping_add(u64::from(c.token) ^ q)
            });
            t.elapsed()
        })
        .collect();
    whole.sort_unstable();
    println!(
        "unsliced: median {:.2} ms per publish to {s}",
        whole[10].as_secs_f64() * 1e3
    );
    for budget in [1024usize, 4096, 16_384] {
        let (mut firsts, mut rest) = (Vec::new(), Vec::new());
        for _ in 0..21 {
            let mut cur = r.begin_publish(msg(), now);
            let mut first = true;
            loop {
                let t = Instant::now();
                let done = r.step_publish(&mut cur, budget, &mut |d| {
                    sink = sink.wrapping_add(u64::from(d.conn.token) ^ d.seq)
                });
                let e = t.elapsed();
                if first {
                    firsts.push(e);
                    first = false;
                } else {
                    rest.push(e);
                }
                if done {
                    break;
                }
            }
            assert_eq!(u64::from(cur.counts().connections), s);
        }
        firsts.sort_unstable();
        rest.sort_unstable();
        println!(
            "budget {budget:>6}: first step (copies {s} ids) median {:.3} ms; later steps median {:.3} ms, \
             p99 {:.3} ms, max {:.3} ms ({} steps)",
            firsts[firsts.len() / 2].as_secs_f64() * 1e3,
            rest[rest.len() / 2].as_secs_f64() * 1e3,
            rest[rest.len() * 99 / 100].as_secs_f64() * 1e3,
            rest[rest.len() - 1].as_secs_f64() * 1e3,
            rest.len()
        );
    }
    println!("checksum {sink}");
}
