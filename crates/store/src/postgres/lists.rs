//! Live changes to the two list tables under concurrent writers (SPEC E3: several
//! servers share one store).
//!
//! A change is read-modify-write of blobs, so it must hold the rows it rewrites:
//! - an add locks (or creates) every key's row in one statement,
//!   `INSERT .. ON CONFLICT DO UPDATE .. RETURNING`, which PostgreSQL guarantees
//!   to end in an insert or a locked existing row even when another transaction
//!   inserts or deletes that key at the same time;
//! - a remove locks the existing rows with `SELECT .. FOR UPDATE` (a key without
//!   a row has nothing to remove);
//! - both merge or remove in memory, then `UPDATE` the changed rows from arrays
//!   and `DELETE` the rows whose list became empty.
//!
//! Every transaction takes the subscriber side before the subscription side and
//! keys in ascending u64 order, so lock waits cannot form a cycle; a deadlock the
//! server still reports (it would be a bug here) is retried by the caller.
//!
//! Cost: O(degree) per touched key, a decode and an encode of its blob (~3 B per
//! id), and two round trips per side. This module is not the bulk path for empty
//! stores ([`super::copy`]).

use postgres::{Statement, Transaction};

use crate::bulk::SortedEdges;
use crate::{codec, from_sql, to_sql, StoreError};

/// Keys read, locked and written per round trip.
pub const BATCH_KEYS: usize = 4096;

/// The prepared statements of one list table.
pub struct SideSql {
    /// `$1 bigint[]` (ascending as u64) → `(key, ids)` of every key, locked;
    /// missing rows are created empty.
    lock_or_create: Statement,
    /// `$1 bigint[]` → `(key, ids)` rows that exist, locked, in u64 key order.
    lock: Statement,
    /// `$1 bigint[], $2 int[], $3 bytea[]`: rewrites rows.
    write: Statement,
    /// `$1 bigint[]`: deletes rows (lists that became empty).
    delete: Statement,
    /// `$1 bigint` → `ids` of one key, unlocked.
    pub read: Statement,
}

impl SideSql {
    /// Prepares the statements for `table` keyed by column `key`.
    pub fn prepare(
        client: &mut postgres::Client,
        table: &str,
        key: &str,
    ) -> Result<SideSql, StoreError> {
        Ok(SideSql {
            // Rows are inserted or locked in the array's order. The no-op update
            // is what takes the row lock and makes RETURNING give the row.
            lock_or_create: client.prepare(&format!(
                "INSERT INTO {table} AS t ({key}, n, ids) SELECT k, 0, ''::bytea FROM unnest($1::bigint[]) AS k
                 ON CONFLICT ({key}) DO UPDATE SET n = t.n RETURNING {key}, ids"
            ))?,
            // Xor with the sign bit orders int8 like u64: the same order as the
            // upsert above, so every writer waits in one global order.
            lock: client.prepare(&format!(
                "SELECT {key}, ids FROM {table} WHERE {key} = ANY($1::bigint[])
                 ORDER BY {key} # (-9223372036854775807 - 1) FOR UPDATE"
            ))?,
            write: client.prepare(&format!(
                "UPDATE {table} AS t SET n = d.n, ids = d.ids
                 FROM unnest($1::bigint[], $2::int[], $3::bytea[]) AS d(k, n, ids) WHERE t.{key} = d.k"
            ))?,
            delete: client.prepare(&format!("DELETE FROM {table} WHERE {key} = ANY($1::bigint[])"))?,
            read: client.prepare(&format!("SELECT ids FROM {table} WHERE {key} = $1"))?,
        })
    }
}

/// Which edit a change applies to each stored list.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    Add,
    Remove,
}

/// Applies `edit` for every group of `groups` to one table; returns how many
/// members changed.
pub fn apply(
    tx: &mut Transaction<'_>,
    sql: &SideSql,
    groups: &SortedEdges,
    edit: Edit,
) -> Result<u64, StoreError> {
    let mut batch = Batch::default();
    let mut changed = 0u64;
    groups.try_for_each_group(|key, members| {
        batch.keys.push(key);
        batch.members.extend_from_slice(members);
        batch.ends.push(batch.members.len());
        if batch.keys.len() == BATCH_KEYS {
            changed += batch.flush(tx, sql, edit)?;
        }
        Ok::<(), StoreError>(())
    })?;
    if !batch.keys.is_empty() {
        changed += batch.flush(tx, sql, edit)?;
    }
    Ok(changed)
}

/// Keys (ascending as u64) with their members, flattened.
#[derive(Default)]
struct Batch {
    keys: Vec<u64>,
    members: Vec<u64>,
    /// `members[ends[i - 1]..ends[i]]` belong to `keys[i]`.
    ends: Vec<usize>,
}

impl Batch {
    fn flush(
        &mut self,
        tx: &mut Transaction<'_>,
        sql: &SideSql,
        edit: Edit,
    ) -> Result<u64, StoreError> {
        let sql_keys: Vec<i64> = self.keys.iter().map(|&k| to_sql(k)).collect();
        let mut rows = match edit {
            Edit::Add => tx.query(&sql.lock_or_create, &[&sql_keys])?,
            Edit::Remove => tx.query(&sql.lock, &[&sql_keys])?,
        };
        // RETURNING promises no order; the walk below needs u64 key order.
        rows.sort_by_key(|r| from_sql(r.get(0)));
        let (mut out_keys, mut out_ns, mut out_blobs) = (Vec::new(), Vec::new(), Vec::new());
        let mut emptied = Vec::new();
        let (mut list, mut row, mut start, mut changed) = (Vec::new(), 0, 0, 0u64);
        for (i, &key) in self.keys.iter().enumerate() {
            let members = &self.members[start..self.ends[i]];
            start = self.ends[i];
            list.clear();
            match rows.get(row) {
                Some(r) if from_sql(r.get(0)) == key => {
                    codec::decode(r.get::<_, &[u8]>(1), &mut list)?;
                    row += 1;
                }
                _ if edit == Edit::Add => {
                    return Err(StoreError::Corrupt(format!(
                        "postgres: list row {key} missing after upsert"
                    )))
                }
                _ => continue,
            }
            let n = match edit {
                Edit::Add => codec::merge_in(&mut list, members),
                Edit::Remove => codec::remove_from(&mut list, members),
            };
            if n > 0 && list.is_empty() {
                emptied.push(to_sql(key));
                changed += n as u64;
            } else if n > 0 {
                let mut blob = Vec::new();
                codec::encode(&list, &mut blob);
                out_keys.push(to_sql(key));
                out_ns.push(i32::try_from(list.len()).map_err(|_| {
                    StoreError::Corrupt(format!("postgres: {key} has over 2^31 members"))
                })?);
                out_blobs.push(blob);
                changed += n as u64;
            }
        }
        if !out_keys.is_empty() {
            tx.execute(&sql.write, &[&out_keys, &out_ns, &out_blobs])?;
        }
        if !emptied.is_empty() {
            tx.execute(&sql.delete, &[&emptied])?;
        }
        self.keys.clear();
        self.members.clear();
        self.ends.clear();
        Ok(changed)
    }
}
