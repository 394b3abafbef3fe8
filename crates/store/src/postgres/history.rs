//! Durable history in PostgreSQL (`--store postgres://… --history-store store`):
//! the SQLite table's shape, `history ("user", seq, epoch, subject, payload)`
//! keyed `("user", seq)`, in the store URL's schema.
//!
//! A group commit is one transaction of at most three set statements (delete the
//! reset users' rows, trim, upsert from arrays: [`net`]), so it costs a fixed
//! number of round trips whatever the group's size.
//!
//! The blocking `postgres` client runs a runtime of its own, which tokio forbids
//! inside another one — and the router role over NATS commits from its runtime's
//! thread. So the connection lives on a thread of its own and every call is a
//! message to it (the group is copied once; a payload crossing is a memcpy next to
//! a round trip to the server).

use std::sync::mpsc;

use postgres::{Client, NoTls, Statement};

use crate::history::net::net;
use crate::history::{HistoryChange, HistoryLog, HistoryRow};
use crate::{from_sql, to_sql, StoreError};

/// Rows in flight from the reader to [`HistoryLog::for_each`]'s caller.
const READ_AHEAD: usize = 4096;

/// One group, as the statements' array parameters.
#[derive(Default)]
struct Group {
    reset: Vec<i64>,
    trim_users: Vec<i64>,
    trim_upto: Vec<i64>,
    users: Vec<i64>,
    seqs: Vec<i64>,
    epochs: Vec<i64>,
    subjects: Vec<i64>,
    payloads: Vec<Vec<u8>>,
}

enum Job {
    Apply(Group, mpsc::SyncSender<Result<(), StoreError>>),
    Read(mpsc::SyncSender<Result<HistoryRow, StoreError>>),
}

/// A [`HistoryLog`] in PostgreSQL, served by a thread owning the connection.
pub struct PgHistory {
    jobs: Option<mpsc::Sender<Job>>,
    worker: Option<std::thread::JoinHandle<()>>,
}

struct Sql {
    reset: Statement,
    trim: Statement,
    upsert: Statement,
    read: Statement,
}

fn prepare(client: &mut Client, schema: &str) -> Result<Sql, StoreError> {
    let t = format!("{schema}.history");
    client.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {t} (\"user\" BIGINT NOT NULL, seq BIGINT NOT NULL, \
         epoch BIGINT NOT NULL, subject BIGINT NOT NULL, payload BYTEA NOT NULL, \
         PRIMARY KEY (\"user\", seq))"
    ))?;
    Ok(Sql {
        reset: client.prepare(&format!("DELETE FROM {t} WHERE \"user\" = ANY($1::bigint[])"))?,
        trim: client.prepare(&format!(
            "DELETE FROM {t} h USING unnest($1::bigint[], $2::bigint[]) AS x(u, s) \
             WHERE h.\"user\" = x.u AND h.seq <= x.s"
        ))?,
        upsert: client.prepare(&format!(
            "INSERT INTO {t} (\"user\", seq, epoch, subject, payload) \
             SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bytea[]) \
             ON CONFLICT (\"user\", seq) DO UPDATE SET epoch = excluded.epoch, \
             subject = excluded.subject, payload = excluded.payload"
        ))?,
        read: client.prepare(&format!(
            "SELECT \"user\", seq, epoch, subject, payload FROM {t} ORDER BY \"user\", seq"
        ))?,
    })
}

impl PgHistory {
    /// Connects to `url` (its `schema=NAME` as for the store) and creates the table
    /// if missing.
    pub fn connect(url: &str) -> Result<PgHistory, StoreError> {
        let (conn_url, schema) = super::split_schema(url)?;
        let (ready_tx, ready) = mpsc::sync_channel(1);
        let (jobs, rx) = mpsc::channel::<Job>();
        let worker = std::thread::Builder::new()
            .name("myriad-history-pg".into())
            .spawn(move || {
                let open = || -> Result<(Client, Sql), StoreError> {
                    let mut client = Client::connect(&conn_url, NoTls).map_err(|source| {
                        StoreError::PostgresConnect {
                            url: conn_url.clone(),
                            source,
                        }
                    })?;
                    let quoted = format!("\"{schema}\"");
                    client.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {quoted}"))?;
                    let sql = prepare(&mut client, &quoted)?;
                    Ok((client, sql))
                };
                let (mut client, mut sql) = match open() {
                    Ok(ok) => {
                        let _ = ready_tx.send(Ok(()));
                        ok
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                for job in rx {
                    // A lost connection (PostgreSQL restarted, the backend
                    // terminated) is opened again for the next job; if that fails
                    // too, the job gets the error and the next job tries again.
                    if client.is_closed() {
                        match open() {
                            Ok((c, s)) => {
                                tracing::warn!("PostgreSQL history connection reopened");
                                (client, sql) = (c, s);
                            }
                            Err(e) => {
                                match job {
                                    Job::Apply(_, done) => drop(done.send(Err(e))),
                                    Job::Read(rows) => drop(rows.send(Err(e))),
                                }
                                continue;
                            }
                        }
                    }
                    match job {
                        Job::Apply(group, done) => {
                            let mut result = apply(&mut client, &sql, &group);
                            // Lost under this write: once more on a new connection
                            // (a group is idempotent: deletes and upserts).
                            if result
                                .as_ref()
                                .is_err_and(|e| super::connection_lost(e, &client))
                            {
                                if let Ok((c, s)) = open() {
                                    tracing::warn!("PostgreSQL history connection reopened");
                                    (client, sql) = (c, s);
                                    result = apply(&mut client, &sql, &group);
                                }
                            }
                            let _ = done.send(result);
                        }
                        Job::Read(rows) => read(&mut client, &sql, &rows),
                    }
                }
            })?;
        ready.recv().map_err(|_| gone())??;
        Ok(PgHistory {
            jobs: Some(jobs),
            worker: Some(worker),
        })
    }

    /// Drops the history table of `url`'s schema (a benchmark's fresh start).
    pub fn drop_table(url: &str) -> Result<(), StoreError> {
        let (conn_url, schema) = super::split_schema(url)?;
        // Not on a runtime thread: callers are the bench's main thread.
        let mut client =
            Client::connect(&conn_url, NoTls).map_err(|source| StoreError::PostgresConnect {
                url: conn_url.clone(),
                source,
            })?;
        client.batch_execute(&format!("DROP TABLE IF EXISTS \"{schema}\".history"))?;
        Ok(())
    }

    fn send(&self, job: Job) -> Result<(), StoreError> {
        self.jobs
            .as_ref()
            .and_then(|j| j.send(job).ok())
            .ok_or_else(gone)
    }
}

fn gone() -> StoreError {
    StoreError::Io(std::io::Error::other("the PostgreSQL history thread ended"))
}

fn apply(client: &mut Client, sql: &Sql, g: &Group) -> Result<(), StoreError> {
    let mut tx = client.transaction()?;
    if !g.reset.is_empty() {
        tx.execute(&sql.reset, &[&g.reset])?;
    }
    if !g.trim_users.is_empty() {
        tx.execute(&sql.trim, &[&g.trim_users, &g.trim_upto])?;
    }
    if !g.users.is_empty() {
        tx.execute(
            &sql.upsert,
            &[&g.users, &g.seqs, &g.epochs, &g.subjects, &g.payloads],
        )?;
    }
    tx.commit()?;
    Ok(())
}

fn read(client: &mut Client, sql: &Sql, out: &mpsc::SyncSender<Result<HistoryRow, StoreError>>) {
    let result = (|| -> Result<(), StoreError> {
        let none: [i64; 0] = [];
        let mut rows = client.query_raw(&sql.read, none)?;
        while let Some(row) = postgres::fallible_iterator::FallibleIterator::next(&mut rows)? {
            let epoch: i64 = row.get(2);
            let row = HistoryRow {
                user: from_sql(row.get(0)),
                seq: from_sql(row.get(1)),
                epoch: u32::try_from(epoch)
                    .map_err(|_| StoreError::Corrupt(format!("history epoch {epoch}")))?,
                subject: from_sql(row.get(3)),
                payload: row.get(4),
            };
            if out.send(Ok(row)).is_err() {
                return Ok(()); // the reader stopped listening
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = out.send(Err(e));
    }
}

impl HistoryLog for PgHistory {
    fn apply(&mut self, changes: &[HistoryChange<'_>], keep: usize) -> Result<(), StoreError> {
        let mut g = Group::default();
        for user in net(changes, keep) {
            let id = to_sql(user.user);
            if user.reset {
                g.reset.push(id);
            } else if user.trim > 0 {
                g.trim_users.push(id);
                g.trim_upto.push(to_sql(user.trim));
            }
            for row in user.rows {
                g.users.push(id);
                g.seqs.push(to_sql(row.seq));
                g.epochs.push(i64::from(row.epoch));
                g.subjects.push(to_sql(row.subject));
                g.payloads.push(row.payload.to_vec());
            }
        }
        if g.reset.is_empty() && g.trim_users.is_empty() && g.users.is_empty() {
            return Ok(());
        }
        let (done, result) = mpsc::sync_channel(1);
        self.send(Job::Apply(g, done))?;
        result.recv().map_err(|_| gone())?
    }

    fn for_each(&mut self, f: &mut dyn FnMut(HistoryRow)) -> Result<u64, StoreError> {
        let (tx, rows) = mpsc::sync_channel(READ_AHEAD);
        self.send(Job::Read(tx))?;
        let mut n = 0;
        for row in rows {
            f(row?);
            n += 1;
        }
        Ok(n)
    }
}

impl Drop for PgHistory {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}
