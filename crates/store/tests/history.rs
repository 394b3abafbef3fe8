//! Durable history (`store::history`) against its backends: SQLite in a temp file
//! and a real PostgreSQL on 127.0.0.1:5432 (user postgres, db test), each test in
//! its own schema, dropped after. The checks are `store::history::conformance`,
//! which the JetStream backend runs too (`cluster/tests/jet_history.rs`).

use std::sync::atomic::{AtomicU32, Ordering};

use store::history::{conformance, open_history, HistoryLog};
use store::StoreOptions;

const PG_BASE: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Drops the schemas it was given when the test ends (also on a failure).
#[derive(Default)]
struct Schemas(Vec<String>);

impl Drop for Schemas {
    fn drop(&mut self) {
        if let Ok(mut c) = ::postgres::Client::connect(PG_BASE, ::postgres::NoTls) {
            for s in &self.0 {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{s}\" CASCADE"));
            }
        }
    }
}

fn pg_url(schemas: &mut Schemas) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let schema = format!(
        "myriad_history_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    schemas.0.push(schema.clone());
    format!("{PG_BASE}?schema={schema}")
}

fn open(url: &str) -> Box<dyn HistoryLog> {
    open_history(url, &StoreOptions::default()).unwrap_or_else(|e| {
        panic!(
            "{url}: {e}; PostgreSQL must run on 127.0.0.1:5432 (trust, database test; ./scripts/setup.sh creates it)"
        )
    })
}

#[test]
fn sqlite_history_conforms() {
    let dirs: std::cell::RefCell<Vec<tempfile::TempDir>> = Default::default();
    conformance::all(&mut || {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("h.db").display());
        dirs.borrow_mut().push(dir);
        Box::new(move || open(&url))
    });
}

#[test]
fn postgres_history_conforms() {
    let mut schemas = Schemas::default();
    conformance::all(&mut || {
        let url = pg_url(&mut schemas);
        Box::new(move || open(&url))
    });
}

/// A group of many users and messages is one transaction of a few statements:
/// 2,000 users × 5 messages with `keep` 3 read back as the newest 3 of each.
#[test]
fn postgres_history_writes_large_groups() {
    let mut schemas = Schemas::default();
    let url = pg_url(&mut schemas);
    let mut log = open(&url);
    let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100]).collect();
    let changes: Vec<_> = (1..=5u64)
        .flat_map(|seq| {
            let p = &payloads[seq as usize - 1];
            (0..2000u64).map(move |user| store::history::HistoryChange::Kept {
                user,
                epoch: 1,
                seq,
                subject: 1,
                payload: p,
            })
        })
        .collect();
    log.apply(&changes, 3).unwrap();
    let rings = conformance::rings(&mut *log);
    assert_eq!(rings.len(), 2000);
    for (epoch, ring) in rings.values() {
        assert_eq!(*epoch, 1);
        let seqs: Vec<u64> = ring.iter().map(|r| r.0).collect();
        assert_eq!(seqs, vec![3, 4, 5]);
        assert_eq!(ring[2].1, payloads[4]);
    }
}

/// The backend terminated under the log (a PostgreSQL restart looks the same):
/// the write that finds the connection dead reopens it and is made again there;
/// nothing written before is lost.
#[test]
fn postgres_history_reopens_a_lost_connection() {
    let mut schemas = Schemas::default();
    let name = format!("myriad_history_reopen_{}", std::process::id());
    let url = format!("{}&application_name={name}", pg_url(&mut schemas));
    let mut log = open(&url);
    let kept = |seq| store::history::HistoryChange::Kept {
        user: 1,
        epoch: 2,
        seq,
        subject: 1,
        payload: b"m",
    };
    log.apply(&[kept(1)], 8).unwrap();
    let mut admin = ::postgres::Client::connect(PG_BASE, ::postgres::NoTls).unwrap();
    let killed: bool = admin
        .query_one(
            "SELECT bool_or(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
            &[&name],
        )
        .unwrap()
        .get(0);
    assert!(killed, "the log's backend was found and terminated");
    // The write that finds the connection dead is made again on a new one.
    log.apply(&[kept(2)], 8)
        .expect("the write after the loss succeeds");
    let mut seqs = Vec::new();
    log.for_each(&mut |r| seqs.push(r.seq)).unwrap();
    assert_eq!(seqs, vec![1, 2], "nothing written before is lost");
}

#[test]
fn postgres_history_refuses_a_server_that_is_not_there() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/test?connect_timeout=2");
    let err = open_history(&url, &StoreOptions::default())
        .err()
        .expect("no server there");
    assert!(err.to_string().contains("cannot connect"), "{err}");
}
