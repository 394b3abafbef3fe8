//! Time as the core counts it: ticks of the loop's timing wheel since the loop
//! started, compared as serial numbers. The wheel itself (which connection is due
//! when) is the pump's; the core only reads and sets ticks.

/// Time in timing-wheel ticks since the event loop started.
pub type Tick = u32;

/// Wheel resolution: the loop's own 10-ms tick (SPEC F1's lag probe), so a timer
/// fires on the tick it is due and heartbeats can beat on a grid as fine as 10 ms.
pub const TICK_MS: u64 = 10;

/// Whether tick `now` is at or past `deadline`. Ticks are u32 and wrap (after 497 days
/// of 10-ms ticks): compared as serial numbers (RFC 1982), which holds while no
/// deadline is more than half the range (248 days) ahead — `ServerConfig::core`
/// clamps every duration to [`MAX_TICKS`].
pub fn reached(deadline: u32, now: u32) -> bool {
    (now.wrapping_sub(deadline) as i32) >= 0
}

/// The longest duration a timer may be set for, in ticks (124 days at 10 ms): a
/// quarter of the range, so deadlines stay comparable (see [`reached`]).
pub const MAX_TICKS: u32 = 1 << 30;

/// The first tick at or after `tick` that lies `phase` (taken modulo `grid`) ticks
/// past a multiple of `grid` (the heartbeat grid, ≥ 1): the grid shifted by the
/// connection's phase; phase 0 rounds up to a multiple of `grid`.
pub fn on_grid_phase(tick: u32, grid: u32, phase: u32) -> u32 {
    let grid = grid.max(1);
    let behind = (phase % grid + grid - tick % grid) % grid;
    tick.wrapping_add(behind)
}
