//! One hashed timing wheel per event loop (SPEC A5): heartbeats, head timeouts,
//! keep-alive idle timeouts and long-poll timeouts of every connection of the loop.
//!
//! Not a timer per connection: an entry is 8 bytes (token + due tick) in a slot vector,
//! and cancelling costs nothing. The connection keeps its own `deadline` tick; an entry
//! whose tick no longer matches the connection's deadline is stale and is dropped when
//! its slot comes round (lazy deletion). Deadlines further away than one revolution sit
//! in their slot until their turn.

/// Wheel resolution. Heartbeats are seconds apart and timeouts are at least a second, so
/// 50 ms is precise enough while keeping the slot count small.
pub const TICK_MS: u64 = 50;
/// Slots per revolution: 4096 × 50 ms ≈ 205 s covers every default timeout in one turn.
const SLOTS: usize = 4096;

/// An entry that has come due: the connection token and the tick it was scheduled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    pub token: u32,
    pub tick: u32,
}

pub struct Wheel {
    slots: Vec<Vec<Due>>,
    /// The next tick to process; every tick before it has been handed out.
    next: u32,
}

impl Wheel {
    /// A wheel whose tick 0 is `now_tick`.
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
        self.slots[tick as usize % SLOTS].push(Due { token, tick });
        tick
    }

    /// Hands every entry due up to and including `now_tick` to `fire`. Entries of a later
    /// revolution stay in place. Stale entries are the caller's to recognise.
    pub fn poll_due(&mut self, now_tick: u32, mut fire: impl FnMut(Due)) {
        if now_tick < self.next {
            return;
        }
        // After a stall longer than a revolution, one pass over every slot is enough:
        // each slot is visited once and fires all of its entries that are due.
        let visits = ((now_tick - self.next) as usize + 1).min(SLOTS);
        for i in 0..visits {
            let slot = &mut self.slots[(self.next as usize + i) % SLOTS];
            if slot.is_empty() {
                continue;
            }
            slot.retain(|due| {
                if due.tick <= now_tick {
                    fire(*due);
                    false
                } else {
                    true
                }
            });
        }
        self.next = now_tick + 1;
    }

    /// Frees slot vectors left large after a mass disconnect.
    pub fn shrink(&mut self) {
        for slot in &mut self.slots {
            if slot.is_empty() {
                *slot = Vec::new();
            } else {
                slot.shrink_to_fit();
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fired(wheel: &mut Wheel, now: u32) -> Vec<Due> {
        let mut out = Vec::new();
        wheel.poll_due(now, |d| out.push(d));
        out
    }

    #[test]
    fn fires_in_its_tick_and_not_before() {
        let mut w = Wheel::new(100);
        w.schedule(7, 105);
        assert!(fired(&mut w, 104).is_empty());
        assert_eq!(
            fired(&mut w, 105),
            vec![Due {
                token: 7,
                tick: 105
            }]
        );
        assert!(fired(&mut w, 200).is_empty());
    }

    #[test]
    fn past_ticks_are_clamped_to_the_next_one() {
        let mut w = Wheel::new(10);
        assert_eq!(w.schedule(1, 3), 10);
        assert_eq!(fired(&mut w, 10).len(), 1);
    }

    #[test]
    fn deadlines_beyond_one_revolution_wait_their_turn() {
        let mut w = Wheel::new(0);
        let far = SLOTS as u32 + 5;
        w.schedule(9, far);
        assert!(fired(&mut w, 5).is_empty());
        assert!(fired(&mut w, far - 1).is_empty());
        assert_eq!(
            fired(&mut w, far),
            vec![Due {
                token: 9,
                tick: far
            }]
        );
    }

    #[test]
    fn a_long_stall_fires_everything_due() {
        let mut w = Wheel::new(0);
        for t in 0..3000u32 {
            w.schedule(t, t);
        }
        w.schedule(99_999, 50_000);
        let out = fired(&mut w, 20_000);
        assert_eq!(out.len(), 3000);
        assert_eq!(w.len(), 1);
        assert_eq!(fired(&mut w, 50_000).len(), 1);
    }
}
