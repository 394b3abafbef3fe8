//! An HTTP/2 stream's core (`Connection::set_multiplexed`): its connection's PING is
//! the heartbeat, so the stream arms no timer and writes no heartbeat of its own.

use super::harness::{history, Harness};
use super::*;

const SSE_REQUEST: &[u8] = b"GET /sse/7 HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n";

#[test]
fn a_multiplexed_sse_subscription_beats_never_and_still_gets_messages() {
    let mut h = Harness::new();
    h.conn.set_multiplexed();
    h.bytes(SSE_REQUEST);
    let step = h.reply(Reply::History(history(0, &[], false)));
    assert!(step.text().contains("retry: 2000"), "{}", step.text());
    assert_eq!(step.timer, None, "no heartbeat timer for a stream");
    // The head timeout's entry still in the pump's wheel fires once: nothing happens.
    h.now += 10 * h.config.heartbeat;
    let step = h.step(|c, cx| c.handle_timeout(cx));
    assert!(step.bytes.is_empty(), "{}", step.text());
    assert_eq!(step.timer, None);
    let (outcome, step) = h.deliver(1, b"hi");
    assert_eq!(outcome, Outcome::Sent);
    assert!(step.text().ends_with("data: hi\n\n"), "{}", step.text());
}

#[test]
fn the_same_subscription_on_its_own_connection_beats() {
    let mut h = Harness::new();
    h.bytes(SSE_REQUEST);
    let step = h.reply(Reply::History(history(0, &[], false)));
    assert!(step.timer.is_some(), "a heartbeat timer");
    assert_eq!(h.fire_timer().bytes, wire::SSE_HEARTBEAT);
}
