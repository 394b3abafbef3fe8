//! The router sharded (`--router-shards 2`): two router processes, each owning the
//! users `u % 2` (presence, sequence numbers, history), two gateways on two ports. The
//! semantics of one process hold across shards: a publish reaches every connection
//! of the subject and of its followers whichever shard and gateway hold them, with
//! exact counts; each user's messages arrive in sequence order although publishes to
//! its subjects enter through both shards; SSE and long-poll resume on the other
//! gateway.

mod common;

use common::cluster::*;
use common::*;

fn router(nats: &Nats, shard: u16) -> Router {
    let shard = shard.to_string();
    Router::start_with(
        nats,
        "memory",
        &["--router-shards", "2", "--router-shard", &shard],
    )
    .0
}

fn gateway2(nats: &Nats) -> Server {
    gateway_with(nats, &["--router-shards", "2"])
}

#[test]
fn a_publish_reaches_followers_on_both_shards_with_exact_counts() {
    let nats = Nats::start();
    let (_r0, _r1) = (router(&nats, 0), router(&nats, 1));
    let (a, b) = (gateway2(&nats), gateway2(&nats));
    // 2 (shard 0), 3 and 5 (shard 1) follow 1 (shard 1); 4 follows nobody.
    let (status, body) = a.request("POST", "/subscriptions", b"2 1\n3 1\n5 1\n");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""added":3"#), "{body}");
    let mut held = Vec::new();
    for (server, user) in [(&a, 1), (&b, 1), (&a, 2), (&b, 3), (&b, 4), (&a, 5)] {
        held.push((user, subscribe_stream(server, user)));
    }
    wait_router_connections(&a, 6);
    let reply = b.publish(1, "hello");
    assert_eq!(reply["connections"], 5, "{reply}");
    assert_eq!(reply["users"], 4, "{reply}");
    for (user, (s, buf)) in held.iter_mut() {
        if *user != 4 {
            read_until(s, buf, "hello");
        }
    }
    // A subject on shard 0 with a follower on shard 1.
    assert_eq!(a.request("PUT", "/subscriptions/3/4", b"").0, 200);
    let reply = a.publish(4, "to four");
    assert_eq!(
        (reply["connections"].as_u64(), reply["users"].as_u64()),
        (Some(2), Some(2))
    );
    let (status, body) = b.request("GET", "/subscribers/1", b"");
    assert_eq!((status, body.trim()), (200, "[2,3,5]"));
}

/// A back-end's NATS request reaches both shards and gets ONE answer: the sum of
/// both shards' counts (shard 0 gathers shard 1's part).
#[test]
fn a_back_end_publish_through_nats_gets_the_counts_of_both_shards() {
    let nats = Nats::start();
    let (_r0, _r1) = (router(&nats, 0), router(&nats, 1));
    let (a, b) = (gateway2(&nats), gateway2(&nats));
    // 2 (shard 0), 3 and 5 (shard 1) follow 1 (shard 1); 4 follows nobody.
    assert_eq!(
        a.request("POST", "/subscriptions", b"2 1\n3 1\n5 1\n").0,
        200
    );
    let mut held = Vec::new();
    for (server, user) in [(&a, 1), (&b, 1), (&a, 2), (&b, 3), (&b, 4), (&a, 5)] {
        held.push((user, subscribe_stream(server, user)));
    }
    wait_router_connections(&a, 6);
    let replies = backend_request(&nats, 1, "from-a-back-end");
    assert_eq!(replies, [r#"{"connections":5,"users":4}"#]);
    for (user, (s, buf)) in held.iter_mut() {
        if *user != 4 {
            read_until(s, buf, "from-a-back-end");
        }
    }
    // A subject owned by shard 0 with its one follower on shard 1.
    assert_eq!(a.request("PUT", "/subscriptions/3/4", b"").0, 200);
    let replies = backend_request(&nats, 4, "to four");
    assert_eq!(replies, [r#"{"connections":2,"users":2}"#]);
}

#[test]
fn a_users_messages_stay_in_order_when_publishes_enter_through_both_shards() {
    let nats = Nats::start();
    let (_r0, _r1) = (router(&nats, 0), router(&nats, 1));
    let (a, b) = (gateway2(&nats), gateway2(&nats));
    // User 2 follows 7 (shard 1) and 8 (shard 0).
    assert_eq!(a.request("POST", "/subscriptions", b"2 7\n2 8\n").0, 200);
    let (mut s, mut buf) = sse(&b, 2, None);
    wait_router_connections(&a, 1);
    let publishers: Vec<_> = [(a.addr, 7u64), (b.addr, 8u64)]
        .into_iter()
        .map(|(addr, subject)| {
            std::thread::spawn(move || {
                for i in 0..50 {
                    let reply = publish_at(addr, subject, &format!("s{subject} {i}"));
                    assert_eq!(reply["connections"], 1, "{reply}");
                }
            })
        })
        .collect();
    for p in publishers {
        p.join().unwrap();
    }
    read_until(&mut s, &mut buf, "s7 49");
    read_until(&mut s, &mut buf, "s8 49");
    let events = sse_events(&buf);
    let seqs: Vec<u64> = events.iter().map(|e| e.0).collect();
    assert_eq!(
        seqs,
        (1..=100).collect::<Vec<_>>(),
        "one numbering, in order"
    );
    for subject in [7, 8] {
        let mine: Vec<&String> = events
            .iter()
            .map(|e| &e.1)
            .filter(|d| d.starts_with(&format!("s{subject} ")))
            .collect();
        let want: Vec<String> = (0..50).map(|i| format!("s{subject} {i}")).collect();
        assert_eq!(mine, want.iter().collect::<Vec<_>>());
    }
}

#[test]
fn sse_and_long_poll_resume_on_the_other_gateway_across_shards() {
    let nats = Nats::start();
    let (_r0, _r1) = (router(&nats, 0), router(&nats, 1));
    let (a, b) = (gateway2(&nats), gateway2(&nats));
    for user in [10u64, 11] {
        let (mut s, mut buf) = sse(&a, user, None);
        wait_router_connections(&a, 1);
        for i in 1..=3 {
            b.publish(user, &format!("u{user} m{i}"));
        }
        read_until(&mut s, &mut buf, &format!("u{user} m3"));
        let first = sse_events(&buf)[0].0;
        let resume_at = format!("{}-{first}", last_sse_id(&buf).split('-').next().unwrap());
        drop(s);
        // Resume after the first message on the other gateway: the two others come.
        let (mut again, mut buf2) = sse(&b, user, Some(&resume_at));
        read_until(&mut again, &mut buf2, &format!("u{user} m3"));
        let data: Vec<String> = sse_events(&buf2).into_iter().map(|e| e.1).collect();
        assert_eq!(data, [format!("u{user} m2"), format!("u{user} m3")]);
        // Long-poll from the same point on gateway a.
        let (status, body) = a.request("GET", &format!("/poll/{user}?since={resume_at}"), b"");
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains(&format!("u{user} m2")) && !body.contains("\"gap\":true"),
            "{body}"
        );
        drop(again);
        // Both connections of this user gone before the next user's count.
        wait_router_connections(&a, 0);
    }
}
