//! The PostgreSQL backend (`postgres://...`), the shared store for several hosts
//! (SPEC E3). One row per edge with a primary key (subject, subscriber) and a
//! mirror index (subscriber, subject); batches go through `unnest` arrays and bulk
//! loads through `COPY`. Uses the blocking `postgres` client: no async runtime.
//!
//! The URL may carry `schema=NAME` (letters, digits, `_`), which this crate strips
//! before connecting: the table lives in that schema (created if missing), so
//! parallel test runs do not collide.

use std::io::Write;

use postgres::{Client, NoTls};

use crate::bulk::SortedEdges;
use crate::{from_sql, to_sql, Store, StoreError};

/// COPY bytes buffered per write to the server, and the read buffer for COPY out.
pub const COPY_CHUNK: usize = 1 << 20;
/// `maintenance_work_mem` for rebuilding the keys after a bulk load.
pub const BULK_INDEX_MEMORY: &str = "512MB";
/// The first bytes of a binary COPY stream.
const COPY_SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";
/// PostgreSQL's type oid for int8 (in binary array headers).
const INT8_OID: i32 = 20;
/// Parallel workers PostgreSQL may use per key build after a bulk load.
pub const BULK_INDEX_WORKERS: u32 = 2;

/// A subscription store in a PostgreSQL schema.
pub struct PgStore {
    client: Client,
    /// Quoted schema name.
    schema: String,
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

impl PgStore {
    pub fn connect(url: &str) -> Result<PgStore, StoreError> {
        let (conn_url, schema) = split_schema(url)?;
        let client =
            Client::connect(&conn_url, NoTls).map_err(|source| StoreError::PostgresConnect {
                url: conn_url.clone(),
                source,
            })?;
        let mut store = PgStore {
            client,
            schema: format!("\"{schema}\""),
        };
        let s = &store.schema;
        store.client.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {s};
             CREATE TABLE IF NOT EXISTS {s}.subscriptions (
                 subject BIGINT NOT NULL, subscriber BIGINT NOT NULL,
                 CONSTRAINT subscriptions_pkey PRIMARY KEY (subject, subscriber));
             CREATE INDEX IF NOT EXISTS subscriptions_by_subscriber ON {s}.subscriptions (subscriber, subject);"
        ))?;
        Ok(store)
    }

    fn table(&self) -> String {
        format!("{}.subscriptions", self.schema)
    }

    /// Streams sorted edges into `target` with binary COPY, encoded here by hand
    /// (26 bytes a row, no per-row calls): no text to format on our side nor to
    /// parse on the server's.
    fn copy_into(
        tx: &mut postgres::Transaction<'_>,
        target: &str,
        options: &str,
        sorted: &SortedEdges,
    ) -> Result<(), StoreError> {
        let mut writer = tx.copy_in(&format!("COPY {target} FROM STDIN {options}"))?;
        let mut buf: Vec<u8> = Vec::with_capacity(COPY_CHUNK + 64);
        // Signature, flags (no OIDs), header extension length.
        buf.extend_from_slice(COPY_SIGNATURE);
        buf.extend_from_slice(&0i32.to_be_bytes());
        buf.extend_from_slice(&0i32.to_be_bytes());
        sorted.try_for_each_group(|subject, members| {
            for &subscriber in members {
                buf.extend_from_slice(&2i16.to_be_bytes());
                for v in [subject, subscriber] {
                    buf.extend_from_slice(&8i32.to_be_bytes());
                    buf.extend_from_slice(&to_sql(v).to_be_bytes());
                }
                if buf.len() >= COPY_CHUNK {
                    writer.write_all(&buf)?;
                    buf.clear();
                }
            }
            Ok::<(), StoreError>(())
        })?;
        buf.extend_from_slice(&(-1i16).to_be_bytes());
        writer.write_all(&buf)?;
        writer.finish()?;
        Ok(())
    }
}

fn columns(edges: &[(u64, u64)]) -> (Vec<i64>, Vec<i64>) {
    edges
        .iter()
        .map(|&(subscriber, subject)| (to_sql(subject), to_sql(subscriber)))
        .unzip()
}

fn sorted_u64(rows: Vec<postgres::Row>) -> Vec<u64> {
    let mut out: Vec<u64> = rows.iter().map(|r| from_sql(r.get(0))).collect();
    // Ids at or above 2^63 are negative in SQL and sort first there.
    out.sort_unstable();
    out
}

impl Store for PgStore {
    fn add(&mut self, edges: &[(u64, u64)]) -> Result<usize, StoreError> {
        let (subjects, subscribers) = columns(edges);
        let n = self.client.execute(
            &format!(
                "INSERT INTO {} (subject, subscriber) SELECT * FROM unnest($1::bigint[], $2::bigint[]) ON CONFLICT DO NOTHING",
                self.table()
            ),
            &[&subjects, &subscribers],
        )?;
        Ok(n as usize)
    }

    fn remove(&mut self, edges: &[(u64, u64)]) -> Result<usize, StoreError> {
        let (subjects, subscribers) = columns(edges);
        let n = self.client.execute(
            &format!(
                "DELETE FROM {} t USING unnest($1::bigint[], $2::bigint[]) AS d(subject, subscriber)
                 WHERE t.subject = d.subject AND t.subscriber = d.subscriber",
                self.table()
            ),
            &[&subjects, &subscribers],
        )?;
        Ok(n as usize)
    }

    fn subscribers(&mut self, subject: u64) -> Result<Vec<u64>, StoreError> {
        let sql = format!("SELECT subscriber FROM {} WHERE subject = $1", self.table());
        Ok(sorted_u64(self.client.query(&sql, &[&to_sql(subject)])?))
    }

    fn subscriptions(&mut self, subscriber: u64) -> Result<Vec<u64>, StoreError> {
        let sql = format!("SELECT subject FROM {} WHERE subscriber = $1", self.table());
        Ok(sorted_u64(self.client.query(&sql, &[&to_sql(subscriber)])?))
    }

    fn for_each_edge(&mut self, f: &mut dyn FnMut(u64, u64)) -> Result<u64, StoreError> {
        use std::io::Read;
        // One row per subject with its subscribers as an int8 array: the client
        // library handles each COPY row as a message, so 1 M rows instead of 30 M
        // is what makes this fast (measured: 21 s for row-per-edge COPY of 30 M).
        let sql = format!(
            "COPY (SELECT subject, array_agg(subscriber ORDER BY subscriber) FROM {} GROUP BY subject ORDER BY subject)
             TO STDOUT (FORMAT binary)",
            self.table()
        );
        let corrupt = |what: &str| StoreError::Corrupt(format!("postgres COPY: {what}"));
        let mut r = std::io::BufReader::with_capacity(COPY_CHUNK, self.client.copy_out(&sql)?);
        let mut header = [0u8; 19];
        r.read_exact(&mut header)?;
        if &header[..11] != COPY_SIGNATURE {
            return Err(corrupt("bad binary signature"));
        }
        let extension = i32::from_be_bytes(header[15..19].try_into().expect("4 bytes"));
        std::io::copy(
            &mut (&mut r).take(extension.max(0) as u64),
            &mut std::io::sink(),
        )?;
        let mut n = 0u64;
        let mut head = [0u8; 18];
        let mut array: Vec<u8> = Vec::new();
        loop {
            r.read_exact(&mut head[..2])?;
            match i16::from_be_bytes([head[0], head[1]]) {
                -1 => break,
                2 => {}
                c => return Err(corrupt(&format!("{c} fields in a row"))),
            }
            // int8 subject (length 8 + value), then the array's length.
            r.read_exact(&mut head[2..18])?;
            let be32 = |b: &[u8]| i32::from_be_bytes(b.try_into().expect("4 bytes"));
            let be64 = |b: &[u8]| i64::from_be_bytes(b.try_into().expect("8 bytes"));
            if be32(&head[2..6]) != 8 {
                return Err(corrupt("subject is not an int8"));
            }
            let subject = from_sql(be64(&head[6..14]));
            let len = usize::try_from(be32(&head[14..18]))
                .map_err(|_| corrupt("null subscriber array"))?;
            array.resize(len, 0);
            r.read_exact(&mut array)?;
            // ndim, flags, element oid, then (size, lower bound) for the one dimension.
            if len < 20 || be32(&array[0..4]) != 1 || be32(&array[8..12]) != INT8_OID {
                return Err(corrupt("subscribers are not a 1-d int8 array"));
            }
            let count = usize::try_from(be32(&array[12..16]))
                .map_err(|_| corrupt("negative array size"))?;
            if len != 20 + count * 12 {
                return Err(corrupt("array length does not match its size"));
            }
            for item in array[20..].chunks_exact(12) {
                if be32(&item[..4]) != 8 {
                    return Err(corrupt("null or non-int8 subscriber"));
                }
                f(from_sql(be64(&item[4..12])), subject);
            }
            n += count as u64;
        }
        Ok(n)
    }

    fn bulk_load(
        &mut self,
        edges: &mut dyn Iterator<Item = (u64, u64)>,
        progress: &dyn Fn(u64),
    ) -> Result<u64, StoreError> {
        let started = std::time::Instant::now();
        let sorted = SortedEdges::by_subject(edges, progress);
        let sorted_at = started.elapsed();
        let empty = self.edge_count()? == 0;
        let (table, schema) = (self.table(), self.schema.clone());
        let mut tx = self.client.transaction()?;
        tx.batch_execute(&format!(
            "SET LOCAL maintenance_work_mem = '{BULK_INDEX_MEMORY}';
             SET LOCAL max_parallel_maintenance_workers = {BULK_INDEX_WORKERS};"
        ))?;
        let (n, copied_at) = if empty {
            // Loading into an empty table without keys and building them after is
            // several times faster than maintaining two B-trees row by row; the
            // edges are already distinct, so the key cannot fail. TRUNCATE in this
            // transaction lets COPY write frozen, all-visible rows: no VACUUM later.
            tx.batch_execute(&format!(
                "TRUNCATE {table};
                 ALTER TABLE {table} DROP CONSTRAINT subscriptions_pkey;
                 DROP INDEX {schema}.subscriptions_by_subscriber;"
            ))?;
            PgStore::copy_into(
                &mut tx,
                &format!("{table} (subject, subscriber)"),
                "WITH (FORMAT binary, FREEZE)",
                &sorted,
            )?;
            let copied_at = started.elapsed();
            tx.batch_execute(&format!(
                "ALTER TABLE {table} ADD CONSTRAINT subscriptions_pkey PRIMARY KEY (subject, subscriber);
                 CREATE INDEX subscriptions_by_subscriber ON {table} (subscriber, subject);"
            ))?;
            (sorted.len() as u64, copied_at)
        } else {
            tx.batch_execute("CREATE TEMP TABLE myriad_staging (subject BIGINT, subscriber BIGINT) ON COMMIT DROP")?;
            PgStore::copy_into(
                &mut tx,
                "myriad_staging (subject, subscriber)",
                "WITH (FORMAT binary)",
                &sorted,
            )?;
            let copied_at = started.elapsed();
            let n = tx.execute(
                &format!("INSERT INTO {table} SELECT * FROM myriad_staging ON CONFLICT DO NOTHING"),
                &[],
            )?;
            (n, copied_at)
        };
        tx.commit()?;
        let committed_at = started.elapsed();
        // Fresh statistics so the planner scans the key index at start.
        self.client.batch_execute(&format!("ANALYZE {table}"))?;
        tracing::info!(
            edges = n,
            empty,
            sort_s = sorted_at.as_secs_f64(),
            copy_s = (copied_at - sorted_at).as_secs_f64(),
            keys_s = (committed_at - copied_at).as_secs_f64(),
            analyze_s = (started.elapsed() - committed_at).as_secs_f64(),
            "postgres bulk load"
        );
        Ok(n)
    }

    fn edge_count(&mut self) -> Result<u64, StoreError> {
        let row = self
            .client
            .query_one(&format!("SELECT count(*) FROM {}", self.table()), &[])?;
        Ok(row.get::<_, i64>(0) as u64)
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
