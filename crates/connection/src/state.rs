//! What a connection is doing (`Connection::state`): one byte, so the connection
//! stays 32 bytes.

use bus::Call;
use wire::Transport;

/// What the connection is doing; decides how input is read and deliveries written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum State {
    /// Waiting for (the rest of) a request head; the head timeout runs.
    Head,
    /// Reading a request body (`pending.body`); the head timeout runs.
    Body,
    /// Between requests on a keep-alive connection; the idle timeout runs.
    Idle,
    /// An API request waits for its bus reply.
    Calling(Call),
    /// A subscription's login waits for its reply (which carries the history), one
    /// variant per transport: `Calling` is then the only variant with data and the
    /// state one byte, which leaves the connection its byte for `beat_phase`.
    SubscribingStream,
    SubscribingSse,
    SubscribingWebSocket,
    /// A long-poll's login and history read wait for their reply.
    Polling,
    /// A long-poll waits for a message or its timeout (A3).
    PollWaiting,
    /// A `POST /subscribe` or `/unsubscribe` waits for the answer of the HTTP/2
    /// stream it names (`stream_control`).
    Controlling,
    /// HTTP/1.1 chunked streaming subscription (A1).
    Stream,
    /// Server-Sent Events subscription (A2).
    Sse,
    /// WebSocket subscription (A4).
    WebSocket,
    /// The last bytes are being written; the caller half-closes once they are out,
    /// and the connection closes at the peer's EOF or the linger timeout.
    Closing,
}

impl State {
    /// Subscribed states receive deliveries and heartbeats and are exempt from the
    /// keep-alive timeout.
    pub fn is_subscription(self) -> bool {
        matches!(self, State::Stream | State::Sse | State::WebSocket)
    }

    /// States that wait for the bus and hold any input meanwhile.
    pub(super) fn is_waiting(self) -> bool {
        matches!(
            self,
            State::Calling(_) | State::Polling | State::PollWaiting | State::Controlling
        ) || self.subscribing().is_some()
    }

    /// The state of a subscription over `transport` whose login waits for its reply.
    pub(super) fn subscribing_to(transport: Transport) -> State {
        match transport {
            Transport::Stream => State::SubscribingStream,
            Transport::Sse => State::SubscribingSse,
            Transport::WebSocket => State::SubscribingWebSocket,
        }
    }

    /// The transport of a subscription whose login waits for its reply.
    pub(super) fn subscribing(self) -> Option<Transport> {
        match self {
            State::SubscribingStream => Some(Transport::Stream),
            State::SubscribingSse => Some(Transport::Sse),
            State::SubscribingWebSocket => Some(Transport::WebSocket),
            _ => None,
        }
    }
}
