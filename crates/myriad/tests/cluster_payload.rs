//! NATS's max_payload between gateways and the router (issue 9): the test's own
//! nats-server with `max_payload: 65536`. A request over it is refused at once with a
//! clear error; replies over it (a subscriber list of 40,000, a resume reading a
//! quarter megabyte of history) and forwards between router shards (a payload near
//! the limit to thousands of another shard's followers) cross in parts and arrive
//! whole.

mod common;

use common::cluster::*;
use common::*;

/// The test's nats-server with `max_payload: 65536`.
fn small_nats(dir: &std::path::Path) -> Nats {
    Nats::start_configured(dir, "max_payload: 65536\n")
}

#[test]
fn a_request_over_the_nats_max_payload_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let nats = small_nats(dir.path());
    let _router = Router::start(&nats, "memory");
    let gw = gateway(&nats);
    // 40,000 edges encode to ~160 KB: over the 64 KiB max_payload.
    let big: String = (1..=40_000u64).map(|a| format!("{a} 7\n")).collect();
    let (status, body) = gw.request("POST", "/subscriptions", big.as_bytes());
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("max_payload is 65536 bytes"), "{body}");
    // The same edges in parts under the limit all arrive.
    let lines: Vec<&str> = big.lines().collect();
    let mut added = 0;
    for part in lines.chunks(5_000) {
        let (status, body) = gw.request("POST", "/subscriptions", part.join("\n").as_bytes());
        assert_eq!(status, 200, "{body}");
        let reply: serde_json::Value = serde_json::from_str(&body).unwrap();
        added += reply["added"].as_u64().unwrap();
    }
    assert_eq!(added, 40_000);
    // The link still works for everything else.
    let (_held, _) = subscribe_stream(&gw, 7);
    wait_router_connections(&gw, 1);
    assert_eq!(gw.publish(7, "x")["connections"], 1);
}

#[test]
fn replies_over_the_nats_max_payload_arrive_whole_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    let nats = small_nats(dir.path());
    let _router = Router::start(&nats, "memory");
    let (a, b) = (gateway(&nats), gateway(&nats));
    // 40,000 followers of 7 in parts under the limit; their list (~120 KB) is one reply.
    let lines: Vec<String> = (1..=40_000u64).map(|f| format!("{f} 7")).collect();
    for part in lines.chunks(5_000) {
        let (status, body) = a.request("POST", "/subscriptions", part.join("\n").as_bytes());
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = b.request("GET", "/subscribers/7", b"");
    assert_eq!(status, 200, "{}", &body[..body.len().min(200)]);
    let ids: Vec<u64> = serde_json::from_str(&body).unwrap();
    assert_eq!(ids, (1..=40_000).collect::<Vec<_>>());
    // User 9's history (kept while 9 is online on gateway a): 8 messages of 30,000
    // bytes; a resume from 0 on the other gateway reads all of it (~240 KB) in its
    // login reply.
    let (_online, _) = sse(&a, 9, None);
    wait_router_connections(&b, 1);
    let payload = |i: usize| format!("m{i} {}", "x".repeat(30_000));
    for i in 1..=8 {
        let (status, body) = a.request("POST", "/pub/9", payload(i).as_bytes());
        assert_eq!(status, 200, "{body}");
    }
    let (mut s, mut buf) = sse(&b, 9, Some("0"));
    read_until(&mut s, &mut buf, &payload(8));
    let events = sse_events(&buf);
    assert_eq!(
        events.len(),
        8,
        "{:?}",
        events.iter().map(|e| e.0).collect::<Vec<_>>()
    );
    for (i, (seq, data)) in events.iter().enumerate() {
        assert_eq!(
            (*seq, data.as_str()),
            ((i + 1) as u64, payload(i + 1).as_str())
        );
    }
    // Live deliveries in the same router turn as the replay still come in order.
    wait_router_connections(&b, 2);
    assert_eq!(a.publish(9, "after")["connections"], 2);
    read_until(&mut s, &mut buf, "data: after");
}

/// Two router shards: subject 1 (shard 1) followed by 3,000 users of shard 0, and a
/// publish of 62,000 bytes — under the limit from the gateway, but shard 1's forward
/// of it with 3,000 followers to shard 0 is not: it crosses in parts, shard 0
/// delivers and counts, and the publisher gets its counts (not the 2-s error).
#[test]
fn a_forward_between_shards_over_the_nats_max_payload_crosses_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    let nats = small_nats(dir.path());
    let _routers = Router::shards(&nats, 2);
    let gw = gateway_with(&nats, &["--router-shards", "2"]);
    let edges: String = (1..=3_000u64).map(|u| format!("{} 1\n", u * 2)).collect();
    let (status, body) = gw.request("POST", "/subscriptions", edges.as_bytes());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""added":3000"#), "{body}");
    let (mut s, mut buf) = subscribe_stream(&gw, 2);
    wait_router_connections(&gw, 1);
    let payload = format!("{}end", "x".repeat(62_000));
    let reply = gw.publish(1, &payload);
    assert_eq!(
        (reply["connections"].as_u64(), reply["users"].as_u64()),
        (Some(1), Some(1)),
        "{reply}"
    );
    read_until(&mut s, &mut buf, "xend");
}
