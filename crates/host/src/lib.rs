//! `host`: this machine's limits, read by the server and by the tools alike.
//!
//! Layout:
//! - [`sys`]: the open-file limit, RSS and CPU readings, `/proc/sys` values and the
//!   Ctrl-C flag: process plumbing that `serve`, `serve --processes`, the load tools
//!   and the benches share.
//! - [`doctor`]: `myriad doctor` (SPEC G6): file limits, sysctls, the local port range,
//!   memory, kTLS and io_uring, checked against a connection target, with the lines to
//!   change; the sysctl drop-in of `deploy/99-myriad.conf`.
//!
//! Not here: sampling a running server (`observe`), or any client traffic (`load`).
//!
//! Why not in `observe`: the doctor probes kTLS (`tls`, so rustls and ring) and io_uring
//! and parses its own flags (`clap`); `observe` sits under every crate that watches a
//! server and stays on `libc`, `serde` and `tiny_http`. Why not in `load`: the server
//! raises its file limit and reads sysctls with these, and the server does not link
//! the load tool. Linux only.

pub mod doctor;
pub mod sys;
