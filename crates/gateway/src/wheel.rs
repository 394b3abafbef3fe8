//! One hashed timing wheel per event loop (SPEC A5): heartbeats, head timeouts,
//! keep-alive idle timeouts and long-poll timeouts of every connection of the loop.
//!
//! Not a timer per connection: an entry is a 4-byte connection token in a bucket vector,
//! and cancelling costs nothing. The connection keeps its own `deadline` tick, which is
//! the truth: when a bucket comes round the owner says, for each token, whether it is due
//! now, belongs to a later revolution of this bucket (kept), or is stale (dropped: the
//! connection closed or its timer moved, which pushed a new entry elsewhere).

use connection::clock::reached;

/// Buckets per revolution: 4096 × 10 ms ≈ 41 s covers heartbeats and the usual
/// timeouts in one turn; a longer deadline stays in its bucket for later revolutions.
pub const BUCKETS: u32 = 4096;
/// Loops' epochs lie on whole wall-clock seconds, so every heartbeat grid that divides
/// a second (`--heartbeat-grid`) falls on the same instants in every loop and process
/// (shifted per process by its tick group's offset, `ServerConfig::tick_offset`).
pub const EPOCH_ALIGN_MS: u64 = 1000;

/// The instant of wheel tick 0 for a loop started now, and that instant as wall-clock
/// milliseconds since 1970: the last whole wall-clock second, so tick numbers (and
/// with them heartbeat instants) agree between every loop and process of a machine,
/// and between machines as far as their clocks do.
pub fn aligned_epoch() -> (std::time::Instant, u64) {
    let since_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let epoch = epoch_on_second(std::time::Instant::now(), since_unix);
    let ms = since_unix.as_millis() as u64;
    (epoch, ms - ms % EPOCH_ALIGN_MS)
}

/// `now` moved back to the last whole second of wall-clock time (`since_unix` is
/// `now` as wall-clock time since 1970).
fn epoch_on_second(now: std::time::Instant, since_unix: std::time::Duration) -> std::time::Instant {
    let into_second = (since_unix.as_millis() % u128::from(EPOCH_ALIGN_MS)) as u64;
    now.checked_sub(std::time::Duration::from_millis(into_second))
        .unwrap_or(now)
}

/// A heartbeat phase for a peer address: the wrapping sum of its bytes, so every
/// connection of one address shares it and consecutive addresses (a client host's
/// source range, `flood --source`) take consecutive ticks of the grid.
pub fn beat_phase_of(ip: std::net::IpAddr) -> u8 {
    let sum = |bytes: &[u8]| bytes.iter().fold(0u8, |a, b| a.wrapping_add(*b));
    match ip.to_canonical() {
        std::net::IpAddr::V4(v4) => sum(&v4.octets()),
        std::net::IpAddr::V6(v6) => sum(&v6.octets()),
    }
}

/// What the owner says about an entry when its bucket comes round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// Its deadline is this tick: it fires (and leaves the wheel).
    Due,
    /// Its deadline is a later revolution of the same bucket: it stays.
    Later,
    /// The connection is gone or its deadline moved: it leaves.
    Stale,
}

pub struct Wheel {
    buckets: Vec<Vec<u32>>,
    /// The next tick to process; every tick before it has been handed out.
    next: u32,
}

impl Wheel {
    /// A wheel whose first tick is `now_tick`.
    pub fn new(now_tick: u32) -> Wheel {
        Wheel {
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            next: now_tick,
        }
    }

    /// Schedules `token` at `tick` (clamped to the next tick, so it is never missed).
    /// Returns the tick actually used: the caller stores it as the connection's deadline.
    pub fn schedule(&mut self, token: u32, tick: u32) -> u32 {
        let tick = if reached(tick, self.next) {
            self.next
        } else {
            tick
        };
        self.buckets[(tick % BUCKETS) as usize].push(token);
        tick
    }

    /// Visits every bucket from the last call up to `now_tick`. `judge(token, bucket_tick)`
    /// classifies each entry (`bucket_tick` is the tick being visited); `Due` entries go to
    /// `fire`, which must not touch the wheel (collect them, then act).
    pub fn poll_due(
        &mut self,
        now_tick: u32,
        mut judge: impl FnMut(u32, u32) -> Entry,
        mut fire: impl FnMut(u32),
    ) {
        if !reached(self.next, now_tick) {
            return;
        }
        // After a stall longer than a revolution, one pass over every bucket is enough:
        // the owner judges by the connection's own deadline, not by the visited tick.
        let visits = now_tick
            .wrapping_sub(self.next)
            .saturating_add(1)
            .min(BUCKETS);
        for i in 0..visits {
            let tick = now_tick.wrapping_sub(visits - 1 - i);
            let bucket = &mut self.buckets[(tick % BUCKETS) as usize];
            if bucket.is_empty() {
                continue;
            }
            bucket.retain(|&token| match judge(token, tick) {
                Entry::Due => {
                    fire(token);
                    false
                }
                Entry::Later => true,
                Entry::Stale => false,
            });
            // An emptied bucket gives its vector back: the heap then holds what the
            // wheel holds now, not every bucket's largest burst.
            if bucket.is_empty() {
                *bucket = Vec::new();
            }
        }
        self.next = now_tick.wrapping_add(1);
    }

    /// Frees bucket vectors left large after a mass disconnect.
    pub fn shrink(&mut self) {
        for bucket in &mut self.buckets {
            bucket.shrink_to_fit();
        }
    }

    /// Number of entries held, stale ones included (for tests and stats).
    pub fn len(&self) -> usize {
        self.buckets.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.iter().all(Vec::is_empty)
    }
}

/// The usual judge: an entry is due when the connection's deadline has come, later when
/// the deadline is a future revolution of the visited bucket, and stale otherwise.
pub fn judge(deadline: Option<u32>, bucket_tick: u32, now_tick: u32) -> Entry {
    match deadline {
        Some(d) if d % BUCKETS != bucket_tick % BUCKETS => Entry::Stale,
        Some(d) if reached(d, now_tick) => Entry::Due,
        Some(_) => Entry::Later,
        _ => Entry::Stale,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use connection::clock::on_grid_phase;
    use std::collections::HashMap;

    /// Deadlines by token, standing in for the connections.
    struct Owner {
        deadlines: HashMap<u32, u32>,
    }

    impl Owner {
        fn fired(&mut self, wheel: &mut Wheel, now: u32) -> Vec<u32> {
            let mut out = Vec::new();
            let deadlines = &self.deadlines;
            wheel.poll_due(
                now,
                |t, bucket| judge(deadlines.get(&t).copied(), bucket, now),
                |t| out.push(t),
            );
            for t in &out {
                self.deadlines.remove(t);
            }
            out.sort();
            out
        }

        fn schedule(&mut self, wheel: &mut Wheel, token: u32, tick: u32) {
            let tick = wheel.schedule(token, tick);
            self.deadlines.insert(token, tick);
        }
    }

    fn owner() -> Owner {
        Owner {
            deadlines: HashMap::new(),
        }
    }

    #[test]
    fn a_phase_shifts_the_grid_and_still_rounds_up() {
        for grid in 1..=10u32 {
            for phase in 0..30u32 {
                for tick in 0..40u32 {
                    let due = on_grid_phase(tick, grid, phase);
                    assert!(
                        due >= tick && due - tick < grid,
                        "{tick} {grid} {phase}: {due}"
                    );
                    assert_eq!(due % grid, phase % grid, "{tick} {grid} {phase}: {due}");
                }
            }
            assert_eq!(
                on_grid_phase(20, grid, 0),
                20u32.div_ceil(grid) * grid,
                "phase 0 is the grid"
            );
        }
    }

    #[test]
    fn one_address_has_one_phase_and_consecutive_addresses_consecutive_phases() {
        let v4 = |d| std::net::IpAddr::from([127, 0, 0, d]);
        assert_eq!(beat_phase_of(v4(2)).wrapping_add(1), beat_phase_of(v4(3)));
        let phases: std::collections::HashSet<u32> = (2..12)
            .map(|d| u32::from(beat_phase_of(v4(d))) % 10)
            .collect();
        assert_eq!(
            phases.len(),
            10,
            "ten addresses over a ten-tick grid: every tick"
        );
        let mapped: std::net::IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        assert_eq!(
            beat_phase_of(mapped),
            beat_phase_of(v4(2)),
            "v4-mapped v6 is v4"
        );
    }

    #[test]
    fn on_grid_rounds_up_to_the_next_grid_tick() {
        for grid in [1, 2, 5, 10] {
            assert_eq!(on_grid_phase(0, grid, 0), 0);
            for tick in 1..=grid {
                assert_eq!(on_grid_phase(tick, grid, 0), grid, "{tick} on {grid}");
            }
            assert_eq!(on_grid_phase(grid + 1, grid, 0), 2 * grid);
        }
        assert_eq!(on_grid_phase(7, 0, 0), 7, "no grid: every tick");
    }

    #[test]
    fn epochs_taken_apart_lie_on_the_same_wall_clock_grid() {
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let unix0 = Duration::from_millis(1_795_000_000_123);
        let a = epoch_on_second(t0, unix0);
        assert_eq!(t0 - a, Duration::from_millis(123));
        // A loop started 1,037 ms later (another process) gets an epoch whole seconds
        // away: every grid that divides a second lines up.
        let later = Duration::from_millis(1_037);
        let b = epoch_on_second(t0 + later, unix0 + later);
        assert_eq!(
            (b - a).as_millis() as u64 % EPOCH_ALIGN_MS,
            0,
            "{:?}",
            b - a
        );
    }

    #[test]
    fn fires_in_its_tick_and_not_before() {
        let (mut w, mut o) = (Wheel::new(100), owner());
        o.schedule(&mut w, 7, 105);
        assert!(o.fired(&mut w, 104).is_empty());
        assert_eq!(o.fired(&mut w, 105), vec![7]);
        assert!(o.fired(&mut w, 200).is_empty());
        assert!(w.is_empty());
    }

    #[test]
    fn an_emptied_slot_frees_its_vector_and_a_kept_one_does_not() {
        let (mut w, mut o) = (Wheel::new(0), owner());
        for t in 0..100 {
            o.schedule(&mut w, t, 5);
        }
        o.schedule(&mut w, 500, 5 + BUCKETS); // a later revolution of the same bucket
        o.schedule(&mut w, 600, 6);
        assert_eq!(o.fired(&mut w, 5).len(), 100);
        assert_eq!(w.buckets[5].len(), 1, "the later revolution stays");
        o.deadlines.remove(&600); // stale: its connection went away
        assert!(o.fired(&mut w, 6).is_empty());
        assert_eq!(
            w.buckets[6].capacity(),
            0,
            "nothing left: memory given back"
        );
        assert_eq!(o.fired(&mut w, 5 + BUCKETS), vec![500]);
        assert_eq!(w.buckets[5].capacity(), 0);
    }

    #[test]
    fn past_ticks_are_clamped_to_the_next_one() {
        let (mut w, mut o) = (Wheel::new(10), owner());
        o.schedule(&mut w, 1, 3);
        assert_eq!(o.deadlines[&1], 10);
        assert_eq!(o.fired(&mut w, 10), vec![1]);
    }

    #[test]
    fn deadlines_beyond_one_revolution_wait_their_turn() {
        let (mut w, mut o) = (Wheel::new(0), owner());
        let far = BUCKETS + 5;
        o.schedule(&mut w, 9, far);
        assert!(o.fired(&mut w, 5).is_empty());
        assert!(o.fired(&mut w, far - 1).is_empty());
        assert_eq!(o.fired(&mut w, far), vec![9]);
    }

    #[test]
    fn a_moved_timer_fires_once_at_its_new_tick() {
        let (mut w, mut o) = (Wheel::new(0), owner());
        o.schedule(&mut w, 4, 10);
        o.schedule(&mut w, 4, 20); // moved: the entry at 10 is now stale
        assert!(o.fired(&mut w, 15).is_empty());
        assert_eq!(w.len(), 1);
        assert_eq!(o.fired(&mut w, 20), vec![4]);
        assert!(o.fired(&mut w, 100).is_empty());
    }

    #[test]
    fn timers_fire_in_order_across_the_tick_counter_wrapping() {
        let start = u32::MAX - 20;
        let (mut w, mut o) = (Wheel::new(start), owner());
        o.schedule(&mut w, 1, start + 10);
        o.schedule(&mut w, 2, start.wrapping_add(30)); // past the wrap: tick 9
        o.schedule(&mut w, 3, start.wrapping_add(30 + BUCKETS)); // and a revolution later
        assert_eq!(o.deadlines[&2], 9);
        assert!(o.fired(&mut w, start + 5).is_empty());
        assert_eq!(o.fired(&mut w, start + 15), vec![1]);
        assert!(
            o.fired(&mut w, 8).is_empty(),
            "tick 8, after the wrap: 2 not yet"
        );
        assert_eq!(o.fired(&mut w, 9), vec![2]);
        assert!(o.fired(&mut w, 9 + BUCKETS - 1).is_empty());
        assert_eq!(o.fired(&mut w, 9 + BUCKETS), vec![3]);
        // A deadline just before the wrap, asked for after it, is clamped forward.
        let mut w = Wheel::new(3);
        assert_eq!(w.schedule(7, u32::MAX - 1), 3);
        assert!(reached(u32::MAX - 1, 3) && !reached(3, u32::MAX - 1));
    }

    #[test]
    fn a_long_stall_fires_everything_due() {
        let (mut w, mut o) = (Wheel::new(0), owner());
        for t in 0..3000u32 {
            o.schedule(&mut w, t, t);
        }
        o.schedule(&mut w, 99_999, 50_000);
        assert_eq!(o.fired(&mut w, 20_000).len(), 3000);
        assert_eq!(w.len(), 1);
        assert_eq!(o.fired(&mut w, 50_000), vec![99_999]);
    }
}
