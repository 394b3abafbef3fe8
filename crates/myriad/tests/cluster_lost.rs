//! A gateway that nats-server cuts off while the router stays connected loses what
//! the router sent it meanwhile. Its subscriptions must not miss those messages
//! silently: the first delivery after the hole skips numbers, the gateway tells the
//! connection to resume (`event: reconnect`, before that delivery), and the client
//! resuming from its last id gets everything from history, with no gap.

mod common;

use common::cluster::*;
use common::*;
use std::time::{Duration, Instant};

/// The user whose SSE subscription is checked, and the one whose big messages fill
/// the stopped gateway's socket until nats-server cuts it off.
const WATCHED: u64 = 7;
const BULK: u64 = 8;

#[test]
fn a_gateway_cut_off_by_nats_tells_its_subscribers_to_resume() {
    // A nats-server that cuts off a client with more than 64 KB waiting for it (a
    // message may not be larger than that either).
    let dir = tempfile::tempdir().unwrap();
    let nats = Nats::start_configured(dir.path(), "max_pending: 65536\nmax_payload: 65536\n");
    let _router = Router::start(&nats, "memory");
    let (a, b) = (gateway(&nats), gateway(&nats));
    let (mut watched, mut seen) = sse(&a, WATCHED, None);
    let (mut bulk, _) = subscribe_stream(&a, BULK);
    std::thread::spawn(move || read_all(&mut bulk));
    wait_router_connections(&a, 2);
    assert_eq!(b.publish(WATCHED, "m1")["connections"], 1);
    read_until(&mut watched, &mut seen, "data: m1\n");

    // Gateway A stops reading; what the router sends it piles up in its socket, then
    // in nats-server, which cuts it off past 64 KB. m3 comes after the cut.
    assert_eq!(unsafe { libc::kill(a.pid() as i32, libc::SIGSTOP) }, 0);
    b.publish(WATCHED, "m2");
    let big = "x".repeat(32 * 1024);
    for _ in 0..128 {
        b.publish(BULK, &big);
    }
    b.publish(WATCHED, "m3");
    assert_eq!(unsafe { libc::kill(a.pid() as i32, libc::SIGCONT) }, 0);
    a.wait_stats("gateway A cut off by nats-server", |s| {
        s["nats_disconnects"].as_u64() >= Some(1)
    });

    // Once A is back, a delivery to the watched user skips m3: the subscription is
    // told to resume and closed, before that delivery reaches it.
    watched
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut published = 3;
    loop {
        published += 1;
        publish_when_up(&b, WATCHED, &format!("m{published}"));
        let got = read_all(&mut watched);
        seen.extend_from_slice(&got);
        if String::from_utf8_lossy(&seen).contains("event: reconnect") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never told to resume: {:?}",
            String::from_utf8_lossy(&seen)
        );
    }
    let before = sse_events(&seen);
    let got: Vec<&str> = before.iter().map(|e| e.1.as_str()).collect();
    assert!(
        got == ["m1"] || got == ["m1", "m2"],
        "up to the hole, and nothing after it: {got:?}"
    );
    let stats = a.stats();
    assert!(stats["nats_lost_told"].as_u64() >= Some(1), "{stats}");

    // Resuming from the last id gets the rest from history, in order, no gap.
    let last = format!("m{published}");
    let (mut resumed, mut buf) = sse(&b, WATCHED, Some(&last_sse_id(&seen)));
    read_until(&mut resumed, &mut buf, &format!("data: {last}\n"));
    assert!(
        !String::from_utf8_lossy(&buf).contains("event: gap"),
        "{}",
        String::from_utf8_lossy(&buf)
    );
    let all: Vec<(u64, String)> = before.into_iter().chain(sse_events(&buf)).collect();
    let want: Vec<(u64, String)> = (1..=published).map(|i| (i, format!("m{i}"))).collect();
    assert_eq!(all, want);
}
