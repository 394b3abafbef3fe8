//! One publish-port connection's exchanges driven by a script of bytes, for the fuzz
//! target `port_exchange` and its stable-Rust replay (`tests/port_exchange.rs`):
//! network bytes reach [`Exchange`] in arbitrary cuts, every publish is answered,
//! the router may start draining at any point. Properties checked: no panic, no
//! byte consumed twice or beyond what was given, every answer is whole HTTP/1.1
//! responses, and nothing is read after the exchange said close.

use super::exchange::{Exchange, Step};
use super::PortConfig;
use auth::ApiKeys;
use bus::Reply;

/// Runs `data`: byte 0 picks the peer (loopback or not), byte 1 the cut sizes and
/// byte 2 when the drain starts; the rest is what the client sends.
pub fn run(data: &[u8]) {
    let [peer, cut, drain_at, ref sent @ ..] = *data else {
        return;
    };
    let config = PortConfig {
        api_keys: ApiKeys::default(),
        max_message: 64,
        max_batch: 512,
    };
    let mut exchange = Exchange::new(&config, peer & 1 == 0);
    let cut = usize::from(cut % 32) + 1;
    let drain_at = usize::from(drain_at) * 4;
    let mut buffered: Vec<u8> = Vec::new();
    let mut fed = 0;
    // As the pump (`connection::serve`) drives it, with cuts for reads.
    loop {
        let draining = fed >= drain_at;
        let (used, mut step) = exchange.handle_bytes(&buffered, draining);
        assert!(
            used <= buffered.len(),
            "consumed {used} of {}",
            buffered.len()
        );
        buffered.drain(..used);
        if let Step::Publish(_) = step {
            step = exchange.handle_reply(Reply::of_publish(1, 2, 1, None));
        }
        whole_responses(&exchange.take_output());
        match step {
            Step::Close => return,
            Step::Read if used > 0 && !buffered.is_empty() => continue,
            _ => {}
        }
        if fed == sent.len() {
            return; // the peer closed
        }
        let more = &sent[fed..(fed + cut).min(sent.len())];
        fed += more.len();
        buffered.extend_from_slice(more);
    }
}

/// `out` is zero or more complete responses: each a status line, headers, and a
/// body of exactly its `Content-Length`.
fn whole_responses(mut out: &[u8]) {
    while !out.is_empty() {
        assert!(out.starts_with(b"HTTP/1.1 "), "not a response: {out:?}");
        let end = out
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a response head ends")
            + 4;
        let head = std::str::from_utf8(&out[..end]).expect("a head is text");
        let status: u16 = head[9..12].parse().expect("a status code");
        let length: usize = match head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
        {
            Some(n) => n.trim().parse().expect("a length is a number"),
            None => {
                // RFC 9110 8.6: these carry neither a body nor a length.
                assert!(matches!(status, 100..=199 | 204 | 304), "{head}");
                0
            }
        };
        assert!(out.len() >= end + length, "a body cut short");
        out = &out[end + length..];
    }
}
