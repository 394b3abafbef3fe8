//! `observe`: what runs inside a server process to watch it — process and kernel
//! statistics, loop lag, the CSV log, Prometheus and the admin listener with its dashboard.
//!
//! It watches a server; it never carries a client's traffic. What a person runs to look
//! at servers from outside (`myriad top`, `myriad plot`) is the `viewer` crate, so a
//! server links no terminal UI and no plotting library. The gateway's loops write
//! [`metrics::LoopMetrics`] atomics; a [`Monitor`] samples them with `/proc` once a second.
//!
//! Layout:
//! - [`metrics`]: atomics and lock-free histograms the gateway loops write (no IO, no locks).
//! - [`kernel`]: kernel memory per TCP socket, the one definition all figures use.
//! - [`procfs`]: parsers for `/proc` files (process CPU/RSS, machine CPU/memory, sockstat, slabinfo).
//! - [`sample`]: one second of a process, [`Sample`], made by the [`sample::Sampler`].
//! - [`monitor`]: the sampler thread and the CSV log; it starts the admin listener.
//! - `state`: what the sampler, the admin listener and the monitor share.
//! - `admin`: `/metrics`, `/healthz`, `/stats`, `/history` and the dashboard page.
//! - [`prometheus`]: the text exposition format.
//! - [`csv`]: the CSV columns, writer and a header-driven reader.
//!
//! Glossary: a *connection* is one client socket; a *delivery* is one message queued to one
//! connection; *loop lag* is how late an event loop's 10 ms tick fired.

mod admin;
pub mod csv;
mod example;
pub mod kernel;
pub mod metrics;
pub mod monitor;
pub mod per_process;
pub mod procfs;
pub mod prometheus;
pub mod sample;
mod state;

pub use metrics::{LoopMetrics, ProcessMetrics};
pub use monitor::{Monitor, MonitorOptions};
pub use sample::{MachineSample, Sample};
pub use state::{Query, QueryAnswer, QueryFn};
