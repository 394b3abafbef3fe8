//! `gateway`: holds client connections and moves bytes (DESIGN "pieces").
//!
//! A sans-IO connection core (crate `connection`: bytes, replies, deliveries and time in; bytes, bus
//! requests and timers out) inside a thin [`pump`]: one event loop per core that owns
//! sockets, a slab, a timing [`wheel`], a scratch read buffer and write queues. The
//! gateway never knows about subscriptions or stores: it asks the [`bus`] seam.
//!
//! One publish, socket to socket, in a loop's round (the whole path through the
//! types is in docs/architecture.md):
//! 1. `pump::io` reads a publisher's socket into the per-loop scratch buffer and
//!    hands the bytes to its `connection::Connection`, which parses them (`wire`)
//!    and leaves a `bus::Request::Publish` in the loop's `Outbox`.
//! 2. `pump::io::settle` moves the request into the round's calls; no bus call is
//!    made while the round's events run.
//! 3. At the round's end (`EventLoop::finish_round`) the calls are sent with
//!    `Bus::call`; the router side (`hub`) plans the fan-out and leaves one
//!    `bus::Mail` in each loop's `Mailbox`; the reply goes back to the core, which
//!    writes the 200. The loop writes its own mail, then settles the other loops'
//!    mailboxes once (`pump::handoff`): a sleeping loop's small mail is written
//!    here, any other loop is woken.
//! 4. Each loop's `pump::inbox` takes its mail; for every target
//!    `connection::delivery` writes the message in its transport's framing (encoded
//!    once per loop), and `pump::io` writes it to the socket — at once, or coalesced
//!    into one `writev` per connection when several mails arrived together.
//!
//! Words are the project's (docs/glossary.md): a *round*, a *call*, *mail*, a
//! *slot*, a *token*, a *tick*.
//!
//! Layout: [`config`] flags and settings (it builds the core's `connection::Config`; the
//! core names no flag); [`server`] start/stop; [`gateway`] what the loops share;
//! [`peers`] connections per client address; `connection` (crate) the protocol, with its own
//! settings and policies ([`WsHeartbeat`], [`SlowPolicy`]); [`pump`] the loops, each of owned
//! parts (connections, timers, writer, listener, TLS, HTTP/2) and the hand-off
//! between them (`pump::handoff`);
//! [`wheel`] the timers. Imports run one way: `server` → `pump` → `gateway` →
//! `config` → `connection` (crate).

pub mod config;
pub mod gateway;
pub mod peers;
pub mod pump;
pub mod server;
pub mod wheel;

pub use config::{GatewayArgs, ServerConfig, SlowPolicy, WsHeartbeat};
pub use connection::Access;
pub use server::Server;
