//! `viewer`: what a person runs to look at servers — the terminal view (`myriad top`)
//! and the PNG charts (`myriad plot`).
//!
//! Who runs the code decides the crate: everything that runs inside a server process
//! (counters, `/proc` sampling, the admin listener, Prometheus, the CSV log) lives in
//! `observe`, so `myriad serve` links no terminal UI and no plotting library. This crate
//! only reads what servers publish — the admin listener's `/stats` and the CSV files —
//! and never runs inside a server.
//!
//! Layout:
//! - [`top`]: `myriad top ADDR…`, a live terminal view (ratatui) over admin addresses;
//!   `top::model` fetches and sums the numbers, `top::table` makes columns of text,
//!   `top::view` draws them.
//! - [`plot`]: `myriad plot FILE… --out DIR`, PNG charts (plotters) from the CSV logs of
//!   `serve --csv` and `flood --csv`, read with `observe::csv`.

pub mod plot;
pub mod top;
