//! `observe`: process and kernel statistics, loop lag, CSV, Prometheus, `top`, plots and the dashboard.
//!
//! Layout:
//! - [`metrics`]: atomics the gateway loops write (no IO, no locks).
pub mod metrics;

pub use metrics::{LoopMetrics, ProcessMetrics};
