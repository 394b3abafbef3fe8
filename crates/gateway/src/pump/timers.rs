//! A loop's clock and timers: the current tick, the 10-ms marks the loop wakes on,
//! the once-a-second give-back mark, and the timing wheel with the connections'
//! timers (head timeouts of new connections wait in `fresh` until the next tick).
//! It knows tokens and ticks, not connections: what a due token means is the
//! loop's (`EventLoop::run_timers`).

use crate::wheel::{self, Wheel};
use connection::clock::TICK_MS;
use connection::Tick;
use std::time::{Duration, Instant};

/// The loop's lag probe fires this often (SPEC F1: a 10 ms tick, measured).
const LAG_TICK: Duration = Duration::from_millis(10);

pub(super) struct Timers {
    wheel: Wheel,
    /// Tokens due in the current timer pass.
    due: Vec<u32>,
    /// Connections opened since the last tick, with their head-timeout tick: put in
    /// the wheel on the next tick only if still needed (see `accept`).
    fresh: Vec<(u32, Tick)>,
    /// Tick 0 of the wheel and of the cores' clock.
    epoch: Instant,
    /// `epoch` as wall-clock milliseconds since 1970.
    epoch_unix_ms: u64,
    /// The current tick, read once per round of events.
    now: Tick,
    /// The next 10-ms mark and the next give-back second.
    next_tick: Instant,
    next_second: Instant,
}

impl Timers {
    /// Timers whose tick 0 is `epoch` (`epoch_unix_ms` in wall-clock time), started
    /// at `now`.
    pub(super) fn new(epoch: Instant, epoch_unix_ms: u64, now: Instant) -> Timers {
        Timers {
            wheel: Wheel::new(0),
            due: Vec::new(),
            fresh: Vec::new(),
            epoch,
            epoch_unix_ms,
            now: 0,
            next_tick: next_tick_after(epoch, now),
            next_second: now + Duration::from_secs(1),
        }
    }

    /// The current tick.
    pub(super) fn now(&self) -> Tick {
        self.now
    }

    /// Sets the current tick from `at`. Ticks are u32 and wrap every 2^32 ticks (497
    /// days); returns the cores' wall clock (`unix_start_ms`, for token expiry): the
    /// start of the current wrap, so it never runs backwards.
    pub(super) fn set_clock(&mut self, at: Instant) -> u64 {
        let ticks = at.saturating_duration_since(self.epoch).as_millis() as u64 / TICK_MS;
        self.now = ticks as Tick;
        self.epoch_unix_ms + (ticks >> 32 << 32) * TICK_MS
    }

    /// If the 10-ms mark is reached at `now`: how late it is (the loop's lag), and
    /// the next mark is set.
    pub(super) fn tick_due(&mut self, now: Instant) -> Option<Duration> {
        if now < self.next_tick {
            return None;
        }
        let lag = now - self.next_tick;
        self.next_tick = next_tick_after(self.epoch, now);
        Some(lag)
    }

    /// If the give-back second is reached at `now` (the next one is then set).
    pub(super) fn second_due(&mut self, now: Instant) -> bool {
        if now < self.next_second {
            return false;
        }
        self.next_second = now + Duration::from_secs(1);
        true
    }

    /// How long the loop may sleep until its next mark.
    pub(super) fn until_next_tick(&self) -> Duration {
        self.next_tick.saturating_duration_since(Instant::now())
    }

    /// Puts `token`'s timer for `tick` in the wheel; returns the tick used (a tick
    /// past a full revolution's slot is moved: tell the core).
    pub(super) fn schedule(&mut self, token: u32, tick: Tick) -> Tick {
        self.wheel.schedule(token, tick)
    }

    /// A new connection's head timeout, put in the wheel on the next tick only if
    /// it is still the connection's timer then ([`Timers::take_fresh`]).
    pub(super) fn open(&mut self, token: u32, tick: Tick) {
        self.fresh.push((token, tick));
    }

    /// The head timeouts opened since the last tick.
    pub(super) fn take_fresh(&mut self) -> Vec<(u32, Tick)> {
        std::mem::take(&mut self.fresh)
    }

    /// Takes the tokens due now out of the wheel; `deadline_of` gives a token's
    /// deadline, `None` if its connection is gone. Hand the vector back with
    /// [`Timers::recycle_due`].
    pub(super) fn take_due(&mut self, deadline_of: impl Fn(u32) -> Option<Tick>) -> Vec<u32> {
        let now = self.now;
        let mut due = std::mem::take(&mut self.due);
        self.wheel.poll_due(
            now,
            |token, slot_tick| wheel::judge(deadline_of(token), slot_tick, now),
            |token| due.push(token),
        );
        due
    }

    /// Gives back the vector of [`Timers::take_due`], emptied (keeps its capacity).
    pub(super) fn recycle_due(&mut self, due: Vec<u32>) {
        debug_assert!(due.is_empty(), "due tokens left unhandled");
        self.due = due;
    }

    /// After a mass disconnect: the scratch vectors and the wheel's slots let go.
    pub(super) fn shrink(&mut self) {
        self.due = Vec::new();
        self.fresh = Vec::new();
        self.wheel.shrink();
    }
}

/// The first 10-ms mark after `now`, counted from the aligned epoch: every loop of
/// the machine's tick group (`--tick-groups`) wakes at the same marks, so heartbeats
/// due on the grid leave together.
fn next_tick_after(epoch: Instant, now: Instant) -> Instant {
    let since = now.saturating_duration_since(epoch).as_nanos();
    let marks = since / LAG_TICK.as_nanos() + 1;
    epoch + Duration::from_nanos((marks * LAG_TICK.as_nanos()) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_clock_counts_ticks_from_the_epoch() {
        let epoch = Instant::now();
        let mut timers = Timers::new(epoch, 5_000, epoch);
        assert_eq!(timers.set_clock(epoch + ms(25 * TICK_MS + 3)), 5_000);
        assert_eq!(timers.now(), 25);
        // Before the epoch (a tick group ahead of the others): tick 0.
        let mut late = Timers::new(epoch + ms(50), 0, epoch);
        late.set_clock(epoch);
        assert_eq!(late.now(), 0);
    }

    /// Ticks wrap after 2^32; the wall clock the cores add them to moves to the
    /// start of the wrap, so tick + wall clock never runs backwards.
    #[test]
    fn the_clock_wraps_and_its_wall_clock_moves_with_it() {
        let epoch = Instant::now();
        let mut timers = Timers::new(epoch, 1_000, epoch);
        let wrap = (1u64 << 32) * TICK_MS;
        let unix_start = timers.set_clock(epoch + ms(wrap + 7 * TICK_MS));
        assert_eq!(timers.now(), 7);
        assert_eq!(unix_start, 1_000 + wrap);
        let before = timers.set_clock(epoch + ms(wrap - TICK_MS));
        assert_eq!(timers.now(), u32::MAX);
        assert_eq!(before, 1_000);
        let last = before + u64::from(u32::MAX) * TICK_MS;
        assert!(unix_start + 7 * TICK_MS > last);
    }

    /// Marks lie on the epoch's 10-ms grid, whatever instant they are asked at.
    #[test]
    fn the_next_tick_is_the_next_mark_of_the_grid() {
        let epoch = Instant::now();
        assert_eq!(next_tick_after(epoch, epoch), epoch + LAG_TICK);
        assert_eq!(next_tick_after(epoch, epoch + ms(3)), epoch + ms(10));
        assert_eq!(next_tick_after(epoch, epoch + ms(10)), epoch + ms(20));
        assert_eq!(next_tick_after(epoch, epoch + ms(129)), epoch + ms(130));
        let mut timers = Timers::new(epoch, 0, epoch + ms(4));
        assert_eq!(timers.tick_due(epoch + ms(9)), None);
        assert_eq!(timers.tick_due(epoch + ms(13)), Some(ms(3)));
        assert_eq!(timers.tick_due(epoch + ms(19)), None);
        assert_eq!(timers.tick_due(epoch + ms(45)), Some(ms(25)));
        assert_eq!(timers.tick_due(epoch + ms(49)), None);
    }

    #[test]
    fn the_give_back_second_comes_once_a_second() {
        let start = Instant::now();
        let mut timers = Timers::new(start, 0, start);
        assert!(!timers.second_due(start + ms(999)));
        assert!(timers.second_due(start + ms(1_200)));
        assert!(!timers.second_due(start + ms(2_100)));
        assert!(timers.second_due(start + ms(2_200)));
    }

    /// Head timeouts wait outside the wheel until taken (once); what is put in the
    /// wheel comes out due at its tick, and only if its deadline is still that tick.
    #[test]
    fn fresh_timers_wait_outside_the_wheel_until_armed() {
        let epoch = Instant::now();
        let mut timers = Timers::new(epoch, 0, epoch);
        timers.open(0x100, 3);
        timers.open(0x200, 3);
        assert!(timers.take_due(|_| Some(3)).is_empty(), "not in the wheel");
        let fresh = timers.take_fresh();
        assert_eq!(fresh, vec![(0x100, 3), (0x200, 3)]);
        assert!(timers.take_fresh().is_empty());
        for (token, tick) in fresh {
            assert_eq!(timers.schedule(token, tick), tick);
        }
        timers.set_clock(epoch + ms(3 * TICK_MS));
        // 0x200 moved its deadline since: stale, dropped.
        let mut due = timers.take_due(|token| Some(if token == 0x100 { 3 } else { 9 }));
        assert_eq!(due, vec![0x100]);
        due.clear();
        timers.recycle_due(due);
        timers.set_clock(epoch + ms(9 * TICK_MS));
        assert!(
            timers.take_due(|_| Some(9)).is_empty(),
            "the stale entry left"
        );
    }
}
