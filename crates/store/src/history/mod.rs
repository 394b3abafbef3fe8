//! Durable history (`myriad serve --history-store store|jetstream`): a copy of every
//! user's history ring outside the process, so a whole-server restart (even
//! `kill -9`) loses nothing inside the history window and keeps each user's epoch.
//!
//! Backends of [`HistoryLog`]: [`SqliteHistory`] in the embedded store's file,
//! [`crate::postgres::PgHistory`] in the shared PostgreSQL store (several hosts), and
//! (in the `cluster` crate, which has the NATS client) a JetStream stream.
//!
//! One row per kept message and recipient, keyed `(user, seq)`: the ring's own
//! shape, so writing follows the router's [`HistoryChange`]s one for one and
//! reading back at start is one ordered scan. A broadcast to N users writes N rows
//! (its payload N times): history is per recipient in memory too, and sharing
//! payloads would need a second table and a join at start for 60-byte messages.
//!
//! Bounds: a row older than the newest `keep` of its user is deleted when the user
//! gets a new message (one indexed range delete); a user whose history the router
//! dropped (ttl, or a new ring) loses all rows. Byte limits are re-applied by the
//! router when the rows are read back, so the table holds at most `keep` rows per
//! user whose history is alive. Remote backends write a group's [`net`] effect
//! (a few statements or one publish per row, whatever the group's size).

use std::path::Path;

use rusqlite::{params, Connection};

use crate::{from_sql, to_sql, StoreError, StoreOptions, SyncMode};

pub mod conformance;
pub mod net;

/// One change, in the order the router made it.
#[derive(Clone, Copy, Debug)]
pub enum HistoryChange<'a> {
    /// `user` kept `payload` (published to `subject`) as number `seq` of `epoch`;
    /// `seq == 1` starts a new ring (older rows go).
    Kept {
        user: u64,
        epoch: u32,
        seq: u64,
        subject: u64,
        payload: &'a [u8],
    },
    /// Every row of `user` goes.
    Forgot { user: u64 },
}

/// One stored message, as read back at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryRow {
    pub user: u64,
    pub epoch: u32,
    pub seq: u64,
    pub subject: u64,
    pub payload: Vec<u8>,
}

/// A durable copy of the router's history rings.
pub trait HistoryLog: Send {
    /// Applies `changes` in one transaction (or, for a log without transactions,
    /// returns only once all of them are stored); `keep` is the messages kept per user.
    fn apply(&mut self, changes: &[HistoryChange<'_>], keep: usize) -> Result<(), StoreError>;
    /// Streams every stored message, each user's rows together and in the order
    /// they were written (for the SQL tables: by seq, a user's rows there being one
    /// ring); returns how many. Rows of an older ring may come first: the reader
    /// keeps the newest run of one epoch.
    fn for_each(&mut self, f: &mut dyn FnMut(HistoryRow)) -> Result<u64, StoreError>;
}

/// Opens the durable history in the store named by `url`: `sqlite:PATH` (its own
/// connection to the same file) or `postgres://…` (a `history` table in the URL's
/// schema, its own connection).
pub fn open_history(url: &str, options: &StoreOptions) -> Result<Box<dyn HistoryLog>, StoreError> {
    if let Some(path) = url.strip_prefix("sqlite:") {
        Ok(Box::new(SqliteHistory::open(
            path.strip_prefix("//").unwrap_or(path),
            options,
        )?))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Box::new(crate::postgres::PgHistory::connect(url)?))
    } else {
        Err(StoreError::BadUrl(format!(
            "{url} (--history-store store needs --store sqlite:PATH or postgres://…)"
        )))
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS history (
    user INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    subject INTEGER NOT NULL,
    payload BLOB NOT NULL,
    PRIMARY KEY (user, seq)
) WITHOUT ROWID;
";

/// Durable history in a SQLite file (WAL, `--store-sync` as the store).
pub struct SqliteHistory {
    conn: Connection,
}

impl SqliteHistory {
    pub fn open(
        path: impl AsRef<Path>,
        options: &StoreOptions,
    ) -> Result<SqliteHistory, StoreError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(crate::sqlite::BUSY_TIMEOUT)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        let sync = match options.sync {
            SyncMode::Normal => "NORMAL",
            SyncMode::Full => "FULL",
        };
        conn.pragma_update(None, "synchronous", sync)?;
        conn.execute_batch(SCHEMA)?;
        Ok(SqliteHistory { conn })
    }
}

impl HistoryLog for SqliteHistory {
    fn apply(&mut self, changes: &[HistoryChange<'_>], keep: usize) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        {
            let mut forget = tx.prepare_cached("DELETE FROM history WHERE user = ?1")?;
            let mut trim =
                tx.prepare_cached("DELETE FROM history WHERE user = ?1 AND seq <= ?2")?;
            let mut insert = tx.prepare_cached(
                "INSERT OR REPLACE INTO history (user, seq, epoch, subject, payload) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for change in changes {
                match *change {
                    HistoryChange::Kept {
                        user,
                        epoch,
                        seq,
                        subject,
                        payload,
                    } => {
                        if seq == 1 {
                            forget.execute(params![to_sql(user)])?;
                        } else if seq > keep as u64 {
                            trim.execute(params![to_sql(user), to_sql(seq - keep as u64)])?;
                        }
                        insert.execute(params![
                            to_sql(user),
                            to_sql(seq),
                            i64::from(epoch),
                            to_sql(subject),
                            payload
                        ])?;
                    }
                    HistoryChange::Forgot { user } => {
                        forget.execute(params![to_sql(user)])?;
                    }
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn for_each(&mut self, f: &mut dyn FnMut(HistoryRow)) -> Result<u64, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT user, seq, epoch, subject, payload FROM history ORDER BY user, seq")?;
        let mut rows = stmt.query([])?;
        let mut n = 0;
        while let Some(row) = rows.next()? {
            let epoch: i64 = row.get(2)?;
            f(HistoryRow {
                user: from_sql(row.get(0)?),
                seq: from_sql(row.get(1)?),
                epoch: u32::try_from(epoch)
                    .map_err(|_| StoreError::Corrupt(format!("history epoch {epoch}")))?,
                subject: from_sql(row.get(3)?),
                payload: row.get(4)?,
            });
            n += 1;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::conformance::kept;
    use super::*;

    fn rows(log: &mut dyn HistoryLog) -> Vec<(u64, u32, u64, Vec<u8>)> {
        let mut out = Vec::new();
        log.for_each(&mut |r| out.push((r.user, r.epoch, r.seq, r.payload)))
            .unwrap();
        out
    }

    #[test]
    fn keeps_the_newest_per_user_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.db");
        let options = StoreOptions::default();
        {
            let mut log = SqliteHistory::open(&path, &options).unwrap();
            let changes: Vec<_> = (1..=5).map(|s| kept(1, 9, s, b"x")).collect();
            log.apply(&changes, 3).unwrap();
            log.apply(&[kept(2, 4, 1, b"a"), kept(2, 4, 2, b"b")], 3)
                .unwrap();
        }
        let mut log = SqliteHistory::open(&path, &options).unwrap();
        let got = rows(&mut log);
        let seqs: Vec<(u64, u64)> = got.iter().map(|r| (r.0, r.2)).collect();
        assert_eq!(seqs, vec![(1, 3), (1, 4), (1, 5), (2, 1), (2, 2)]);
        assert_eq!(got[3], (2, 4, 1, b"a".to_vec()));

        // A new ring (seq 1, another epoch) replaces the old one; a forget empties.
        log.apply(
            &[kept(1, 10, 1, b"n"), HistoryChange::Forgot { user: 2 }],
            3,
        )
        .unwrap();
        assert_eq!(rows(&mut log), vec![(1, 10, 1, b"n".to_vec())]);
    }

    #[test]
    fn memory_has_no_durable_history() {
        assert!(open_history("memory", &StoreOptions::default()).is_err());
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("h.db").display());
        assert!(open_history(&url, &StoreOptions::default()).is_ok());
    }
}
