//! The start-up path end to end: edges written to a real SQLite store, streamed
//! back with `for_each_edge` into the index builder, then published over.

use std::sync::Arc;
use std::time::Instant;

use router::{ConnRef, Message, Reach, Router, RouterConfig, SubscriptionIndex};

fn index_from(store: &mut dyn store::Store) -> SubscriptionIndex {
    let mut b = SubscriptionIndex::builder();
    let n = store
        .for_each_edge(&mut |subscriber, subject| b.push(subscriber, subject))
        .expect("stream edges");
    let index = b.build();
    assert_eq!(index.edge_count(), n);
    index
}

#[test]
fn index_rebuilt_from_sqlite_matches_the_store_and_fans_out_exactly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("graph.db").display());
    let big = u64::MAX - 5;
    // A star around 1 (everyone follows 1), a chain, a self-follow, and ids past
    // 2^63 that SQL sorts first (the builder must cope with that order).
    let mut edges: Vec<(u64, u64)> = (2..=300u64).map(|u| (u, 1)).collect();
    edges.extend((2..300u64).map(|u| (u, u + 1)));
    edges.extend([(1, 1), (big, 1), (1, big), (big, big - 1)]);
    {
        let mut s = store::open(&url).expect("open");
        s.add(&edges).expect("add");
        s.remove(&[(7, 1)]).expect("remove");
    }
    let mut s = store::open(&url).expect("reopen");
    let index = index_from(&mut *s);
    assert_eq!(index.edge_count(), s.edge_count().expect("count"));
    for subject in [1, 2, 150, 300, big, big - 1, 999] {
        assert_eq!(
            index.subscribers(subject),
            s.subscribers(subject).expect("query"),
            "subject {subject}"
        );
    }

    let mut r = Router::new(RouterConfig::default(), index);
    for u in (1..=300u64).chain([big]) {
        r.handle_login(
            u,
            ConnRef {
                loop_id: (u % 3) as u16,
                token: u as u32,
            },
        );
    }
    let mut delivered = 0u32;
    let msg = Arc::new(Message::to_subject(1, bytes::Bytes::from_static(b"hi")));
    let counts = r.handle_publish(&msg, &Reach::Followers, Instant::now(), &mut |d| {
        assert_eq!(d.seq, 1);
        delivered += 1;
    });
    // 1 itself (also a self-follower, counted once) + 2..=300 except 7 + big.
    assert_eq!(counts.users, 1 + 298 + 1);
    assert_eq!(counts.connections, counts.users);
    assert_eq!(delivered, counts.connections);
}
