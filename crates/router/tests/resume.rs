//! Resume (SPEC B6) through the public API: epochs tell a restarted router or a
//! dropped history from the current one, a client ahead of the router is moved
//! back to its numbers, and history is bounded in bytes per user and in total.

use std::sync::Arc;
use std::time::{Duration, Instant};

use router::history::ENTRY_OVERHEAD;
use router::{ConnRef, Message, Reach, Router, RouterConfig, SubscriptionIndex};

fn conn(token: u32) -> ConnRef {
    ConnRef { loop_id: 0, token }
}

fn msg(subject: u64, len: usize) -> Arc<Message> {
    Arc::new(Message::to_subject(
        subject,
        bytes::Bytes::from(vec![b'x'; len]),
    ))
}

fn router(seed: u64, config: RouterConfig) -> Router {
    Router::new(
        RouterConfig {
            epoch_seed: seed,
            ..config
        },
        SubscriptionIndex::new(),
    )
}

fn seqs(h: &router::HistoryRead) -> Vec<u64> {
    h.messages.iter().map(|(s, _)| *s).collect()
}

#[test]
fn a_restarted_router_is_detected_by_its_epoch() {
    let now = Instant::now();
    let mut a = router(1, RouterConfig::default());
    a.handle_login(7, conn(1));
    for _ in 0..5 {
        a.handle_publish(&msg(7, 3), &Reach::Followers, now, &mut |_| {});
    }
    let (epoch, last) = a.position(7);
    let epoch = epoch.expect("user 7 has history");
    assert_eq!(last, 5);
    let h = a.history_read(7, Some(epoch), 3);
    assert_eq!((seqs(&h), h.gap, h.epoch), (vec![4, 5], false, Some(epoch)));
    assert!(h.recovered());

    // "Restart": a new router (new seed), the same traffic pattern.
    let mut b = router(2, RouterConfig::default());
    b.handle_login(7, conn(1));
    for _ in 0..5 {
        b.handle_publish(&msg(7, 3), &Reach::Followers, now, &mut |_| {});
    }
    let h = b.history_read(7, Some(epoch), 3);
    assert_ne!(h.epoch, Some(epoch), "a new incarnation has a new epoch");
    assert!(h.gap, "same numbers, other epoch: not recoverable");
    assert_eq!(seqs(&h), vec![1, 2, 3, 4, 5], "everything still kept");
    // Without an epoch the client cannot be told apart (documented legacy form).
    assert!(!b.history_read(7, None, 3).gap);
    // Before any message after the restart: no history at all.
    let c = router(3, RouterConfig::default());
    let h = c.history_read(7, Some(epoch), 3);
    assert!(h.gap && h.messages.is_empty() && h.last == 0 && h.epoch.is_none());
    assert!(
        !c.history_read(7, None, 0).gap,
        "a fresh client lost nothing"
    );
}

#[test]
fn since_ahead_of_last_moves_the_client_forward() {
    // The old bug: a long-poll with since > last answered `last: since` and the
    // client asked again with the same since, forever.
    let now = Instant::now();
    let mut r = router(1, RouterConfig::default());
    r.handle_login(1, conn(1));
    r.handle_publish(&msg(1, 1), &Reach::Followers, now, &mut |_| {});
    r.handle_publish(&msg(1, 1), &Reach::Followers, now, &mut |_| {});
    let h = r.history_read(1, None, 50);
    assert_eq!((h.last, h.gap, seqs(&h)), (2, true, vec![1, 2]));
    // The client takes `last` and is in step again.
    let h = r.history_read(1, h.epoch, h.last);
    assert_eq!((h.gap, h.messages.len()), (false, 0));
    r.handle_publish(&msg(1, 1), &Reach::Followers, now, &mut |_| {});
    let h2 = r.history_read(1, h.epoch, 2);
    assert_eq!((seqs(&h2), h2.gap), (vec![3], false));
}

#[test]
fn expired_history_starts_a_new_epoch() {
    let t0 = Instant::now();
    let cfg = RouterConfig {
        history_ttl: Duration::from_secs(10),
        ..RouterConfig::default()
    };
    let mut r = router(9, cfg);
    r.handle_login(4, conn(1));
    for _ in 0..3 {
        r.handle_publish(&msg(4, 1), &Reach::Followers, t0, &mut |_| {});
    }
    let (old_epoch, _) = r.position(4);
    r.handle_logout(4, conn(1), t0);
    r.handle_tick(t0 + Duration::from_secs(11));
    assert_eq!(r.position(4), (None, 0));
    // Back, and enough messages that the old numbers are reached again.
    r.handle_login(4, conn(2));
    for _ in 0..5 {
        r.handle_publish(
            &msg(4, 1),
            &Reach::Followers,
            t0 + Duration::from_secs(12),
            &mut |_| {},
        );
    }
    let (new_epoch, last) = r.position(4);
    assert_eq!(last, 5);
    assert_ne!(new_epoch, old_epoch);
    let h = r.history_read(4, old_epoch, 3);
    assert!(h.gap, "seq 3 of the old epoch is not seq 3 of this one");
    assert_eq!(seqs(&h), vec![1, 2, 3, 4, 5]);
}

#[test]
fn epochs_of_one_router_differ_per_ring_and_per_seed() {
    let now = Instant::now();
    let mut seen = std::collections::HashSet::new();
    for seed in [0u64, 1, 2] {
        let mut r = router(seed, RouterConfig::default());
        for u in 0..200u64 {
            r.handle_login(u, conn(u as u32));
            r.handle_publish(&msg(u, 1), &Reach::Followers, now, &mut |_| {});
            assert!(seen.insert(r.position(u).0.unwrap()), "epoch repeated");
        }
    }
}

#[test]
fn deliveries_carry_the_recipients_epoch() {
    let now = Instant::now();
    let mut r = Router::new(
        RouterConfig {
            epoch_seed: 5,
            ..RouterConfig::default()
        },
        SubscriptionIndex::from_edges([(2, 1)]),
    );
    r.handle_login(1, conn(1));
    r.handle_login(2, conn(2));
    let mut got = Vec::new();
    r.handle_publish(&msg(1, 1), &Reach::Followers, now, &mut |d| got.push(d));
    got.sort_by_key(|d| d.conn.token);
    assert_eq!(got.len(), 2);
    assert_eq!(Some(got[0].epoch), r.position(1).0);
    assert_eq!(Some(got[1].epoch), r.position(2).0);
    assert_ne!(got[0].epoch, got[1].epoch);
}

#[test]
fn history_is_bounded_in_bytes_per_user() {
    let now = Instant::now();
    let per = 100 + ENTRY_OVERHEAD;
    let mut r = router(
        1,
        RouterConfig {
            history: 64,
            history_bytes: 3 * per,
            ..RouterConfig::default()
        },
    );
    r.handle_login(1, conn(1));
    for _ in 0..10 {
        r.handle_publish(&msg(1, 100), &Reach::Followers, now, &mut |_| {});
    }
    let h = r.history_since(1, 0);
    assert_eq!((seqs(&h), h.gap), (vec![8, 9, 10], true));
    let s = r.stats();
    assert_eq!((s.history_bytes, s.history_messages), (3 * per as u64, 3));
    assert_eq!(
        s.history_evicted, 0,
        "per-user drops are not global evictions"
    );
    // A message alone over the per-user limit is delivered but not kept.
    let mut delivered = 0;
    r.handle_publish(&msg(1, 4 * per), &Reach::Followers, now, &mut |_| {
        delivered += 1
    });
    assert_eq!(delivered, 1);
    let h = r.history_since(1, 10);
    assert_eq!((h.last, h.gap, h.messages.len()), (11, true, 0));
    assert_eq!(r.stats().history_bytes, 0);
}

#[test]
fn total_bound_drops_offline_rings_first_then_the_writers_oldest() {
    let t0 = Instant::now();
    let per = 10 + ENTRY_OVERHEAD;
    let mut r = router(
        1,
        RouterConfig {
            history: 64,
            history_total_bytes: 10 * per,
            ..RouterConfig::default()
        },
    );
    // Users 8 and 9 got a message each, then went offline (9 later than 8).
    for (u, at) in [(8u64, 0u64), (9, 1)] {
        r.handle_login(u, conn(u as u32));
        r.handle_publish(&msg(u, 10), &Reach::Followers, t0, &mut |_| {});
        r.handle_logout(u, conn(u as u32), t0 + Duration::from_secs(at));
    }
    for u in 1..=3u64 {
        r.handle_login(u, conn(u as u32));
    }
    // 1, 2, 3, 1, 2, 3, ...: 12 messages for the online users, 14 in all; 10 fit.
    for _ in 0..4 {
        for u in 1..=3u64 {
            r.handle_publish(&msg(u, 10), &Reach::Followers, t0, &mut |_| {});
        }
    }
    let s = r.stats();
    assert_eq!(s.history_bytes, 10 * per as u64);
    assert_eq!((s.history_messages, s.history_evicted), (10, 4));
    assert_eq!(s.history_rings_evicted, 2, "both offline rings went first");
    assert_eq!(s.users_with_history, 3);
    // The longest offline went first; both are gone now, and say so on resume.
    for u in [8, 9] {
        assert_eq!(r.position(u), (None, 0));
        assert!(r.history_since(u, 1).gap);
    }
    // Then each writer over the bound lost its own oldest.
    assert_eq!(seqs(&r.history_since(1, 0)), vec![1, 2, 3, 4]);
    assert_eq!(seqs(&r.history_since(2, 0)), vec![2, 3, 4]);
    assert_eq!(seqs(&r.history_since(3, 0)), vec![2, 3, 4]);
    assert!(r.history_since(2, 0).gap && !r.history_since(1, 0).gap);
    // A message alone over the whole bound is delivered but not kept.
    let mut delivered = 0;
    r.handle_publish(&msg(1, 11 * per), &Reach::Followers, t0, &mut |_| {
        delivered += 1
    });
    assert_eq!(delivered, 1);
    let h = r.history_since(1, 4);
    assert_eq!((h.last, h.gap, h.messages.len()), (5, true, 0));
    assert!(r.stats().history_bytes <= 10 * per as u64);
}

#[test]
fn history_totals_stay_exact_through_churn_and_expiry() {
    // Random traffic over many users with small limits: the router's totals must
    // equal the sum over what each user's history still returns, and never exceed
    // the bound; the log must stay bounded (compaction).
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let t0 = Instant::now();
    let total = 4000;
    let mut r = router(
        3,
        RouterConfig {
            history: 5,
            history_bytes: 300,
            history_total_bytes: total,
            history_ttl: Duration::from_secs(5),
            ..RouterConfig::default()
        },
    );
    let mut online = std::collections::BTreeSet::new();
    for step in 0..20_000u64 {
        let now = t0 + Duration::from_millis(step);
        let u = rng.gen_range(0..50u64);
        match rng.gen_range(0..10) {
            0 if online.insert(u) => r.handle_login(u, conn(u as u32)),
            1 if online.remove(&u) => r.handle_logout(u, conn(u as u32), now),
            2 => r.handle_tick(now),
            _ => {
                r.handle_publish(
                    &msg(u, rng.gen_range(0..200)),
                    &Reach::Followers,
                    now,
                    &mut |_| {},
                );
            }
        }
        let s = r.stats();
        assert!(s.history_bytes <= total as u64);
        if step % 500 == 0 {
            let (mut bytes, mut messages) = (0u64, 0u64);
            for u in 0..50u64 {
                let h = r.history_since(u, 0);
                messages += h.messages.len() as u64;
                bytes += h
                    .messages
                    .iter()
                    .map(|(_, m)| (m.payload.len() + ENTRY_OVERHEAD) as u64)
                    .sum::<u64>();
                // Kept messages are contiguous up to `last`.
                let want: Vec<u64> = (h.last + 1 - h.messages.len() as u64..=h.last).collect();
                assert_eq!(seqs(&h), want);
            }
            assert_eq!((s.history_bytes, s.history_messages), (bytes, messages));
            let with_history = (0..50u64).filter(|u| r.position(*u).0.is_some()).count();
            assert_eq!(s.users_with_history, with_history as u64);
        }
    }
    let s = r.stats();
    assert!(s.history_evicted > 0, "the bound was exercised");
    assert!(
        s.history_rings_evicted > 0,
        "offline rings were dropped for it"
    );
}
