//! `--history-store store|jetstream`: the router's history rings copied into a
//! durable log (the SQLite or PostgreSQL store, or a JetStream stream), so a
//! whole-server restart keeps every user's messages, numbers and epoch (SPEC B6).
//!
//! Writing: the router records each change ([`router::history::Journal`]); the hub
//! writes them by group commit ([`crate::commit`]) after the router lock is released
//! and before the deliveries leave (`Hub::publish`), so a 200 — and every number a
//! client saw — is in the store first. Reading: at start, every stored ring goes back
//! into the router as offline history (its ttl starts again).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use router::history::Journal;
use router::{Message, Router};
use store::history::{HistoryChange, HistoryLog, HistoryRow};
use store::StoreError;

/// Writes `journal` (one group's changes) to `log` in one transaction.
pub fn write(log: &mut dyn HistoryLog, journal: &[Journal], keep: usize) -> Result<(), StoreError> {
    let changes: Vec<HistoryChange<'_>> = journal
        .iter()
        .map(|j| match j {
            Journal::Kept {
                user,
                epoch,
                seq,
                msg,
            } => HistoryChange::Kept {
                user: *user,
                epoch: *epoch,
                seq: *seq,
                subject: msg.subject,
                payload: &msg.payload,
            },
            Journal::Forgot(user) => HistoryChange::Forgot { user: *user },
        })
        .collect();
    log.apply(&changes, keep)
}

/// Reads every stored ring of a user `owns` accepts back into `router`; returns
/// `log` for the writes to come.
pub fn restore(
    router: &Mutex<Router>,
    mut log: Box<dyn HistoryLog>,
    owns: &dyn Fn(u64) -> bool,
) -> anyhow::Result<Box<dyn HistoryLog>> {
    let started = Instant::now();
    let now = Instant::now();
    let mut router = router.lock();
    let mut users = 0u64;
    let mut kept = 0usize;
    let mut ring: Vec<HistoryRow> = Vec::new();
    let mut put_back = |ring: &mut Vec<HistoryRow>, router: &mut Router| {
        if let Some((epoch, first, msgs)) = contiguous_tail(ring) {
            kept += router.restore(ring[0].user, epoch, first, msgs, now);
            users += 1;
        }
        ring.clear();
    };
    let rows = log.for_each(&mut |row| {
        if !owns(row.user) {
            return;
        }
        if ring.first().is_some_and(|r| r.user != row.user) {
            put_back(&mut ring, &mut router);
        }
        ring.push(row);
    })?;
    put_back(&mut ring, &mut router);
    // Rows the router did not keep (bounds) go at the user's next message or ttl.
    drop(router.take_journal());
    tracing::info!(
        rows,
        users,
        messages = kept,
        ms = started.elapsed().as_millis() as u64,
        "durable history read back"
    );
    Ok(log)
}

/// The newest run of consecutive numbers of one epoch in one user's rows (in the
/// order written: the last row is the newest): `(epoch, first seq, messages)`.
/// Rows before a hole are not history any more (the ring dropped them when the
/// hole was made), nor rows of an older ring a log still holds (JetStream keeps
/// them until the newer ring displaces them).
fn contiguous_tail(rows: &[HistoryRow]) -> Option<(u32, u64, Vec<Arc<Message>>)> {
    let last = rows.last()?;
    let mut start = rows.len() - 1;
    while start > 0
        && rows[start - 1].epoch == last.epoch
        && rows[start - 1].seq + 1 == rows[start].seq
    {
        start -= 1;
    }
    let msgs = rows[start..]
        .iter()
        .map(|r| {
            Arc::new(Message::to_subject(
                r.subject,
                Bytes::from(r.payload.clone()),
            ))
        })
        .collect();
    Some((last.epoch, rows[start].seq, msgs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(epoch: u32, seq: u64) -> HistoryRow {
        HistoryRow {
            user: 1,
            epoch,
            seq,
            subject: 1,
            payload: vec![seq as u8],
        }
    }

    #[test]
    fn the_tail_after_the_last_hole_of_the_newest_epoch() {
        let rows = [row(3, 1), row(3, 2), row(4, 5), row(4, 7), row(4, 8)];
        let (epoch, first, msgs) = contiguous_tail(&rows).unwrap();
        assert_eq!((epoch, first, msgs.len()), (4, 7, 2));
        assert_eq!(msgs[1].payload[0], 8);
        assert!(contiguous_tail(&[]).is_none());
    }
}
