//! The router sharded (`--router-shards 2`, and 3): router processes each owning the
//! users `u % K` (presence, sequence numbers, history) and the subjects `s % K`
//! (their follower lists and publishes), two gateways on two ports. The semantics of
//! one process hold across shards: a publish reaches every connection of the subject
//! and of its followers whichever shard and gateway hold them, with exact counts
//! (the subject's shard forwards the followers other shards own and answers once
//! they counted); each user's messages arrive in sequence order on every connection
//! although publishes to its subjects come through several shards; subscription
//! changes through either gateway take effect for the next publish; SSE and
//! long-poll resume on the other gateway; a batch over both shards arrives in its
//! order; a shard that does not count makes the publish an error, never a partial
//! count; a batch divided among shards, one of them dead, is answered with an
//! error saying what the live one published.

mod common;

use common::cluster::*;
use common::*;

fn router(nats: &Nats, shard: u16) -> Router {
    router_of(nats, shard, 2)
}

fn router_of(nats: &Nats, shard: u16, count: u16) -> Router {
    let (shard, count) = (shard.to_string(), count.to_string());
    Router::start_with(
        nats,
        "memory",
        &["--router-shards", &count, "--router-shard", &shard],
    )
    .0
}

fn gateway2(nats: &Nats) -> Server {
    gateway_with(nats, &["--router-shards", "2"])
}

fn gateway3(nats: &Nats) -> Server {
    gateway_with(nats, &["--router-shards", "3"])
}

/// Two router shards, two gateways, and user 2 (shard 0) following 7 (shard 1:
/// forwarded to shard 0) and 8 (shard 0) with an SSE connection on each gateway.
/// Fields drop in order: the connections first, the broker last.
struct FollowerOfBothShards {
    streams: [(std::net::TcpStream, Vec<u8>); 2],
    a: Server,
    b: Server,
    _routers: (Router, Router),
    _nats: Nats,
}

fn follower_of_both_shards() -> FollowerOfBothShards {
    let nats = Nats::start();
    let routers = (router(&nats, 0), router(&nats, 1));
    let (a, b) = (gateway2(&nats), gateway2(&nats));
    assert_eq!(a.request("POST", "/subscriptions", b"2 7\n2 8\n").0, 200);
    let streams = [sse(&b, 2, None), sse(&a, 2, None)];
    wait_router_connections(&a, 2);
    FollowerOfBothShards {
        streams,
        a,
        b,
        _routers: routers,
        _nats: nats,
    }
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
    let mut f = follower_of_both_shards();
    let (a, b) = (&f.a, &f.b);
    let publishers: Vec<_> = [(a.addr, 7u64), (b.addr, 8u64)]
        .into_iter()
        .map(|(addr, subject)| {
            std::thread::spawn(move || {
                for i in 0..50 {
                    let reply = publish_at(addr, subject, &format!("s{subject} {i}"));
                    assert_eq!(reply["connections"], 2, "{reply}");
                }
            })
        })
        .collect();
    for p in publishers {
        p.join().unwrap();
    }
    for (s, buf) in f.streams.iter_mut() {
        read_until(s, buf, "s7 49");
        read_until(s, buf, "s8 49");
        let events = sse_events(buf);
        let seqs: Vec<u64> = events.iter().map(|e| e.0).collect();
        assert_eq!(
            seqs,
            (1..=100).collect::<Vec<_>>(),
            "one numbering, in order, on every connection"
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
}

/// A batch whose items alternate between the shards reaches a user following
/// subjects of both in the batch's order, as one process does: each shard delivers
/// once it has heard the other's part. Without that, shard 0's items (delivered
/// directly) came before shard 1's (forwarded to shard 0 first). A batch marked
/// `?parallel=1` skips the wait: each subject's items in order, no more.
#[test]
fn a_batch_over_both_shards_reaches_a_follower_in_the_batchs_order() {
    let mut f = follower_of_both_shards();
    let b = &f.b;
    let mut sent = Vec::new();
    for batch in 0..10 {
        let mut lines = String::new();
        // 7, 7, 8, 7, 8, 8, 7, 8: runs of one and of two items of each shard.
        for (i, subject) in [7, 7, 8, 7, 8, 8, 7, 8].into_iter().enumerate() {
            let data = format!("b{batch} i{i} s{subject}");
            lines.push_str(&format!("{{\"subject\":{subject},\"data\":\"{data}\"}}\n"));
            sent.push(data);
        }
        let (status, body) = b.request("POST", "/pub", lines.as_bytes());
        assert_eq!(status, 200, "{body}");
        assert!(body.contains(r#""messages":8"#), "{body}");
        assert!(body.contains(r#""connections":16"#), "{body}");
    }
    // Independent items (`?parallel=1`): both shards' parts at once; everything
    // arrives, each subject's items in order, numbered in arrival order.
    let mut lines = String::new();
    for i in 0..20 {
        let subject = [7, 8][i % 2];
        lines.push_str(&format!(
            "{{\"subject\":{subject},\"data\":\"p{i} s{subject}\"}}\n"
        ));
    }
    let (status, body) = b.request("POST", "/pub?parallel=1", lines.as_bytes());
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#""messages":20"#) && body.contains(r#""connections":40"#),
        "{body}"
    );
    let (status, body) = b.request("POST", "/pub?parallel=maybe", lines.as_bytes());
    assert_eq!(status, 400, "{body}");
    for (s, buf) in f.streams.iter_mut() {
        read_until(s, buf, "b9 i7 s8");
        let events = sse_events(buf);
        let data: Vec<&String> = events.iter().map(|e| &e.1).take(80).collect();
        assert_eq!(data, sent.iter().collect::<Vec<_>>(), "the batches' order");
        // Each subject's last item (each shard keeps its part's order).
        read_until(s, buf, "p18 s7");
        read_until(s, buf, "p19 s8");
        let events = sse_events(buf);
        let seqs: Vec<u64> = events.iter().map(|e| e.0).collect();
        assert_eq!(seqs, (1..=100).collect::<Vec<_>>());
        for subject in [7, 8] {
            let mine: Vec<&String> = events[80..]
                .iter()
                .map(|e| &e.1)
                .filter(|d| d.ends_with(&format!(" s{subject}")))
                .collect();
            let want: Vec<String> = (0..20)
                .filter(|i| [7, 8][i % 2] == subject)
                .map(|i| format!("p{i} s{subject}"))
                .collect();
            assert_eq!(mine, want.iter().collect::<Vec<_>>());
        }
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

/// Three shards: one subject's followers spread over all of them and both gateways;
/// changes through either gateway count for the next publish; the subscriber list
/// comes from the subject's shard, the subscription list from all of them.
#[test]
fn three_shards_divide_the_followers_with_exact_counts() {
    let nats = Nats::start();
    let _routers: Vec<Router> = (0..3).map(|i| router_of(&nats, i, 3)).collect();
    let (a, b) = (gateway3(&nats), gateway3(&nats));
    // Subject 1 (shard 1) followed by 3, 6 (shard 0), 4 (shard 1), 2, 8 (shard 2);
    // 2 also follows 9 (shard 0): the batch's items are on shards 0 and 1.
    let (status, body) = a.request("POST", "/subscriptions", b"2 1\n3 1\n4 1\n6 1\n8 1\n2 9\n");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""added":6"#), "{body}");
    a.wait_stats("6 edges over the shards", |s| {
        s["subscription_edges"] == 6 && s["router_shards"] == 3
    });
    let mut held = Vec::new();
    for (server, user) in [
        (&a, 1),
        (&b, 1),
        (&a, 2),
        (&b, 3),
        (&a, 4),
        (&b, 5),
        (&b, 6),
        (&a, 8),
        (&b, 8),
    ] {
        held.push((user, subscribe_stream(server, user)));
    }
    wait_router_connections(&a, 9);
    let reply = b.publish(1, "one");
    assert_eq!(
        (reply["connections"].as_u64(), reply["users"].as_u64()),
        (Some(8), Some(6)),
        "{reply}"
    );
    for (user, (s, buf)) in held.iter_mut() {
        if *user != 5 {
            read_until(s, buf, "one");
        }
    }
    let (status, body) = b.request("GET", "/subscribers/1", b"");
    assert_eq!((status, body.trim()), (200, "[2,3,4,6,8]"));
    let (status, body) = b.request("GET", "/subscriptions/2", b"");
    assert_eq!((status, body.trim()), (200, "[1,9]"));
    // Through gateway b, 3 stops following; through a, 5 starts.
    assert_eq!(b.request("DELETE", "/subscriptions/3/1", b"").0, 200);
    assert_eq!(a.request("PUT", "/subscriptions/5/1", b"").0, 200);
    let reply = a.publish(1, "two");
    assert_eq!(
        (reply["connections"].as_u64(), reply["users"].as_u64()),
        (Some(8), Some(6)),
        "{reply}"
    );
    b.publish(3, "to three");
    for (user, (s, buf)) in held.iter_mut() {
        if *user == 3 {
            read_until(s, buf, "to three");
            assert!(
                !String::from_utf8_lossy(buf).contains("two"),
                "3 unfollowed"
            );
        } else {
            read_until(s, buf, "two");
        }
    }
    // A batch to two shards' subjects: one answer, every item counted once.
    let lines = b"{\"subject\":1,\"data\":\"b1\"}\n{\"subject\":9,\"data\":\"b9\"}\n";
    let (status, body) = b.request("POST", "/pub", lines);
    assert_eq!(status, 200, "{body}");
    let reply: serde_json::Value = serde_json::from_str(&body).unwrap();
    // Subject 1: 8 connections of 6 users; subject 9: its follower 2 only.
    assert_eq!(
        (
            reply["messages"].as_u64(),
            reply["connections"].as_u64(),
            reply["users"].as_u64()
        ),
        (Some(2), Some(9), Some(7)),
        "{reply}"
    );
    // Shard 2 had no item of it, only followers (2 and 8): it waited for the two
    // shards with items alone, and 2 got the batch in its order.
    for (user, (s, buf)) in held.iter_mut() {
        if *user == 2 {
            read_until(s, buf, "b9");
            let text = String::from_utf8_lossy(buf);
            assert!(text.find("b1") < text.find("b9"), "{text}");
        }
    }
    // A back-end's publish: answered once, by subject 1's shard, with every count.
    assert_eq!(
        backend_request(&nats, 1, "from-a-back-end"),
        [r#"{"connections":8,"users":6}"#]
    );
}

/// A shard that does not count its part (killed) makes the publish an error that
/// says which shards answered — through a gateway and through NATS — not a 200
/// with the counts of the others: a 504 without `Retry-After`, since a retry would
/// deliver the answered part again.
#[test]
fn a_shard_that_does_not_count_makes_the_publish_an_error() {
    let nats = Nats::start();
    let (r0, _r1) = (router(&nats, 0), router(&nats, 1));
    let a = gateway2(&nats);
    // 2 (shard 0) follows 1 (shard 1).
    assert_eq!(a.request("PUT", "/subscriptions/2/1", b"").0, 200);
    let (mut s, mut buf) = subscribe_stream(&a, 1);
    wait_router_connections(&a, 1);
    assert_eq!(a.publish(1, "before")["users"], 1);
    read_until(&mut s, &mut buf, "before");
    r0.kill();
    let started = std::time::Instant::now();
    let response = a.request_text("POST", "/pub/1", b"after");
    assert!(
        response.starts_with("HTTP/1.1 504 Gateway Timeout\r\n")
            && !response.contains("Retry-After")
            && response.contains("router shard 0 did not count")
            && response.contains("shard 1: 1 connections of 1 users"),
        "{response}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // Shard 1's own follower was still reached; the shard counted the failure.
    read_until(&mut s, &mut buf, "after");
    a.wait_stats("a publish a shard did not count", |s| {
        s["shard_forwards_uncounted"] == 1
    });
    let replies = backend_request(&nats, 1, "late");
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert!(
        replies[0].contains("error") && replies[0].contains("router shard 0 did not count"),
        "{replies:?}"
    );
}

/// A dead shard (kill -9) and a batch divided between it and a live one: the
/// gateway answers once its gather timeout passes — long before `--head-timeout`
/// (30 s here; the client's read timeout is 10 s) — with a 504 (no `Retry-After`)
/// that names the dead shard and says what the live one delivered without its
/// part (after waiting for it a second); the gathered call is not left waiting,
/// and calls to the live shard alone still work.
#[test]
fn a_batch_over_a_dead_shard_is_answered_with_what_the_live_shard_published() {
    let nats = Nats::start();
    let (_r0, r1) = (router(&nats, 0), router(&nats, 1));
    let a = gateway_with(
        &nats,
        &[
            "--router-shards",
            "2",
            "--head-timeout",
            "30",
            "--admin",
            "127.0.0.1:0",
        ],
    );
    // User 2 (shard 0) receives subject 2 (shard 0) as its own subject.
    let (mut s, mut buf) = subscribe_stream(&a, 2);
    wait_router_connections(&a, 1);
    let lines = b"{\"subject\":2,\"data\":\"b2\"}\n{\"subject\":1,\"data\":\"b1\"}\n";
    let (status, body) = a.request("POST", "/pub", lines);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""messages":2"#), "{body}");
    read_until(&mut s, &mut buf, "b2");
    r1.kill();
    let lines = b"{\"subject\":2,\"data\":\"after\"}\n{\"subject\":1,\"data\":\"lost\"}\n\
                  {\"subject\":2,\"data\":\"later\"}\n";
    let started = std::time::Instant::now();
    let body = a.request_text("POST", "/pub", lines);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert!(
        body.starts_with("HTTP/1.1 504 Gateway Timeout\r\n") && !body.contains("Retry-After"),
        "{body}"
    );
    assert!(
        body.contains("router shard 1 did not answer within 3 s")
            && body.contains("its part of the batch (1 of 3 messages) may or may not have")
            && body.contains(
                "shard 0 answered: router shard 1 sent no part of the batch within 1 s: \
                 shard 0 delivered its 2 messages and what the others sent to 2 \
                 connections of 2 users"
            ),
        "{body}"
    );
    // The live shard delivered its part without the silent one's, in order, and
    // counted the batch as incomplete.
    read_until(&mut s, &mut buf, "later");
    let text = String::from_utf8_lossy(&buf);
    assert!(text.find("after") < text.find("later"), "{text}");
    a.wait_stats("an incomplete ordered batch", |s| {
        s["ordered_batches_incomplete"] == 1
    });
    let stats = &a.admin_stats()["extra"];
    assert_eq!(
        (
            stats["nats_gathers_waiting"].as_u64(),
            stats["nats_gathers_expired"].as_u64()
        ),
        (Some(0), Some(1)),
        "{stats}"
    );
    // Calls to the live shard alone: a publish and a subscription change.
    let reply = a.publish(2, "alone");
    assert_eq!(reply["users"], 1, "{reply}");
    read_until(&mut s, &mut buf, "alone");
    let (status, body) = a.request("PUT", "/subscriptions/4/2", b"");
    assert_eq!(status, 200, "{body}");
}
