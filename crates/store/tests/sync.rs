//! `--store-sync`: the SQLite `synchronous` pragma each mode applies, checked on
//! the real connection (before and after a bulk load, which switches the journal
//! mode and back), and that the data written under FULL reads back after reopening.

use store::sqlite::SqliteStore;
use store::{Store, StoreOptions, SyncMode};

#[test]
fn sync_modes_set_the_pragma() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let normal = SqliteStore::open(&path).unwrap();
    assert_eq!(normal.synchronous().unwrap(), 1, "NORMAL by default");
    drop(normal);
    let mut full = SqliteStore::open_with(
        &path,
        &StoreOptions {
            sync: SyncMode::Full,
        },
    )
    .unwrap();
    assert_eq!(full.synchronous().unwrap(), 2);
    full.bulk_load(&mut [(1, 2), (3, 4)].into_iter(), &|_| {})
        .unwrap();
    assert_eq!(full.synchronous().unwrap(), 2, "kept through a bulk load");
    assert_eq!(full.add(&[(5, 6)]).unwrap(), 1);
    drop(full);
    let mut again = store::open_with(
        &format!("sqlite:{}", path.display()),
        &StoreOptions {
            sync: SyncMode::Full,
        },
    )
    .unwrap();
    assert_eq!(again.edge_count().unwrap(), 3);
    assert_eq!(again.subscribers(6).unwrap(), vec![5]);
}

#[test]
fn sync_mode_parses_from_flags() {
    assert_eq!("normal".parse::<SyncMode>(), Ok(SyncMode::Normal));
    assert_eq!("full".parse::<SyncMode>(), Ok(SyncMode::Full));
    let e = "FULL".parse::<SyncMode>().unwrap_err();
    assert!(e.contains("normal or full"), "{e}");
    assert_eq!(StoreOptions::default().sync, SyncMode::Normal);
}
