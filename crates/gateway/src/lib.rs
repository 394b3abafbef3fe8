//! `gateway`: holds client connections and moves bytes (DESIGN "pieces").
//!
//! A sans-IO connection core (crate `connection`: bytes, replies, deliveries and time in; bytes, bus
//! requests and timers out) inside a thin [`pump`]: one event loop per core that owns
//! sockets, a slab, a timing [`wheel`], a scratch read buffer and write queues. The
//! gateway never knows about subscriptions or stores: it asks the [`bus`] seam.
//!
//! One publish, socket to socket:
//! 1. `pump::io` reads a publisher's socket into the per-loop scratch buffer and
//!    hands the bytes to its `connection::Connection`.
//! 2. `connection::request` parses the head and body (`wire`) and leaves a
//!    `Request::Publish` in the loop's `Outbox`.
//! 3. `pump::io::settle` sends it with `Bus::call`; the router side (`hub`) plans
//!    the fan-out and pushes one `Delivery` batch into each loop's `Mailbox`. A
//!    small batch for a loop asleep in `epoll_wait` is run at once by this loop
//!    (`pump::handoff`); other loops are woken.
//! 4. The reply goes back to the core (`connection::reply`), which writes the 200.
//! 5. Each loop's `pump::inbox` takes its batch; for every target
//!    `connection::delivery` writes the message in its transport's framing (encoded once
//!    per loop), and `pump::io` writes it to the socket — at once, or coalesced
//!    into one `writev` per connection when several batches arrived together.
//!
//! Glossary (one word per thing): a *connection* is one client socket and its
//! core; a *loop* is one event-loop thread; a *slot* is a connection's slab entry;
//! a *token* names a slot and its generation; a *tick* is one step of the wheel;
//! a *subject*, *subscription*, *publish* and *delivery* are as in the `router`
//! crate; the *bus* is the seam to the router, the *hub* its in-process other side.
//!
//! Layout: [`config`] flags and settings (it builds the core's `connection::Config`; the
//! core names no flag); [`server`] start/stop; [`gateway`] what the loops share;
//! [`peers`] connections per client address; `connection` (crate) the protocol, with its own
//! settings and policies ([`WsHeartbeat`], [`SlowPolicy`]); [`pump`] the loops, their
//! listener (`pump::accept`) and the hand-off between them (`pump::handoff`);
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
