//! One connection's state: a compact slab entry (DESIGN "the budget per connection").
//!
//! An idle subscribed connection owns no buffer: `pending` exists only while a request
//! or WebSocket frame is incomplete, `out` only while output waits on a full socket.
//! Everything else is a few integers. `size_of::<Conn>()` is checked by a test below.

use crate::output::OutQueue;
use mio::net::TcpStream;
use wire::{BodyDecoder, Route, WsMessageState};

/// What the connection is doing; decides how input is read and deliveries are written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum State {
    /// Waiting for (the rest of) a request head; the head timeout runs.
    Head,
    /// Between requests on a keep-alive connection; the idle timeout runs.
    Idle,
    /// Reading a request body (decoder and bytes in `pending.request`).
    Body,
    /// HTTP/1.1 chunked streaming subscription (A1).
    Stream,
    /// Server-Sent Events subscription (A2).
    Sse,
    /// WebSocket subscription (A4).
    WebSocket,
    /// A long-poll request waiting for a message or its timeout (A3); `since` in `pending`.
    PollWaiting,
    /// The last bytes are being written; the connection closes once `out` drains.
    Closing,
}

impl State {
    /// Subscribed states receive deliveries and heartbeats and are exempt from the
    /// keep-alive timeout.
    pub fn is_subscription(self) -> bool {
        matches!(self, State::Stream | State::Sse | State::WebSocket)
    }
}

/// Flag: the connection is logged in to the router as `user`.
pub const LOGGED_IN: u8 = 1;
/// Flag: the current request asked to keep the connection open.
pub const KEEP_ALIVE: u8 = 2;
/// Flag: a WebSocket close frame has been sent.
pub const WS_CLOSE_SENT: u8 = 4;

pub struct Conn {
    pub stream: TcpStream,
    /// Generation of this slab slot, part of the token the router sees, so a delivery
    /// planned for a closed connection never reaches a newer one in the same slot.
    pub gen: u8,
    pub state: State,
    pub flags: u8,
    pub ws: WsMessageState,
    /// Wheel tick of the connection's one timer (see `wheel`).
    pub deadline: u32,
    /// Per-source-address accounting key (0 when the per-IP limit is off).
    pub ip_key: u32,
    pub user: u64,
    pub pending: Option<Box<Pending>>,
    pub out: Option<Box<OutQueue>>,
}

/// Input that could not be handled yet; allocated only while it exists.
#[derive(Default)]
pub struct Pending {
    /// Unconsumed bytes: a partial head or frame, or pipelined requests waiting their turn.
    pub input: Vec<u8>,
    /// A request whose head is parsed and whose body is being read.
    /// Boxed again: a waiting long-poll keeps this box for `poll_since` and should not
    /// pay for a body decoder it does not use.
    pub request: Option<Box<PendingRequest>>,
    /// Long-poll: the sequence number the waiting request reads after (kept here, not
    /// in `Conn`, so streaming connections do not pay 8 bytes for it).
    pub poll_since: u64,
}

pub struct PendingRequest {
    pub route: Route,
    pub decoder: BodyDecoder,
    pub body: Vec<u8>,
}

impl Conn {
    pub fn new(stream: TcpStream, gen: u8, ip_key: u32) -> Conn {
        Conn {
            stream,
            gen,
            state: State::Head,
            flags: 0,
            ws: WsMessageState::default(),
            deadline: 0,
            ip_key,
            user: 0,
            pending: None,
            out: None,
        }
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    pub fn set(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }

    pub fn queued_bytes(&self) -> usize {
        self.out.as_ref().map_or(0, |q| q.bytes())
    }

    /// Drops the pending box once nothing is left in it (idle connections hold none).
    pub fn tidy_pending(&mut self) {
        if let Some(p) = &self.pending {
            if p.input.is_empty() && p.request.is_none() && self.state != State::PollWaiting {
                self.pending = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slab entry is the largest part of the per-connection budget (≤ 256 B in all,
    /// router presence and allocator included).
    #[test]
    fn conn_fits_in_a_cache_line() {
        assert!(
            std::mem::size_of::<Conn>() <= 64,
            "Conn is {} bytes",
            std::mem::size_of::<Conn>()
        );
    }
}
