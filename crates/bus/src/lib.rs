//! `bus`: the one seam between gateways and the router (DESIGN "pieces").
//!
//! A gateway event loop asks the router side for something with [`Bus::call`] on
//! behalf of one connection ([`ConnRef`]: the loop and its token for the connection):
//! log in (and read history), log out, publish, change subscriptions, read history,
//! list ids. The reply comes back at once when the router lives in this process
//! (`hub::LocalBus`), or later through the loop's [`Mailbox`] when it lives
//! elsewhere (over NATS). Deliveries always arrive in the mailbox: one [`Mail`]
//! per publish and loop, never one item per recipient.
//!
//! This crate is only the seam: types and the trait. It knows no socket, no store
//! and no broker, so a gateway links neither the store nor a database driver. Its
//! types are plain data with serde derives: over NATS they cross as they are
//! (`cluster::codec` wraps them in envelopes), never as a copy made for the wire.
//!
//! Layout:
//! - [`request`]: [`Request`] and [`Reply`], what crosses the seam.
//! - [`mailbox`]: [`Mailbox`], a loop's inbox of deliveries and late replies.
//! - [`http`]: a publish over HTTP — its request ([`http::publish_request`]) and its
//!   answer ([`PublishAnswer`]).

pub mod http;
pub mod mailbox;
pub mod request;

pub use http::PublishAnswer;
pub use mailbox::{Inbound, Mail, Mailbox, Target, Wake};
pub use request::{Call, ChannelJoin, Reply, Request};
pub use router::channels::Occupied;
pub use router::{
    ConnRef, HistoryRead, Member, Message, Presence, PresenceOf, PublishCounts, Refusal,
    RouterStats,
};

/// The router side as a gateway sees it.
///
/// Ordering promise every implementation keeps: the deliveries of one user reach
/// each loop in that user's sequence order, and a `Login` with `since` reads history
/// and starts deliveries with nothing missed and nothing twice between the two.
pub trait Bus: Send + Sync {
    /// Sends `request` on behalf of connection `conn`. Returns the reply when it is
    /// ready at once; otherwise `None`, and the reply arrives later in the mailbox of
    /// `conn.loop_id` as [`Inbound::Reply`] with `conn.token`. Requests whose reply
    /// carries nothing (`Logout`) may be answered with [`Reply::Done`] at once.
    fn call(&self, conn: ConnRef, request: Request) -> Option<Reply>;
}
