//! The PostgreSQL backend (`postgres://...`), the shared store for several hosts
//! (SPEC E3). Uses the blocking `postgres` client: no async runtime.
//!
//! Layout, as in SQLite: `subscriber_lists` holds one row per subject with all
//! its subscribers as one [`crate::codec`] blob, `subscription_lists` one row per
//! subscriber with its subjects, and `edge_counts` a few counter rows whose sum is
//! the edge count. A row per edge with two B-tree keys took 57 s to load 30 M
//! directed edges here (COPY 9 s, keys 40 s) and 8–10 s to read back at start; two
//! tables of a million list rows each load and read in a few seconds. The price
//! is O(degree) work per changed edge ([`lists`] says how it stays correct under
//! concurrent writers).
//!
//! The URL may carry `schema=NAME` (letters, digits, `_`), which this crate strips
//! before connecting: the tables live in that schema (created if missing), so
//! parallel test runs do not collide.

mod copy;
mod history;
mod lists;

use postgres::error::SqlState;
use postgres::{Client, NoTls, Statement, Transaction};

use crate::bulk::SortedEdges;
use crate::{codec, to_sql, Store, StoreError};
use lists::{Edit, SideSql};

pub use copy::COPY_CHUNK;
pub use history::PgHistory;
pub use lists::BATCH_KEYS;

/// Counter rows in `edge_counts`: each connection adds its changes to row
/// `backend pid % COUNT_SHARDS`, so writers on different servers rarely wait on
/// one hot counter row, and the count stays exact and transactional.
pub const COUNT_SHARDS: i32 = 64;
/// Attempts of a change transaction that PostgreSQL aborted as a deadlock or
/// serialization failure (lock order makes them unexpected; see [`lists`]).
pub const MAX_ATTEMPTS: u32 = 5;

/// A subscription store in a PostgreSQL schema. A lost connection (PostgreSQL
/// restarted, the backend terminated) is opened again: before the next call, and
/// under a call, which is then made once more on the new connection.
pub struct PgStore {
    client: Client,
    /// Quoted schema name.
    schema: String,
    sql: Sql,
    /// The URL without `schema=`, to connect again.
    conn_url: String,
}

/// Statements prepared once per connection.
struct Sql {
    subscribers: SideSql,
    subscriptions: SideSql,
    /// `$1 bigint`: adds to this connection's counter row.
    count_add: Statement,
    /// → the edge count.
    count: Statement,
}

impl Sql {
    /// The statements on `client`, for the tables of schema `s` (quoted).
    fn prepare(client: &mut Client, s: &str) -> Result<Sql, StoreError> {
        let pid: i32 = client.query_one("SELECT pg_backend_pid()", &[])?.get(0);
        Ok(Sql {
            subscribers: SideSql::prepare(client, &format!("{s}.subscriber_lists"), "subject")?,
            subscriptions: SideSql::prepare(
                client,
                &format!("{s}.subscription_lists"),
                "subscriber",
            )?,
            count_add: client.prepare(&format!(
                "UPDATE {s}.edge_counts SET n = n + $1 WHERE shard = {}",
                pid.rem_euclid(COUNT_SHARDS)
            ))?,
            count: client.prepare(&format!(
                "SELECT coalesce(sum(n), 0)::bigint FROM {s}.edge_counts"
            ))?,
        })
    }
}

/// Splits `schema=NAME` out of a connection URL; returns (url without it, schema).
fn split_schema(url: &str) -> Result<(String, String), StoreError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), "public".to_string()));
    };
    let mut schema = "public".to_string();
    let mut rest = Vec::new();
    for param in query.split('&') {
        match param.strip_prefix("schema=") {
            Some(name) => schema = name.to_string(),
            None => rest.push(param),
        }
    }
    if schema.is_empty()
        || !schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(StoreError::BadUrl(format!(
            "{url} (schema must be letters, digits and _)"
        )));
    }
    let url = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok((url, schema))
}

/// Creates the schema's tables if missing. Serialized by an advisory lock so
/// servers starting together do not race on `CREATE TABLE IF NOT EXISTS`.
fn create_tables(client: &mut Client, schema: &str, quoted: &str) -> Result<(), StoreError> {
    let s = quoted;
    let mut tx = client.transaction()?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('myriad.store.' || $1))",
        &[&schema],
    )?;
    tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {s}"))?;
    let exists = |tx: &mut Transaction<'_>, table: &str| -> Result<bool, StoreError> {
        let row = tx.query_one(
            "SELECT to_regclass($1) IS NOT NULL",
            &[&format!("{s}.{table}")],
        )?;
        Ok(row.get(0))
    };
    if exists(&mut tx, "subscriptions")? {
        return Err(StoreError::Corrupt(format!(
            "schema {schema} holds the old row-per-edge table \"subscriptions\"; \
             drop it (or the schema) and load the graph again"
        )));
    }
    if !exists(&mut tx, "edge_counts")? {
        // Blobs are varint gaps: compressing them gains little and costs CPU on
        // every write, so they are stored out of line uncompressed (EXTERNAL).
        tx.batch_execute(&format!(
            "CREATE TABLE {s}.subscriber_lists (subject BIGINT PRIMARY KEY, n INTEGER NOT NULL, ids BYTEA NOT NULL);
             ALTER TABLE {s}.subscriber_lists ALTER COLUMN ids SET STORAGE EXTERNAL;
             CREATE TABLE {s}.subscription_lists (subscriber BIGINT PRIMARY KEY, n INTEGER NOT NULL, ids BYTEA NOT NULL);
             ALTER TABLE {s}.subscription_lists ALTER COLUMN ids SET STORAGE EXTERNAL;
             CREATE TABLE {s}.edge_counts (shard INTEGER PRIMARY KEY, n BIGINT NOT NULL);
             INSERT INTO {s}.edge_counts SELECT g, 0 FROM generate_series(0, {}) AS g;",
            COUNT_SHARDS - 1
        ))?;
    }
    tx.commit()?;
    Ok(())
}

impl PgStore {
    pub fn connect(url: &str) -> Result<PgStore, StoreError> {
        let (conn_url, schema) = split_schema(url)?;
        let mut client =
            Client::connect(&conn_url, NoTls).map_err(|source| StoreError::PostgresConnect {
                url: conn_url.clone(),
                source,
            })?;
        let quoted = format!("\"{schema}\"");
        create_tables(&mut client, &schema, &quoted)?;
        let sql = Sql::prepare(&mut client, &quoted)?;
        Ok(PgStore {
            client,
            schema: quoted,
            sql,
            conn_url,
        })
    }

    /// Connects again (the tables exist: they were made at the first connect).
    fn reopen(&mut self) -> Result<(), StoreError> {
        let mut client = Client::connect(&self.conn_url, NoTls).map_err(|source| {
            StoreError::PostgresConnect {
                url: self.conn_url.clone(),
                source,
            }
        })?;
        self.sql = Sql::prepare(&mut client, &self.schema)?;
        self.client = client;
        tracing::warn!("PostgreSQL store connection reopened");
        Ok(())
    }

    /// A connection already known lost is opened again first.
    fn reopen_if_closed(&mut self) -> Result<(), StoreError> {
        if self.client.is_closed() {
            self.reopen()?;
        }
        Ok(())
    }

    /// `op`, and once more on a new connection if the connection was lost under
    /// it. Only for calls that may run twice: edge changes are set additions and
    /// removals (a change committed just before the loss is then counted as 0
    /// changed the second time), reads return the same rows.
    fn again_if_lost<T>(
        &mut self,
        op: impl Fn(&mut PgStore) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.reopen_if_closed()?;
        match op(self) {
            Err(e) if connection_lost(&e, &self.client) => {
                self.reopen()?;
                op(self)
            }
            other => other,
        }
    }

    /// Runs one change in a transaction, again if PostgreSQL aborted it as a
    /// deadlock or serialization failure.
    fn change_once(&mut self, edges: &[(u64, u64)], edit: Edit) -> Result<usize, StoreError> {
        if edges.is_empty() {
            return Ok(0);
        }
        let by_subject = SortedEdges::by_subject(&mut edges.iter().copied(), &|_| {});
        let by_subscriber = by_subject.clone().swapped();
        let mut attempt = 1;
        loop {
            let result = (|| {
                let mut tx = self.client.transaction()?;
                let n = change(&mut tx, &self.sql, &by_subject, &by_subscriber, edit)?;
                tx.commit()?;
                Ok::<u64, StoreError>(n)
            })();
            match result {
                Err(StoreError::Postgres(e)) if attempt < MAX_ATTEMPTS && retryable(&e) => {
                    tracing::warn!(attempt, error = %e, "postgres change retried");
                    attempt += 1;
                }
                other => return other.map(|n| n as usize),
            }
        }
    }
}

/// Whether `e` says the connection is gone. A terminated backend's FATAL notice
/// (`57P01` admin shutdown; `57P02`/`57P03` a crash or a restart) can arrive as the
/// answer to the next statement before the client has marked itself closed.
fn connection_lost(e: &StoreError, client: &Client) -> bool {
    client.is_closed()
        || matches!(e, StoreError::Postgres(pg) if pg.is_closed()
        || pg.code().is_some_and(|c| {
            [SqlState::ADMIN_SHUTDOWN, SqlState::CRASH_SHUTDOWN, SqlState::CANNOT_CONNECT_NOW]
                .contains(c)
        }))
}

/// Whether a failed transaction may simply run again.
fn retryable(e: &postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(&SqlState::T_R_DEADLOCK_DETECTED) | Some(&SqlState::T_R_SERIALIZATION_FAILURE)
    )
}

/// Applies one batch to both tables and the counter inside `tx`.
fn change(
    tx: &mut Transaction<'_>,
    sql: &Sql,
    by_subject: &SortedEdges,
    by_subscriber: &SortedEdges,
    edit: Edit,
) -> Result<u64, StoreError> {
    let forward = lists::apply(tx, &sql.subscribers, by_subject, edit)?;
    let backward = lists::apply(tx, &sql.subscriptions, by_subscriber, edit)?;
    if forward != backward {
        return Err(StoreError::Corrupt(format!(
            "postgres list tables disagree ({forward} vs {backward} edges changed); rolled back"
        )));
    }
    if forward > 0 {
        let delta = match edit {
            Edit::Add => forward as i64,
            Edit::Remove => -(forward as i64),
        };
        tx.execute(&sql.count_add, &[&delta])?;
    }
    Ok(forward)
}

/// One stored list, decoded (sorted as u64 by construction).
fn read_list(client: &mut Client, st: &Statement, key: u64) -> Result<Vec<u64>, StoreError> {
    let mut out = Vec::new();
    if let Some(row) = client.query_opt(st, &[&to_sql(key)])? {
        codec::decode(row.get::<_, &[u8]>(0), &mut out)?;
    }
    Ok(out)
}

impl Store for PgStore {
    fn add(&mut self, edges: &[(u64, u64)]) -> Result<usize, StoreError> {
        self.again_if_lost(|s| s.change_once(edges, Edit::Add))
    }

    fn remove(&mut self, edges: &[(u64, u64)]) -> Result<usize, StoreError> {
        self.again_if_lost(|s| s.change_once(edges, Edit::Remove))
    }

    fn subscribers(&mut self, subject: u64) -> Result<Vec<u64>, StoreError> {
        self.again_if_lost(|s| read_list(&mut s.client, &s.sql.subscribers.read, subject))
    }

    fn subscriptions(&mut self, subscriber: u64) -> Result<Vec<u64>, StoreError> {
        self.again_if_lost(|s| read_list(&mut s.client, &s.sql.subscriptions.read, subscriber))
    }

    /// Not made again under a loss: `f` has seen part of the edges by then.
    fn for_each_edge(&mut self, f: &mut dyn FnMut(u64, u64)) -> Result<u64, StoreError> {
        self.reopen_if_closed()?;
        // One row per subject in key order (the primary key's order; u64 order
        // for ids below 2^63).
        let query = format!(
            "SELECT subject, ids FROM {}.subscriber_lists ORDER BY subject",
            self.schema
        );
        copy::copy_lists_out(&mut self.client, &query, &mut |subject, ids| {
            for &subscriber in ids {
                f(subscriber, subject);
            }
        })
    }

    fn bulk_load(
        &mut self,
        edges: &mut dyn Iterator<Item = (u64, u64)>,
        progress: &dyn Fn(u64),
    ) -> Result<u64, StoreError> {
        self.reopen_if_closed()?;
        let started = std::time::Instant::now();
        let by_subject = SortedEdges::by_subject(edges, progress);
        let sorted_at = started.elapsed();
        let s = self.schema.clone();
        let mut tx = self.client.transaction()?;
        // Self-conflicting and blocking row writes: no live change slips in
        // between the emptiness check and the TRUNCATE, nor two loads at once.
        tx.batch_execute(&format!(
            "LOCK TABLE {s}.subscriber_lists, {s}.subscription_lists, {s}.edge_counts IN SHARE ROW EXCLUSIVE MODE"
        ))?;
        let before: i64 = tx.query_one(&self.sql.count, &[])?.get(0);
        let empty = before == 0;
        let (n, first_at) = if empty {
            // An empty store has no list rows (removes delete emptied lists), so
            // TRUNCATE loses nothing; doing it in this transaction lets COPY
            // write frozen, all-visible rows (no VACUUM pass later).
            tx.batch_execute(&format!(
                "TRUNCATE {s}.subscriber_lists, {s}.subscription_lists"
            ))?;
            copy::copy_lists_in(
                &mut tx,
                &format!("{s}.subscriber_lists (subject, n, ids)"),
                ", FREEZE",
                &by_subject,
            )?;
            let first_at = started.elapsed();
            let n = by_subject.len() as u64;
            let by_subscriber = by_subject.swapped();
            copy::copy_lists_in(
                &mut tx,
                &format!("{s}.subscription_lists (subscriber, n, ids)"),
                ", FREEZE",
                &by_subscriber,
            )?;
            tx.batch_execute(&format!("UPDATE {s}.edge_counts SET n = 0"))?;
            tx.execute(&self.sql.count_add, &[&(n as i64)])?;
            (n, first_at)
        } else {
            // A merge has no separate phases: all of it is logged as the second.
            let first_at = started.elapsed();
            let by_subscriber = by_subject.clone().swapped();
            let n = change(&mut tx, &self.sql, &by_subject, &by_subscriber, Edit::Add)?;
            (n, first_at)
        };
        let written_at = started.elapsed();
        tx.commit()?;
        let committed_at = started.elapsed();
        // Fresh statistics so the planner reads the start-up scan in key order.
        self.client.batch_execute(&format!(
            "ANALYZE {s}.subscriber_lists, {s}.subscription_lists"
        ))?;
        tracing::info!(
            edges = n,
            empty,
            sort_s = sorted_at.as_secs_f64(),
            copy_subscribers_s = (first_at - sorted_at).as_secs_f64(),
            copy_subscriptions_or_merge_s = (written_at - first_at).as_secs_f64(),
            commit_s = (committed_at - written_at).as_secs_f64(),
            analyze_s = (started.elapsed() - committed_at).as_secs_f64(),
            "postgres bulk load"
        );
        Ok(n)
    }

    fn edge_count(&mut self) -> Result<u64, StoreError> {
        self.again_if_lost(|s| {
            let n: i64 = s.client.query_one(&s.sql.count, &[])?.get(0);
            Ok(n as u64)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_param_is_split_out() {
        let (u, s) =
            split_schema("postgres://postgres@127.0.0.1:5432/test?schema=t_1&connect_timeout=3")
                .expect("valid");
        assert_eq!(
            (u.as_str(), s.as_str()),
            (
                "postgres://postgres@127.0.0.1:5432/test?connect_timeout=3",
                "t_1"
            )
        );
        let (u, s) = split_schema("postgres://h/db").expect("valid");
        assert_eq!((u.as_str(), s.as_str()), ("postgres://h/db", "public"));
        assert!(split_schema("postgres://h/db?schema=a;drop").is_err());
    }
}
