//! The scanner's Pusher Channels client (protocol 7, `/app/<key>?protocol=7`): a text
//! frame's `"event":"<name>"` is read byte by byte (any key order, any split) and
//! decides what the frame is — the greeting asks for the subscription
//! ([`Event::Subscribe`]), `pusher:ping` for a `pusher:pong` ([`Event::Answer`]),
//! `pusher_internal:subscription_succeeded` opens the connection
//! ([`Event::Subscribed`]), `pusher:subscription_error` refuses it
//! ([`Event::Refused`]); any other event is a message when stamped (the scanner is
//! stamped-only for Pusher: member events and errors are not deliveries).
//!
//! State, in the scanner's match bytes while a data frame is read: `m1` the progress
//! on `"event":"`, `m2` the position in the name + 1 (0: not in a name), `m3` the
//! names still possible (a bit each), then the name found ([`KNOWN`] | index) or
//! [`OTHER`]. An escaped quote ends a name early: no event name of the protocol has one.

use super::*;

/// The key whose value names a frame's event (serde_json and myriad write no spaces).
const EVENT_KEY: &[u8] = b"\"event\":\"";
/// The events the client acts on, by index.
const NAMES: [&[u8]; 4] = [
    b"pusher:connection_established",
    b"pusher:ping",
    b"pusher_internal:subscription_succeeded",
    b"pusher:subscription_error",
];
const ESTABLISHED: u8 = 0;
const PING: u8 = 1;
const SUCCEEDED: u8 = 2;
const REFUSED: u8 = 3;
/// `m3`: the event's name was read and is `NAMES[m3 & !KNOWN]`.
const KNOWN: u8 = 0x80;
/// `m3`: the event's name was read and is none of `NAMES`.
const OTHER: u8 = 0x40;
/// The answer to `pusher:ping`.
pub const PONG: &[u8] = br#"{"event":"pusher:pong","data":{}}"#;

/// The subscription a Pusher client sends once established.
pub fn subscribe_frame(channel: &str) -> Vec<u8> {
    serde_json::json!({ "event": "pusher:subscribe", "data": { "channel": channel } })
        .to_string()
        .into_bytes()
}

impl Scanner {
    /// One payload byte of a Pusher text frame.
    #[inline]
    pub(super) fn pusher_byte(&mut self, b: u8) {
        self.flags |= F_NONWS;
        if self.m2 > 0 {
            if b == b'"' {
                let len = usize::from(self.m2 - 1);
                let alive = self.m3;
                let found =
                    (0..NAMES.len()).find(|&i| alive & (1 << i) != 0 && NAMES[i].len() == len);
                self.m3 = found.map_or(OTHER, |i| KNOWN | i as u8);
                self.m2 = 0;
                return;
            }
            let at = usize::from(self.m2 - 1);
            for (i, name) in NAMES.iter().enumerate() {
                if name.get(at) != Some(&b) {
                    self.m3 &= !(1 << i);
                }
            }
            self.m2 = self.m2.saturating_add(1);
            return;
        }
        // Only the first `"event"` key names the frame (a data string's quotes are escaped).
        if self.m3 & (KNOWN | OTHER) == 0 && step(&mut self.m1, EVENT_KEY, b) {
            self.m2 = 1;
            self.m3 = (1 << NAMES.len()) - 1;
        }
    }

    /// A Pusher frame ended (`fin`: the message is whole): the match bytes go back to
    /// zero for the next frame head, and a whole message says what it was.
    pub(super) fn pusher_frame_end(&mut self, fin: bool, out: &mut impl FnMut(Event<'_>)) {
        self.m1 = 0;
        self.m2 = 0;
        if !fin {
            return;
        }
        let kind = std::mem::replace(&mut self.m3, 0);
        if kind & KNOWN == 0 {
            return self.message_end(out);
        }
        self.ts_flush(out);
        self.tsm = 0;
        self.flags &= !(F_NONWS | F_HAS_TS);
        match kind & !KNOWN {
            ESTABLISHED => out(Event::Subscribe),
            PING => out(Event::Answer(PONG)),
            SUCCEEDED => out(Event::Subscribed),
            REFUSED => out(Event::Refused),
            _ => {}
        }
    }
}
