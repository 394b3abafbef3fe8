//! One behaviour suite run against every backend: memory, SQLite (a temp file) and
//! a real PostgreSQL on 127.0.0.1:5432 (user postgres, db test), each test in its
//! own schema so parallel runs do not collide.

use std::sync::atomic::{AtomicU32, Ordering};

use store::{Store, StoreError};

const PG_BASE: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A store plus whatever must outlive it (temp dir) or be cleaned after (schema).
struct Harness {
    store: Box<dyn Store>,
    _dir: Option<tempfile::TempDir>,
    pg_schema: Option<String>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(schema) = &self.pg_schema {
            if let Ok(mut c) = ::postgres::Client::connect(PG_BASE, ::postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
            }
        }
    }
}

fn memory() -> Harness {
    Harness {
        store: store::open("memory").expect("memory store"),
        _dir: None,
        pg_schema: None,
    }
}

fn sqlite() -> Harness {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("subs.db").display());
    Harness {
        store: store::open(&url).expect("sqlite store"),
        _dir: Some(dir),
        pg_schema: None,
    }
}

fn postgres() -> Harness {
    static N: AtomicU32 = AtomicU32::new(0);
    let schema = format!(
        "myriad_test_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let store = match store::open(&format!("{PG_BASE}?schema={schema}")) {
        Ok(s) => s,
        Err(StoreError::PostgresConnect { url, source }) => {
            panic!("cannot connect to {url}: {source}; start PostgreSQL on 127.0.0.1:5432 (./scripts/setup.sh does)")
        }
        Err(e) => panic!(
            "postgres store: {e}; start PostgreSQL on 127.0.0.1:5432 (./scripts/setup.sh does)"
        ),
    };
    Harness {
        store,
        _dir: None,
        pg_schema: Some(schema),
    }
}

const BIG: u64 = u64::MAX - 1;

fn add_remove_and_counts(s: &mut dyn Store) {
    assert_eq!(s.edge_count().unwrap(), 0);
    assert_eq!(
        s.add(&[(1, 10), (2, 10), (3, 10), (1, 11), (2, 10)])
            .unwrap(),
        4,
        "a duplicate in the batch counts once"
    );
    assert_eq!(s.add(&[(1, 10), (4, 10)]).unwrap(), 1);
    assert_eq!(s.edge_count().unwrap(), 5);
    assert_eq!(s.subscribers(10).unwrap(), vec![1, 2, 3, 4]);
    assert_eq!(s.subscriptions(1).unwrap(), vec![10, 11]);
    assert_eq!(s.remove(&[(2, 10), (2, 10), (9, 9)]).unwrap(), 1);
    assert_eq!(s.remove(&[(2, 10)]).unwrap(), 0);
    assert_eq!(s.subscribers(10).unwrap(), vec![1, 3, 4]);
    assert_eq!(s.subscriptions(2).unwrap(), Vec::<u64>::new());
    assert_eq!(s.remove(&[(1, 11)]).unwrap(), 1);
    assert!(s.subscribers(11).unwrap().is_empty());
    assert_eq!(s.edge_count().unwrap(), 3);
    assert_eq!(s.add(&[]).unwrap(), 0);
    assert_eq!(s.remove(&[]).unwrap(), 0);
}

fn large_ids_sort_as_unsigned(s: &mut dyn Store) {
    s.add(&[(BIG, 5), (7, 5), (1 << 63, 5), (5, BIG), (5, 1 << 40)])
        .unwrap();
    assert_eq!(s.subscribers(5).unwrap(), vec![7, 1 << 63, BIG]);
    assert_eq!(s.subscriptions(5).unwrap(), vec![1 << 40, BIG]);
    assert_eq!(s.subscribers(BIG).unwrap(), vec![5]);
    let mut all = Vec::new();
    assert_eq!(s.for_each_edge(&mut |a, b| all.push((a, b))).unwrap(), 5);
    all.sort_unstable();
    assert_eq!(
        all,
        vec![(5, 1 << 40), (5, BIG), (7, 5), (1 << 63, 5), (BIG, 5)]
    );
}

fn for_each_edge_streams_everything_grouped_by_subject(s: &mut dyn Store) {
    let edges: Vec<(u64, u64)> = (0..2000u64).map(|i| (i % 97 + 1, i % 13 + 100)).collect();
    let mut expect: Vec<(u64, u64)> = edges.clone();
    expect.sort_unstable();
    expect.dedup();
    assert_eq!(s.add(&edges).unwrap(), expect.len());
    let mut got = Vec::new();
    assert_eq!(
        s.for_each_edge(&mut |a, b| got.push((a, b))).unwrap(),
        expect.len() as u64
    );
    let subjects: Vec<u64> = got.iter().map(|e| e.1).collect();
    assert!(
        subjects.windows(2).all(|w| w[0] <= w[1]),
        "edges come grouped by subject in order"
    );
    got.sort_unstable();
    assert_eq!(got, expect);
}

fn bulk_load_empty_then_merge(s: &mut dyn Store) {
    let reported = std::cell::Cell::new(0u64);
    let mut edges = (0..200_000u64).map(|i| (i % 5000 + 1, (i * 7) % 3000 + 1));
    let n = s.bulk_load(&mut edges, &|n| reported.set(n)).unwrap();
    assert_eq!(reported.get(), 200_000, "progress reaches the input count");
    let mut expect: Vec<(u64, u64)> = (0..200_000u64)
        .map(|i| (i % 5000 + 1, (i * 7) % 3000 + 1))
        .collect();
    expect.sort_unstable();
    expect.dedup();
    assert_eq!(n, expect.len() as u64);
    assert_eq!(s.edge_count().unwrap(), n);
    let subject = 8;
    let want: Vec<u64> = expect
        .iter()
        .filter(|e| e.1 == subject)
        .map(|e| e.0)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(s.subscribers(subject).unwrap(), want);
    // Into a non-empty store: only new edges count.
    let existing = expect[0];
    let mut more = vec![existing, (999_999, 8), (999_999, 9), (999_999, 9)].into_iter();
    assert_eq!(s.bulk_load(&mut more, &|_| {}).unwrap(), 2);
    assert_eq!(s.edge_count().unwrap(), n + 2);
    assert_eq!(s.subscriptions(999_999).unwrap(), vec![8, 9]);
    // Live changes after a bulk load keep working.
    assert_eq!(s.remove(&[(999_999, 9)]).unwrap(), 1);
    assert_eq!(s.edge_count().unwrap(), n + 1);
}

macro_rules! suite {
    ($backend:ident) => {
        mod $backend {
            #[test]
            fn add_remove_and_counts() {
                super::add_remove_and_counts(&mut *super::$backend().store);
            }
            #[test]
            fn large_ids_sort_as_unsigned() {
                super::large_ids_sort_as_unsigned(&mut *super::$backend().store);
            }
            #[test]
            fn for_each_edge_streams_everything_grouped_by_subject() {
                super::for_each_edge_streams_everything_grouped_by_subject(
                    &mut *super::$backend().store,
                );
            }
            #[test]
            fn bulk_load_empty_then_merge() {
                super::bulk_load_empty_then_merge(&mut *super::$backend().store);
            }
        }
    };
}

suite!(memory);
suite!(sqlite);
suite!(postgres);

#[test]
fn sqlite_restart_brings_back_the_same_edges() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("restart.db").display());
    let edges: Vec<(u64, u64)> = (1..500u64).map(|i| (i, i % 17)).chain([(BIG, 3)]).collect();
    {
        let mut s = store::open(&url).unwrap();
        assert_eq!(s.add(&edges).unwrap(), edges.len());
        assert_eq!(s.remove(&[(1, 1)]).unwrap(), 1);
    }
    let mut s = store::open(&url).unwrap();
    assert_eq!(s.edge_count().unwrap(), edges.len() as u64 - 1);
    let mut got = Vec::new();
    s.for_each_edge(&mut |a, b| got.push((a, b))).unwrap();
    got.sort_unstable();
    let mut expect: Vec<(u64, u64)> = edges.into_iter().filter(|&e| e != (1, 1)).collect();
    expect.sort_unstable();
    assert_eq!(got, expect);
}

/// Two handles on one PostgreSQL schema (two servers sharing a store, SPEC E3)
/// add and remove overlapping edges at once, in batches that touch the same
/// subjects and subscribers in different orders. Every edge must be counted
/// new (or removed) by exactly one of them, and both list tables must agree.
#[test]
fn postgres_concurrent_writers_agree() {
    let mut first = postgres();
    let url = format!("{PG_BASE}?schema={}", first.pg_schema.as_ref().expect("pg"));
    // The harness stays alive to drop the schema at the end.
    let one = std::mem::replace(&mut first.store, store::open("memory").expect("memory"));
    let mut handles = vec![one, store::open(&url).expect("second handle")];
    // Edge (a, b) for a in 1..=40, b in 1..=40, a != b: every subject and every
    // subscriber is touched by both writers.
    let all: Vec<(u64, u64)> = (1..=40u64)
        .flat_map(|a| (1..=40u64).filter(move |&b| b != a).map(move |b| (a, b)))
        .collect();
    // `removers[t]`: whether thread t removes (else adds); returns each thread's count.
    let run = |handles: Vec<Box<dyn Store>>, removers: [bool; 2]| {
        let threads: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(t, mut s)| {
                let mut mine = all.clone();
                if t == 1 {
                    mine.reverse();
                }
                let remove = removers[t];
                std::thread::spawn(move || {
                    let mut n = 0;
                    for batch in mine.chunks(37) {
                        n += if remove {
                            s.remove(batch).expect("concurrent remove")
                        } else {
                            s.add(batch).expect("concurrent add")
                        };
                    }
                    (s, n)
                })
            })
            .collect();
        let mut counts = Vec::new();
        let mut back = Vec::new();
        for t in threads {
            let (s, n) = t.join().expect("writer thread");
            counts.push(n);
            back.push(s);
        }
        (back, counts)
    };
    let (mut handles_after, added) = run(std::mem::take(&mut handles), [false, false]);
    assert_eq!(
        added[0] + added[1],
        all.len(),
        "each edge is new for exactly one writer"
    );
    let s = &mut handles_after[1];
    assert_eq!(s.edge_count().unwrap(), all.len() as u64);
    for id in 1..=40u64 {
        let others: Vec<u64> = (1..=40).filter(|&x| x != id).collect();
        assert_eq!(s.subscribers(id).unwrap(), others);
        assert_eq!(s.subscriptions(id).unwrap(), others);
    }
    let (handles_after, removed) = run(handles_after, [true, true]);
    assert_eq!(
        removed[0] + removed[1],
        all.len(),
        "each edge is removed by exactly one writer"
    );
    // One adds while the other removes (emptied rows are deleted under a
    // concurrent adder): whatever interleaving, the two sides and the count agree.
    let (mut handles_after, changed) = run(handles_after, [false, true]);
    let s = &mut handles_after[0];
    let held = changed[0] - changed[1];
    assert_eq!(s.edge_count().unwrap(), held as u64);
    let mut by_subject = Vec::new();
    for id in 1..=40u64 {
        by_subject.extend(s.subscribers(id).unwrap().into_iter().map(|a| (a, id)));
    }
    by_subject.sort_unstable();
    let mut by_subscriber = Vec::new();
    for id in 1..=40u64 {
        by_subscriber.extend(s.subscriptions(id).unwrap().into_iter().map(|b| (id, b)));
    }
    assert_eq!(by_subject, by_subscriber, "both sides hold the same edges");
    assert_eq!(by_subject.len(), held);
    assert_eq!(s.remove(&all).unwrap(), held);
    assert_eq!(s.edge_count().unwrap(), 0);
    assert_eq!(s.for_each_edge(&mut |_, _| {}).unwrap(), 0);
    assert!(s.subscribers(7).unwrap().is_empty());
    // Emptied lists do not make a later bulk load see a non-empty store.
    let mut edges = vec![(1u64, 2u64), (3, 2)].into_iter();
    assert_eq!(s.bulk_load(&mut edges, &|_| {}).unwrap(), 2);
    assert_eq!(s.subscribers(2).unwrap(), vec![1, 3]);
}

/// A schema still holding the old row-per-edge table is refused with a message,
/// never opened as an empty store (a server would start with no subscriptions).
#[test]
fn postgres_old_layout_is_refused() {
    let h = postgres();
    let schema = h.pg_schema.clone().expect("pg");
    let mut c = ::postgres::Client::connect(PG_BASE, ::postgres::NoTls).expect("connect");
    c.batch_execute(&format!(
        "DROP TABLE \"{schema}\".subscriber_lists, \"{schema}\".subscription_lists, \"{schema}\".edge_counts;
         CREATE TABLE \"{schema}\".subscriptions (subject BIGINT, subscriber BIGINT)"
    ))
    .expect("old layout");
    match store::open(&format!("{PG_BASE}?schema={schema}")) {
        Err(StoreError::Corrupt(m)) => assert!(m.contains("row-per-edge"), "{m}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("old layout opened as a store"),
    }
}

/// The store's backend terminated (a PostgreSQL restart looks the same to it):
/// the next change, read or count connects again and is made there; nothing
/// written before is lost.
#[test]
fn postgres_store_reopens_a_lost_connection() {
    let h = postgres();
    let schema = h.pg_schema.clone().expect("pg");
    let name = format!("myriad_store_reopen_{}", std::process::id());
    let url = format!("{PG_BASE}?schema={schema}&application_name={name}");
    let mut s = store::open(&url).expect("postgres store");
    let terminate = || {
        let mut admin = ::postgres::Client::connect(PG_BASE, ::postgres::NoTls).unwrap();
        let killed: Option<bool> = admin
            .query_one(
                "SELECT bool_or(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
                &[&name],
            )
            .unwrap()
            .get(0);
        assert_eq!(
            killed,
            Some(true),
            "the store's backend was found and terminated"
        );
    };
    assert_eq!(s.add(&[(1, 10), (2, 10)]).unwrap(), 2);
    terminate();
    assert_eq!(
        s.add(&[(3, 10)]).unwrap(),
        1,
        "the change after the loss is made"
    );
    terminate();
    assert_eq!(s.subscribers(10).unwrap(), vec![1, 2, 3]);
    terminate();
    assert_eq!(s.remove(&[(2, 10)]).unwrap(), 1);
    terminate();
    assert_eq!(s.edge_count().unwrap(), 2);
    assert_eq!(s.subscriptions(3).unwrap(), vec![10]);
}

#[test]
fn unknown_urls_are_rejected() {
    assert!(matches!(
        store::open("redis://x"),
        Err(StoreError::BadUrl(_))
    ));
}
