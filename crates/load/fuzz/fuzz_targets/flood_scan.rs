//! `flood`'s response scanner (`load::flood::scan::Scanner`) on arbitrary server
//! bytes: what a load client reads from the server it measures, a Pusher server's
//! frames (`Transport::Pusher`) among them. Never a panic, and the same events
//! whatever the reads' split (a ping's payload aside: it is given only when the
//! whole frame came in one read). Only a Pusher connection asks to subscribe, is
//! subscribed or refused, and its only answer is `pusher:pong`.
//!
//! The first byte picks the transport and the scanner's modes, the second the size
//! of the reads (0: all at once); the rest is what the server sent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use load::flood::scan::{pusher::PONG, Event, Scanner, Transport};

const TRANSPORTS: [Transport; 6] = [
    Transport::Pusher,
    Transport::Ws,
    Transport::Socketio,
    Transport::Stream,
    Transport::Sse,
    Transport::Poll,
];

/// An event as owned data, comparable across splits.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Head(u16),
    Message,
    Stamp(u64),
    Ping,
    Answer(&'static [u8]),
    Subscribe,
    Subscribed,
    Refused,
    End,
    BodyDone(u64),
    Malformed,
    Body(u8),
}

fn run(mut s: Scanner, t: Transport, data: &[u8], piece: usize) -> Vec<Seen> {
    let mut seen = Vec::new();
    for part in data.chunks(piece.max(1)) {
        s.handle_bytes(t, part, &mut |e| {
            seen.push(match e {
                Event::Head(c) => Seen::Head(c),
                Event::Message => Seen::Message,
                Event::Stamp(ts) => Seen::Stamp(ts),
                Event::Ping(_) => Seen::Ping,
                Event::Answer(a) => Seen::Answer(a),
                Event::Subscribe => Seen::Subscribe,
                Event::Subscribed => Seen::Subscribed,
                Event::Refused => Seen::Refused,
                Event::End => Seen::End,
                Event::BodyDone { last } => Seen::BodyDone(last),
                Event::Malformed => Seen::Malformed,
                Event::Body(b) => {
                    assert_eq!(b.len(), 1, "a body event is one byte");
                    Seen::Body(b[0])
                }
            })
        });
    }
    seen
}

fuzz_target!(|data: &[u8]| {
    let [mode, piece, bytes @ ..] = data else {
        return;
    };
    let t = TRANSPORTS[usize::from(mode % 6)];
    let mut s = Scanner::new(0);
    if mode & 0x40 != 0 {
        s.stamped_only();
    }
    if mode & 0x80 != 0 {
        s.track();
    }
    let whole = run(s, t, bytes, bytes.len());
    let piece = match *piece {
        0 => bytes.len(),
        n => usize::from(n % 16) + 1,
    };
    assert_eq!(run(s, t, bytes, piece), whole, "reads of {piece} bytes");
    for e in &whole {
        match e {
            Seen::Subscribe | Seen::Subscribed | Seen::Refused => {
                assert_eq!(t, Transport::Pusher, "{e:?} on {t:?}")
            }
            Seen::Answer(a) if t == Transport::Pusher => assert_eq!(*a, PONG),
            _ => {}
        }
    }
});
