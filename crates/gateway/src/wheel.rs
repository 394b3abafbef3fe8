//! One hashed timing wheel per event loop (SPEC A5): heartbeats, head timeouts,
//! keep-alive idle timeouts and long-poll timeouts of every connection of the loop.
//!
//! Not a timer per connection: an entry is a 4-byte connection token in a slot vector,
//! and cancelling costs nothing. The connection keeps its own `deadline` tick, which is
//! the truth: when a slot comes round the owner says, for each token, whether it is due
//! now, belongs to a later revolution of this slot (kept), or is stale (dropped: the
//! connection closed or its timer moved, which pushed a new entry elsewhere).

/// Wheel resolution. Heartbeats are seconds apart and timeouts are at least a second, so
/// 50 ms is precise enough while keeping the slot count small.
pub const TICK_MS: u64 = 50;
/// Slots per revolution: 4096 × 50 ms ≈ 205 s covers every default timeout in one turn.
pub const SLOTS: u32 = 4096;
/// Heartbeats fire only on ticks that are multiples of this (100 ms of wall-clock time,
/// the same instants in every loop and process: see [`aligned_epoch`]). Each beat is one
/// loopback send and, more costly, one wake-up of the receiver; spread over every 10-ms
/// tick of 50 gateways, the beats of 1M connections woke each client process about once
/// per beat (≈ 20 µs of CPU per beat on each side, measured: the machine saturated at
/// ~700 k connections). Beating together, a process wakes ten times a second and reads
/// or writes all its beats in one pass.
pub const HEARTBEAT_GRID: u32 = 2;

/// The instant of wheel tick 0 for a loop started now: the last wall-clock multiple of
/// the heartbeat grid, so tick numbers (and with them heartbeat instants) agree between
/// every loop and process of a machine, and between machines as far as their clocks do.
pub fn aligned_epoch() -> std::time::Instant {
    let since_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    epoch_on_grid(std::time::Instant::now(), since_unix)
}

/// `now` moved back to the last grid mark of wall-clock time (`since_unix` is `now` as
/// wall-clock time since 1970).
fn epoch_on_grid(now: std::time::Instant, since_unix: std::time::Duration) -> std::time::Instant {
    let grid_ms = TICK_MS * u64::from(HEARTBEAT_GRID);
    let into_grid = (since_unix.as_millis() % u128::from(grid_ms)) as u64;
    now.checked_sub(std::time::Duration::from_millis(into_grid))
        .unwrap_or(now)
}

/// `tick` rounded up to the heartbeat grid.
pub fn on_grid(tick: u32) -> u32 {
    tick.div_ceil(HEARTBEAT_GRID).wrapping_mul(HEARTBEAT_GRID)
}

/// What the owner says about an entry when its slot comes round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// Its deadline is this tick: it fires (and leaves the wheel).
    Due,
    /// Its deadline is a later revolution of the same slot: it stays.
    Later,
    /// The connection is gone or its deadline moved: it leaves.
    Stale,
}

pub struct Wheel {
    slots: Vec<Vec<u32>>,
    /// The next tick to process; every tick before it has been handed out.
    next: u32,
}

impl Wheel {
    /// A wheel whose first tick is `now_tick`.
    pub fn new(now_tick: u32) -> Wheel {
        Wheel {
            slots: (0..SLOTS).map(|_| Vec::new()).collect(),
            next: now_tick,
        }
    }

    /// Schedules `token` at `tick` (clamped to the next tick, so it is never missed).
    /// Returns the tick actually used: the caller stores it as the connection's deadline.
    pub fn schedule(&mut self, token: u32, tick: u32) -> u32 {
        let tick = tick.max(self.next);
        self.slots[(tick % SLOTS) as usize].push(token);
        tick
    }

    /// Visits every slot from the last call up to `now_tick`. `judge(token, slot_tick)`
    /// classifies each entry (`slot_tick` is the tick being visited); `Due` entries go to
    /// `fire`, which must not touch the wheel (collect them, then act).
    pub fn poll_due(
        &mut self,
        now_tick: u32,
        mut judge: impl FnMut(u32, u32) -> Entry,
        mut fire: impl FnMut(u32),
    ) {
        if now_tick < self.next {
            return;
        }
        // After a stall longer than a revolution, one pass over every slot is enough:
        // the owner judges by the connection's own deadline, not by the visited tick.
        let visits = (now_tick - self.next + 1).min(SLOTS);
        for i in 0..visits {
            let tick = now_tick - (visits - 1 - i);
            let slot = &mut self.slots[(tick % SLOTS) as usize];
            if slot.is_empty() {
                continue;
            }
            slot.retain(|&token| match judge(token, tick) {
                Entry::Due => {
                    fire(token);
                    false
                }
                Entry::Later => true,
                Entry::Stale => false,
            });
            // An emptied slot gives its vector back: the heap then holds what the
            // wheel holds now, not every slot's largest burst.
            if slot.is_empty() {
                *slot = Vec::new();
            }
        }
        self.next = now_tick + 1;
    }

    /// Frees slot vectors left large after a mass disconnect.
    pub fn shrink(&mut self) {
        for slot in &mut self.slots {
            slot.shrink_to_fit();
        }
    }

    /// Number of entries held, stale ones included (for tests and stats).
    pub fn len(&self) -> usize {
        self.slots.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.iter().all(Vec::is_empty)
    }
}

/// The usual judge: an entry is due when the connection's deadline has come, later when
/// the deadline is a future revolution of the visited slot, and stale otherwise.
pub fn judge(deadline: Option<u32>, slot_tick: u32, now_tick: u32) -> Entry {
    match deadline {
        Some(d) if d <= now_tick && d % SLOTS == slot_tick % SLOTS => Entry::Due,
        Some(d) if d > now_tick && d % SLOTS == slot_tick % SLOTS => Entry::Later,
        _ => Entry::Stale,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
                |t, slot| judge(deadlines.get(&t).copied(), slot, now),
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
    fn on_grid_rounds_up_to_the_next_grid_tick() {
        assert_eq!(on_grid(0), 0);
        for tick in 1..=HEARTBEAT_GRID {
            assert_eq!(on_grid(tick), HEARTBEAT_GRID, "{tick}");
        }
        assert_eq!(on_grid(HEARTBEAT_GRID + 1), 2 * HEARTBEAT_GRID);
    }

    #[test]
    fn epochs_taken_apart_lie_on_the_same_wall_clock_grid() {
        use std::time::{Duration, Instant};
        let grid = TICK_MS * u64::from(HEARTBEAT_GRID);
        let t0 = Instant::now();
        let unix0 = Duration::from_millis(1_795_000_000_123);
        let a = epoch_on_grid(t0, unix0);
        assert_eq!(t0 - a, Duration::from_millis(123 % grid));
        // A loop started 1,037 ms later (another process) gets an epoch whole grids away.
        let later = Duration::from_millis(1_037);
        let b = epoch_on_grid(t0 + later, unix0 + later);
        assert_eq!((b - a).as_millis() as u64 % grid, 0, "{:?}", b - a);
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
        o.schedule(&mut w, 500, 5 + SLOTS); // a later revolution of the same slot
        o.schedule(&mut w, 600, 6);
        assert_eq!(o.fired(&mut w, 5).len(), 100);
        assert_eq!(w.slots[5].len(), 1, "the later revolution stays");
        o.deadlines.remove(&600); // stale: its connection went away
        assert!(o.fired(&mut w, 6).is_empty());
        assert_eq!(w.slots[6].capacity(), 0, "nothing left: memory given back");
        assert_eq!(o.fired(&mut w, 5 + SLOTS), vec![500]);
        assert_eq!(w.slots[5].capacity(), 0);
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
        let far = SLOTS + 5;
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
