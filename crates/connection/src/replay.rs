//! What a resuming subscription is replayed (`?since=` on a stream or WebSocket,
//! `Last-Event-ID` on SSE, over HTTP/1.1 or an HTTP/2 stream): the user's history
//! after its position, counted against `--max-queued` like any other output. When
//! the whole replay does not fit the connection's budget, the newest messages that
//! fit are sent and the older ones reported as a gap in the transport's documented
//! words (the stream's and WebSocket's `position … gap`, SSE's `event: gap`), so a
//! client that never reads holds at most its budget however long the history.
//!
//! Not here: the transport heads and the position line (`reply`).

use super::Cx;
use bus::{HistoryRead, Message};
use std::sync::Arc;
use wire::Transport;

/// Bytes of the budget left for the transport's head and the position or gap line
/// sent before the replay (each under 200 bytes).
const HEAD_ROOM: usize = 512;

/// How one replayed message is framed.
#[derive(Clone, Copy)]
pub(super) struct Framing {
    pub transport: Transport,
    /// An HTTP/1.0 stream: close-delimited lines.
    pub http10: bool,
    pub epoch: Option<u32>,
}

impl Framing {
    pub fn write(self, out: &mut Vec<u8>, seq: u64, payload: &[u8]) {
        match self.transport {
            Transport::Stream if self.http10 => wire::write_stream_line(out, &[payload]),
            Transport::Stream => wire::write_stream_message(out, payload),
            Transport::Sse => {
                let id = wire::Since {
                    epoch: self.epoch,
                    seq,
                };
                wire::write_sse_id(out, id);
                wire::write_sse_data(out, payload);
            }
            Transport::WebSocket => {
                wire::write_ws_frame(out, wire::ws_message_opcode(payload), payload)
            }
        }
    }
}

/// The messages of `history` to replay — its newest that fit in what `cx` leaves of
/// the connection's `max_queued` — and whether older ones were cut (a gap to
/// report, beside any gap `history` has already).
pub(super) fn fit<'h>(
    cx: &Cx,
    history: &'h HistoryRead,
    framing: Framing,
) -> (&'h [(u64, Arc<Message>)], bool) {
    let budget = cx.config.max_queued.saturating_sub(cx.queued + HEAD_ROOM);
    let messages = &history.messages;
    let mut used = 0;
    let mut scratch = Vec::new();
    let mut first = messages.len();
    for (seq, msg) in messages.iter().rev() {
        scratch.clear();
        framing.write(&mut scratch, *seq, &msg.payload);
        used += scratch.len();
        if used > budget {
            break;
        }
        first -= 1;
    }
    (&messages[first..], first > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Outbox;
    use bytes::Bytes;

    fn history(n: u64, size: usize) -> HistoryRead {
        HistoryRead {
            messages: (1..=n)
                .map(|seq| {
                    let payload = Bytes::from(vec![b'x'; size]);
                    (seq, Arc::new(Message::to_subject(1, payload)))
                })
                .collect(),
            last: n,
            gap: false,
            epoch: Some(7),
        }
    }

    #[test]
    fn the_newest_messages_that_fit_are_kept_and_the_cut_is_said() {
        let config = crate::Config {
            max_queued: HEAD_ROOM + 10 * 1024,
            ..crate::harness::config()
        };
        let mut out = Outbox::default();
        let mut credentials = crate::Credentials::default();
        let cx = Cx {
            now: 0,
            config: &config,
            queued: 0,
            out: &mut out,
            credentials: &mut credentials,
            key: 0,
        };
        for transport in [Transport::Stream, Transport::Sse, Transport::WebSocket] {
            let framing = Framing {
                transport,
                http10: false,
                epoch: Some(7),
            };
            let all = history(64, 1000);
            let (kept, cut) = fit(&cx, &all, framing);
            assert!(cut);
            assert_eq!(kept.last().unwrap().0, 64, "the newest is kept");
            assert!((8..=10).contains(&kept.len()), "{}", kept.len());
            let mut bytes = Vec::new();
            for (seq, m) in kept {
                framing.write(&mut bytes, *seq, &m.payload);
            }
            assert!(bytes.len() <= 10 * 1024);

            let small = history(5, 100);
            let (kept, cut) = fit(&cx, &small, framing);
            assert_eq!((kept.len(), cut), (5, false), "what fits goes whole");
        }
        // Output already queued leaves less room.
        let cx = Cx {
            queued: 10 * 1024,
            ..cx
        };
        let framing = Framing {
            transport: Transport::Stream,
            http10: false,
            epoch: None,
        };
        let three = history(3, 10);
        let (kept, cut) = fit(&cx, &three, framing);
        assert_eq!((kept.len(), cut), (0, true));
    }
}
