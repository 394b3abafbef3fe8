//! `gateway`: the event loops that own client sockets (DESIGN "pieces").
//!
//! One loop per core ([`event_loop`]), each with its own SO_REUSEPORT listener, a slab of
//! compact connection entries ([`conn`]), one timing wheel ([`wheel`]) and a scratch read
//! buffer. Request heads and frames are parsed by `wire`; who receives a message is the
//! router's business; this crate moves bytes and enforces limits and timeouts.
//! It never knows about subscriptions beyond calling the API handlers ([`api`]).
//!
//! Layout:
//! - [`config`]: `myriad serve` flags and the loops' settings.
//! - [`server`]: binding, threads, shutdown.
//! - [`shared`]: router, store and inboxes shared by the loops; the publish path.
//! - [`event_loop`]: accept, read, write, close, timers.
//! - [`request`]: requests → subscriptions, long-polls, API calls; WebSocket frames.
//! - [`delivery`]: batches → bytes on sockets; heartbeats; slow consumers.
//! - [`output`]: queued output and writev.
//! - [`api`]: the HTTP API handlers.
//! - [`serve`]: the `myriad serve` command.

pub mod api;
pub mod config;
pub mod conn;
mod delivery;
pub mod event_loop;
pub mod output;
mod request;
pub mod serve;
pub mod server;
pub mod shared;
pub mod wheel;

pub use config::{ServeArgs, ServerConfig, SlowPolicy};
pub use server::Server;
