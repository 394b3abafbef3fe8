//! A gateway that nats-server cuts off while the router stays connected loses what
//! the router sent it meanwhile. Nothing of it may be missed silently: the gateway
//! asks the router for the batches it lost and delivers them late, in order; and
//! what the router no longer keeps (`--replay-bytes`) makes the gateway tell its
//! connections to resume (`event: reconnect`, before anything after the hole), the
//! client resuming from its last id getting everything from history, with no gap.
//! And under a steady publisher, a restart of nats-server loses nothing silently.

mod common;

use common::cluster::*;
use common::*;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The user whose SSE subscription is checked, and the one whose big messages fill
/// the stopped gateway's socket until nats-server cuts it off.
const WATCHED: u64 = 7;
const BULK: u64 = 8;

/// Two gateways on `shards` routers (with `router_flags`), nats-server cutting off a
/// client with more than 64 KiB waiting for it. Gateway A, holding the watched SSE
/// subscription, is stopped while 4 MiB for another user pile up for it (its
/// socket's buffers take most of it), so nats-server cuts it off; m2 comes before
/// that, m3 after. Returns once A is back and has seen its NATS connection drop,
/// with the watched stream (m1 read). With two shards, the watched user and the
/// other one live on different shards: both shards' batches are lost.
fn cut_off(shards: u16, router_flags: &[&str]) -> CutOff {
    let dir = tempfile::tempdir().unwrap();
    let nats = Nats::start_configured(dir.path(), "max_pending: 65536\nmax_payload: 65536\n");
    let count = shards.to_string();
    let routers = (0..shards)
        .map(|i| {
            let shard = i.to_string();
            let mut flags = router_flags.to_vec();
            if shards > 1 {
                flags.extend(["--router-shards", &count, "--router-shard", &shard]);
            }
            Router::start_with(&nats, "memory", &flags).0
        })
        .collect();
    let gateway_flags = ["--head-timeout", "2", "--router-shards", &count];
    let (a, b) = (
        gateway_with(&nats, &gateway_flags),
        gateway_with(&nats, &gateway_flags),
    );
    let (mut watched, mut seen) = sse(&a, WATCHED, None);
    let (mut bulk, _) = subscribe_stream(&a, BULK);
    std::thread::spawn(move || read_all(&mut bulk));
    wait_router_connections(&a, 2);
    assert_eq!(b.publish(WATCHED, "m1")["connections"], 1);
    read_until(&mut watched, &mut seen, "data: m1\n");

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
    CutOff {
        _dir: dir,
        _nats: nats,
        _routers: routers,
        a,
        b,
        watched,
        seen,
    }
}

struct CutOff {
    _dir: tempfile::TempDir,
    _nats: Nats,
    _routers: Vec<Router>,
    a: Server,
    b: Server,
    watched: TcpStream,
    seen: Vec<u8>,
}

#[test]
fn a_gateway_cut_off_by_nats_gets_what_it_lost_again() {
    gets_what_it_lost_again(1);
}

#[test]
fn a_gateway_cut_off_by_nats_gets_what_it_lost_again_from_every_router_shard() {
    gets_what_it_lost_again(2);
}

fn gets_what_it_lost_again(shards: u16) {
    // Kept whole: a pattern with `..` would drop nats-server and the routers here.
    let CutOff {
        a, watched, seen, ..
    } = &mut cut_off(shards, &["--replay-bytes", "16777216"]);
    // Nothing else is published: m2 and m3 come back because the gateway asked
    // for them once its connection was back, not because a later message showed
    // the hole.
    read_until(watched, seen, "data: m3\n");
    let got = sse_events(seen);
    assert_eq!(
        got,
        [(1, "m1".into()), (2, "m2".into()), (3, "m3".into())],
        "{}",
        String::from_utf8_lossy(seen)
    );
    assert!(!String::from_utf8_lossy(seen).contains("event: reconnect"));
    // Every shard was asked (its counters summed in the gateway's /stats).
    let stats = a.wait_stats("the routers' replays counted", |s| {
        s["batches_replayed"].as_u64() >= Some(1) && s["replays"].as_u64() >= Some(shards.into())
    });
    assert_eq!(stats["nats_lost_told"], 0, "{stats}");
    assert_eq!(stats["replays_missed"], 0, "{stats}");
}

#[test]
fn a_gateway_that_lost_more_than_the_router_kept_tells_its_subscribers_to_resume() {
    // The router keeps 64 KB per gateway: less than the MiBs A lost.
    let CutOff {
        a,
        b,
        watched,
        seen,
        ..
    } = &mut cut_off(1, &["--replay-bytes", "65536"]);
    // The subscription is told to resume and closed, with nothing after the hole.
    watched
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut published = 3;
    loop {
        published += 1;
        publish_when_up(b, WATCHED, &format!("m{published}"));
        let got = read_all(watched);
        seen.extend_from_slice(&got);
        if String::from_utf8_lossy(seen).contains("event: reconnect") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never told to resume: {:?}",
            String::from_utf8_lossy(seen)
        );
    }
    let before = sse_events(seen);
    let got: Vec<&str> = before.iter().map(|e| e.1.as_str()).collect();
    assert!(
        got == ["m1"] || got == ["m1", "m2"],
        "up to the hole, and nothing after it: {got:?}"
    );
    let stats = a.wait_stats("the router's missed replay counted", |s| {
        s["replays_missed"].as_u64() >= Some(1)
    });
    assert!(stats["nats_lost_told"].as_u64() >= Some(1), "{stats}");

    // Resuming from the last id gets the rest from history, in order, no gap.
    let last = format!("m{published}");
    let (mut resumed, mut buf) = sse(b, WATCHED, Some(&last_sse_id(seen)));
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

/// SPEC's NATS-restart fault under a steady publisher: every publish answered with
/// a delivery reaches the subscriber on the other gateway, in order and once —
/// directly, or after the subscriber was told to resume and came back for it. What
/// is refused while the broker is down is the publisher's to repeat.
#[test]
fn a_nats_restart_under_a_steady_publisher_loses_nothing_silently() {
    const USER: u64 = 51;
    let nats = Nats::start();
    let port = nats.port();
    let _router = Router::start(&nats, "memory");
    let (a, b) = (gateway(&nats), gateway(&nats));
    let (mut watched, mut seen) = sse(&a, USER, None);
    wait_router_connections(&a, 1);

    let mut nats = Some(nats);
    let answers: Vec<(u64, u16, u64)> = std::thread::scope(|scope| {
        let publisher = scope.spawn(|| {
            (1..=300u64)
                .map(|i| {
                    let (status, body) =
                        b.request("POST", &format!("/pub/{USER}"), format!("m{i}").as_bytes());
                    let reached = serde_json::from_str::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|v| v["connections"].as_u64())
                        .unwrap_or(0);
                    std::thread::sleep(Duration::from_millis(10));
                    (i, status, reached)
                })
                .collect()
        });
        std::thread::sleep(Duration::from_millis(800));
        drop(nats.take());
        // Longer than the gateway's call timeout (3 s): publishes sent into the
        // outage are refused, not carried through by a quick reconnect.
        std::thread::sleep(Duration::from_millis(3500));
        nats = Some(Nats::start_on(port));
        publisher.join().unwrap()
    });
    let delivered: Vec<u64> = answers
        .iter()
        .filter(|&&(_, status, reached)| status == 200 && reached >= 1)
        .map(|&(i, _, _)| i)
        .collect();
    let refused = answers.iter().filter(|a| a.1 != 200).count();
    assert!(
        refused > 0,
        "the broker was down for part of the run: {answers:?}"
    );
    let last = *delivered
        .last()
        .expect("publishes delivered after the restart");

    // Read up to the last delivered message, or to a told resume and then from
    // history on the other gateway.
    let want = format!("data: m{last}\n");
    watched
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = String::from_utf8_lossy(&seen).to_string();
        if text.contains(&want) || text.contains("event: reconnect") {
            break;
        }
        assert!(Instant::now() < deadline, "m{last} never came: {text:?}");
        seen.extend_from_slice(&read_all(&mut watched));
    }
    let mut got = sse_events(&seen);
    if !String::from_utf8_lossy(&seen).contains(&want) {
        let (mut resumed, mut buf) = sse(&b, USER, Some(&last_sse_id(&seen)));
        read_until(&mut resumed, &mut buf, &want);
        got.extend(sse_events(&buf));
    }
    let numbers: Vec<u64> = got
        .iter()
        .map(|(_, data)| data.trim_start_matches('m').parse().unwrap())
        .collect();
    assert!(
        numbers.windows(2).all(|w| w[0] < w[1]),
        "in order, each once: {numbers:?}"
    );
    let missing: Vec<u64> = delivered
        .iter()
        .copied()
        .filter(|i| !numbers.contains(i))
        .collect();
    assert!(
        missing.is_empty(),
        "answered as delivered, never received: {missing:?}"
    );
    drop(nats);
}
