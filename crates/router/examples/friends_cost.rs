//! What friends online costs the router during a login storm (issue 42: "the cost
//! of 1 M logins in 60 s with online events on"): a Barabási–Albert friendship
//! graph of N users (m friends added per user, each friendship a follow both
//! ways), every user logging in once, N / T per tick for T ticks (the router's tick
//! is 1 s: T = 60 is a minute), each opting in (`friends=1`: a connection on their
//! friends companion). Per tick: the router time of the logins and joins, and of
//! `push_friends` (the tick's work), the messages and deliveries it made; then
//! ticks without logins until nothing waits. Then the same logins with friends
//! events off, for the difference; then as router shard 0 of 2 with nobody opted
//! in on it (what a shard pays blind: followers another shard owns are handed to
//! it whether they opted in or not, `router::router::friends`).
//!
//! `cargo run --release -p router --example friends_cost -- [N] [m] [T]`
//! (defaults 1,000,000 / 15 / 60). Prints; asserts nothing.

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use router::{
    ConnRef, FriendsConfig, IndexBuilder, PresenceConfig, Router, RouterConfig, SubscriptionIndex,
};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .map_or(default, |s| s.parse().expect("a number"))
}

fn conn(u: u64) -> ConnRef {
    ConnRef {
        loop_id: (u % 2) as u16,
        token: u as u32,
    }
}

/// Friendships of a Barabási–Albert graph (preferential attachment), both ways.
fn graph(n: u64, m: u64) -> SubscriptionIndex {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mut b = IndexBuilder::with_capacity((2 * n * m) as usize);
    let mut ends: Vec<u64> = Vec::with_capacity((2 * n * m) as usize);
    let hub = m + 1;
    for v in 1..=m {
        b.push(hub, v);
        b.push(v, hub);
        ends.extend([v, hub]);
    }
    let mut chosen = Vec::with_capacity(m as usize);
    for v in hub + 1..=n {
        chosen.clear();
        while chosen.len() < m as usize {
            let t = ends[rng.gen_range(0..ends.len())];
            if !chosen.contains(&t) {
                chosen.push(t);
            }
        }
        for &t in &chosen {
            b.push(v, t);
            b.push(t, v);
            ends.extend([t, v]);
        }
    }
    b.build()
}

fn config(max_fanout: usize) -> RouterConfig {
    RouterConfig {
        history: 8,
        presence: PresenceConfig {
            enabled: true,
            ..PresenceConfig::default()
        },
        friends: FriendsConfig {
            max_fanout,
            ..FriendsConfig::default()
        },
        ..RouterConfig::default()
    }
}

/// What a storm cost: router time of the logins and of the ticks, messages,
/// deliveries, the longest tick, and messages handed to other shards.
struct Cost {
    login: Duration,
    tick: Duration,
    messages: u64,
    deliveries: u64,
    max_tick: Duration,
    for_shards: u64,
}

/// Logs everyone in over `ticks` ticks.
fn storm(r: &mut Router, n: u64, ticks: u64, friends: bool) -> Cost {
    let per_tick = n.div_ceil(ticks);
    let t0 = Instant::now();
    let (mut login, mut tick, mut max_tick) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut messages, mut deliveries, mut for_shards) = (0u64, 0u64, 0u64);
    let mut last_empty = false;
    let mut u = 1;
    // The storm's ticks, then quiet ticks until nothing waits (bounded).
    for i in 0..ticks * 4 {
        if i >= ticks && u > n && last_empty {
            break;
        }
        let now = t0 + Duration::from_secs(i + 1);
        let start = Instant::now();
        let end = (u + per_tick).min(n + 1);
        for user in u..end {
            r.handle_login(user, conn(user));
            if friends {
                let name = format!("{user}~friends");
                r.handle_join(name.as_str(), conn(user), Some(user), None)
                    .unwrap();
            }
        }
        u = end;
        login += start.elapsed();
        let start = Instant::now();
        r.handle_tick(now);
        let mut pushed = 0;
        for (_, d) in r.push_friends(now) {
            pushed += 1;
            messages += 1;
            deliveries += d.len() as u64;
        }
        let handed = r.take_friends_for_shards().len();
        for_shards += handed as u64;
        last_empty = pushed == 0 && handed == 0;
        let took = start.elapsed();
        tick += took;
        max_tick = max_tick.max(took);
    }
    Cost {
        login,
        tick,
        messages,
        deliveries,
        max_tick,
        for_shards,
    }
}

fn main() {
    let (n, m, ticks) = (arg(1, 1_000_000), arg(2, 15), arg(3, 60));
    let t = Instant::now();
    let index = graph(n, m);
    println!(
        "graph: {n} users, m = {m}, {} follows, built in {:.1} s",
        index.edge_count(),
        t.elapsed().as_secs_f64()
    );
    for (label, fanout, friends, shards) in [
        ("friends events on, everyone opted in", 1000, true, 1),
        (
            "friends events off (--friends-max-fanout 0), no friends=1",
            0,
            false,
            1,
        ),
        (
            "router shard 0 of 2, friends events on, nobody opted in on it",
            1000,
            false,
            2,
        ),
    ] {
        let mut r = Router::new(config(fanout), index.clone());
        r.set_friends_shard(0, shards);
        let c = storm(&mut r, n, ticks, friends);
        let s = r.friends_stats();
        println!("{label}: {n} logins over {ticks} ticks");
        println!(
            "  logins (+ companion joins): {:.2} s of router time, {:.2} µs per login",
            c.login.as_secs_f64(),
            c.login.as_secs_f64() * 1e6 / n as f64
        );
        println!(
            "  ticks: {:.2} s in all ({:.2} µs per login), max {:.1} ms per tick; {} messages, {} deliveries ({:.2} per login, {:.0} per tick); {} handed to other shards ({:.2} per login)",
            c.tick.as_secs_f64(),
            c.tick.as_secs_f64() * 1e6 / n as f64,
            c.max_tick.as_secs_f64() * 1e3,
            c.messages,
            c.deliveries,
            c.deliveries as f64 / n as f64,
            c.deliveries as f64 / ticks as f64,
            c.for_shards,
            c.for_shards as f64 / n as f64
        );
        println!(
            "  changes {}, dropped past the fan-out cap {}, cut from messages {}, recipients deferred a tick {}; router presence bytes {}",
            s.changes,
            s.dropped_fanout,
            s.dropped_cut,
            s.deferred,
            r.presence_bytes()
        );
    }
}
