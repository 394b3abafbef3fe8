//! `POST /subscribe` and `/unsubscribe` (docs/protocol.md "HTTP/2: subscribe on an
//! open connection"): an HTTP/2 stream asks another stream of its connection, the
//! one whose subscription said `session=<name>`, to join or leave a channel.
//!
//! Three steps across two cores, the pump carrying between them (it alone knows
//! which streams share a connection): the POST's core asks ([`ask`]: the outbox's
//! control) and waits; the named stream's core does it, through the path a framed
//! WebSocket's control frames take ([`Connection::handle_control`], `channels::
//! control`), and answers at once or when its join is answered (the outbox's
//! answers); the POST's core makes the answer its response
//! ([`Connection::handle_control_answer`]).
//!
//! Who may: the POST needs no token of its own. Only streams of the same HTTP/2
//! connection can reach one another, and the named stream's own grant (its token's
//! `chan` claim) decides what it may join; the page's `Origin` is checked as a
//! subscription's. Over HTTP/1.1 a stream has no neighbours: 400.

use super::{access, Connection, Cx, State, KEEP_ALIVE, MULTIPLEXED};
use wire::{BodyKind, RequestHead, StreamControl};

/// The answer to a `POST /subscribe` or `/unsubscribe`: its status and JSON body,
/// and the channel it was about (the pump matches a later answer to its POST by
/// it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlAnswer {
    pub channel: String,
    pub status: u16,
    pub body: String,
}

impl ControlAnswer {
    pub(crate) fn new(channel: &str, status: u16, body: String) -> ControlAnswer {
        ControlAnswer {
            channel: channel.to_string(),
            status,
            body,
        }
    }

    /// `{"channel":C,"error":why}`, in the words a framed WebSocket is told.
    pub(crate) fn refused(channel: &str, status: u16, why: &str) -> ControlAnswer {
        let body = serde_json::json!({ "channel": channel, "error": why }).to_string();
        ControlAnswer::new(channel, status, body)
    }

    /// No stream of the connection has the POST's `session` (or it ended before it
    /// answered): 404.
    pub fn no_stream(channel: &str) -> ControlAnswer {
        let body = serde_json::json!({ "error": NO_STREAM }).to_string();
        ControlAnswer::new(channel, 404, body)
    }
}

const NO_STREAM: &str = "no stream with this session on this connection";
const NEEDS_H2: &str = "subscribe and unsubscribe reach a stream through its own HTTP/2 \
                        connection (the one whose request said session=), or use a framed \
                        WebSocket's control frames";

/// A `POST /subscribe` or `/unsubscribe` was routed: checked, then handed to the
/// pump (HTTP/2) or refused (HTTP/1.1).
pub(super) fn ask(conn: &mut Connection, cx: &mut Cx, control: StreamControl, head: &RequestHead) {
    if let Err(why) = access::check_origin(cx, head) {
        return access::refuse(conn, cx, head, why);
    }
    if !matches!(head.body, BodyKind::None | BodyKind::Length(0)) {
        return conn.fail(cx, 400, "this request takes no body");
    }
    if !conn.has(MULTIPLEXED) {
        let body = serde_json::json!({ "error": NEEDS_H2 }).to_string();
        return respond(conn, cx, 400, &body);
    }
    cx.out.control(control);
    conn.state = State::Controlling;
    // A stream that never answers (its join's reply lost) must not hold the POST.
    conn.arm(cx, cx.config.head_timeout);
}

fn respond(conn: &mut Connection, cx: &mut Cx, status: u16, body: &str) {
    let keep = conn.has(KEEP_ALIVE);
    conn.respond(cx, keep, |out| {
        wire::write_response(out, status, "application/json", body.as_bytes(), keep, &[])
    });
}

impl Connection {
    /// This HTTP/2 stream is asked, by a POST on its connection, to join or leave a
    /// channel. Returns the answer when there is one now; `None` when the join went
    /// to the bus: the answer then comes with its reply, in the outbox's answers.
    pub fn handle_control(
        &mut self,
        cx: &mut Cx,
        control: &StreamControl,
    ) -> Option<ControlAnswer> {
        super::channels::handle_stream_control(self, cx, control)
    }

    /// The stream a POST named answered (or the pump found none): the POST's
    /// response. Ignored unless the POST still waits.
    pub fn handle_control_answer(&mut self, cx: &mut Cx, answer: &ControlAnswer) {
        if self.state == State::Controlling {
            respond(self, cx, answer.status, &answer.body);
        }
    }
}
