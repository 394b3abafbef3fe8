//! `store`: durable subscriptions (edges subscriber → subject) behind one trait,
//! [`Store`], with three backends chosen by URL in [`open`]:
//!
//! | URL | backend | use |
//! |---|---|---|
//! | `memory` | [`memory::MemoryStore`] | throwaway runs and tests |
//! | `sqlite:PATH` | [`sqlite::SqliteStore`] | the embedded default (WAL) |
//! | `postgres://...` | [`postgres::PgStore`] | shared store for several hosts (SPEC E3) |
//!
//! [`history`] keeps a durable copy of the router's history rings in the SQLite
//! file (`--history-store store`).
//!
//! The store is the source of truth; the router's in-memory index is rebuilt from
//! [`Store::for_each_edge`] at start. The API is synchronous (no async runtime):
//! callers run it on a thread of their own. It is not a cache and keeps no
//! in-memory copy of the graph (except the memory backend, which is nothing else).
//!
//! Ids are u64; SQL backends store them bit-cast to signed 64-bit integers, so ids
//! at or above 2^63 read back correctly but sort first inside the database; every
//! list this crate returns is sorted as u64.

pub mod bulk;
pub mod codec;
pub mod history;
pub mod memory;
pub mod postgres;
pub mod sqlite;

/// Errors of every backend, prefixed with the component they come from.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store: unknown store URL {0:?} (expected memory, sqlite:PATH or postgres://...)")]
    BadUrl(String),
    #[error("store: sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("store: postgres: {}", postgres_text(.0))]
    Postgres(#[from] ::postgres::Error),
    #[error("store: postgres: cannot connect to {url} (is PostgreSQL running there? see docs/operations.md, \"Stores\")")]
    PostgresConnect {
        url: String,
        source: ::postgres::Error,
    },
    #[error("store: io: {0}")]
    Io(#[from] std::io::Error),
    #[error("store: corrupt data: {0}")]
    Corrupt(String),
}

/// Durable subscriptions. Edges are `(subscriber, subject)`.
pub trait Store: Send {
    /// Adds edges; returns how many were new.
    fn add(&mut self, edges: &[(u64, u64)]) -> Result<usize, StoreError>;
    /// Removes edges; returns how many existed.
    fn remove(&mut self, edges: &[(u64, u64)]) -> Result<usize, StoreError>;
    /// Subscribers of `subject`, sorted.
    fn subscribers(&mut self, subject: u64) -> Result<Vec<u64>, StoreError>;
    /// Subjects `subscriber` follows, sorted.
    fn subscriptions(&mut self, subscriber: u64) -> Result<Vec<u64>, StoreError>;
    /// Streams every edge as `f(subscriber, subject)`, grouped by subject (the
    /// index builder's fast path); returns how many.
    fn for_each_edge(&mut self, f: &mut dyn FnMut(u64, u64)) -> Result<u64, StoreError>;
    /// Adds millions of edges fast; `progress(n)` reports input edges consumed.
    /// Returns how many were new.
    fn bulk_load(
        &mut self,
        edges: &mut dyn Iterator<Item = (u64, u64)>,
        progress: &dyn Fn(u64),
    ) -> Result<u64, StoreError>;
    /// Number of edges held.
    fn edge_count(&mut self) -> Result<u64, StoreError>;
}

/// How much a committed change survives (`--store-sync`). Applies to SQLite; the
/// memory store survives nothing, and PostgreSQL follows its own
/// `synchronous_commit` (durable by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyncMode {
    /// `PRAGMA synchronous=NORMAL` with WAL: a commit survives the process being
    /// killed (the OS has the WAL), but the last commits may be lost on power loss
    /// or an OS crash (the WAL is fsynced at checkpoints, not per commit).
    #[default]
    Normal,
    /// `PRAGMA synchronous=FULL`: the WAL is fsynced at every commit, so a 200 on
    /// `PUT /subscriptions` survives power loss too; each commit costs an fsync.
    Full,
}

impl std::str::FromStr for SyncMode {
    type Err = String;
    fn from_str(s: &str) -> Result<SyncMode, String> {
        match s {
            "normal" => Ok(SyncMode::Normal),
            "full" => Ok(SyncMode::Full),
            other => Err(format!(
                "unknown store sync mode {other:?} (normal or full)"
            )),
        }
    }
}

/// Store settings the binary passes through (flags such as `--store-sync`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreOptions {
    pub sync: SyncMode,
}

/// Opens a store by URL: `memory`, `sqlite:PATH`, or `postgres://...` (an optional
/// `schema=NAME` query parameter selects the schema, default `public`).
pub fn open(url: &str) -> Result<Box<dyn Store>, StoreError> {
    open_with(url, &StoreOptions::default())
}

/// [`open`] with settings.
pub fn open_with(url: &str, options: &StoreOptions) -> Result<Box<dyn Store>, StoreError> {
    if url == "memory" {
        Ok(Box::new(memory::MemoryStore::new()))
    } else if let Some(path) = url.strip_prefix("sqlite:") {
        Ok(Box::new(sqlite::SqliteStore::open_with(
            path.strip_prefix("//").unwrap_or(path),
            options,
        )?))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Box::new(postgres::PgStore::connect(url)?))
    } else {
        Err(StoreError::BadUrl(url.to_string()))
    }
}

/// Bit-casts an id for a signed 64-bit SQL column (order-changing above 2^63).
pub(crate) fn to_sql(id: u64) -> i64 {
    id as i64
}

/// Inverse of [`to_sql`].
pub(crate) fn from_sql(v: i64) -> u64 {
    v as u64
}

/// A PostgreSQL error as its server message when it has one (`Display` alone says
/// only "db error"): what a publisher or log reader needs to act on.
fn postgres_text(e: &::postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        ),
        None => e.to_string(),
    }
}
