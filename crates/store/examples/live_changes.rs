//! Measures live-change latency of a store: single-edge add then remove on the
//! store's highest-degree subject, and on a room of `--room` members created for
//! the run (and removed after). Prints medians and maxima; asserts nothing.
//!
//! `cargo run --release -p store --example live_changes -- STORE_URL [ROOM_MEMBERS]`
//! (load a graph first with `myriad friends load`; the room uses ids above it).

use std::time::{Duration, Instant};

/// Timed add + remove pairs per subject.
const REPEATS: usize = 51;
/// Room members added per `add` call while building the room.
const ROOM_BATCH: u64 = 100_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .ok_or("usage: live_changes STORE_URL [ROOM_MEMBERS]")?;
    let room_members: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let mut store = store::open(&url)?;

    // The highest-degree subject and the largest id, from one pass.
    // Grouped by subject: a degree is a run length, no map needed.
    let (mut top, mut run, mut max_id) = ((0, 0), (0, 0), 0);
    let t = Instant::now();
    let edges = store.for_each_edge(&mut |subscriber, subject| {
        max_id = max_id.max(subscriber).max(subject);
        run = if run.0 == subject {
            (subject, run.1 + 1)
        } else {
            (subject, 1)
        };
        if run.1 > top.1 {
            top = run;
        }
    })?;
    println!(
        "read {edges} edges with for_each_edge in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let newcomer = max_id + 1;
    time_pairs(&mut *store, "top subject", top.0, top.1, newcomer)?;

    let room = max_id + 2;
    let t = Instant::now();
    for start in (0..room_members).step_by(ROOM_BATCH as usize) {
        let batch: Vec<(u64, u64)> = (start..(start + ROOM_BATCH).min(room_members))
            .map(|i| (room + 1 + i, room))
            .collect();
        store.add(&batch)?;
    }
    println!(
        "room {room}: {room_members} members added in batches of {ROOM_BATCH} in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    time_pairs(&mut *store, "room", room, room_members, newcomer)?;
    let t = Instant::now();
    for start in (0..room_members).step_by(ROOM_BATCH as usize) {
        let batch: Vec<(u64, u64)> = (start..(start + ROOM_BATCH).min(room_members))
            .map(|i| (room + 1 + i, room))
            .collect();
        store.remove(&batch)?;
    }
    println!("room removed in {:.2} s", t.elapsed().as_secs_f64());
    Ok(())
}

/// Times `REPEATS` add/remove pairs of edge (newcomer → subject) after a warm-up.
fn time_pairs(
    store: &mut dyn store::Store,
    what: &str,
    subject: u64,
    degree: u64,
    newcomer: u64,
) -> Result<(), store::StoreError> {
    store.add(&[(newcomer, subject)])?;
    store.remove(&[(newcomer, subject)])?;
    let (mut adds, mut removes): (Vec<Duration>, Vec<Duration>) = (Vec::new(), Vec::new());
    for _ in 0..REPEATS {
        let t = Instant::now();
        assert_eq!(store.add(&[(newcomer, subject)])?, 1, "the edge was absent");
        adds.push(t.elapsed());
        let t = Instant::now();
        assert_eq!(
            store.remove(&[(newcomer, subject)])?,
            1,
            "the edge was there"
        );
        removes.push(t.elapsed());
    }
    adds.sort_unstable();
    removes.sort_unstable();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "{what} {subject} ({degree} subscribers): add median {:.0} µs max {:.0} µs; remove median {:.0} µs max {:.0} µs",
        us(adds[REPEATS / 2]),
        us(adds[REPEATS - 1]),
        us(removes[REPEATS / 2]),
        us(removes[REPEATS - 1])
    );
    Ok(())
}
