//! `load`: the tools that produce myriad's numbers, usable against any push server.
//!
//! Layout:
//! - [`flood`]: N client connections (stream / SSE / WebSocket / long-poll) from one
//!   machine, many source addresses, child processes past the file limit; counts
//!   messages and publish→receive latency (SPEC G1).
//! - [`msggen`]: publishes at a rate to random subjects over keep-alive HTTP (G2).
//! - [`drone`] and [`fleet`]: a flood agent with a control port, and a coordinator
//!   that drives many of them with a live table (G4).
//! - [`friends`]: the friends-graph generator and loader (G3).
//! - [`sprites`]: clients that long-poll and each send over HTTP with their own
//!   token (`bench sprites`, issue 46); [`sprites_child`] spreads them over processes.
//! - [`children`]: child processes that report in JSON lines (flood's and sprites').
//!
//! Not here: the server (`gateway`), the benchmark scenarios (`myriad bench`), or the
//! host's limits and `myriad doctor` (`host`, which the server uses too).

pub mod children;
pub mod dial;
pub mod drone;
pub mod fleet;
pub mod flood;
pub mod friends;
pub mod msggen;
pub mod sprites;
pub mod sprites_child;
