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

/// The `subject` of a channel's row: its payload starts with the channel's name
/// (one length byte, then the name), and its key is the name's
/// (`router::channels::key`). A restore checks both before taking a row as a
/// channel's.
pub const CHANNEL_ROW: u64 = u64::MAX;

/// A channel's row payload: the name's length, the name, the message.
fn channel_row(name: &str, payload: &[u8]) -> Vec<u8> {
    let mut row = Vec::with_capacity(1 + name.len() + payload.len());
    row.push(name.len() as u8);
    row.extend_from_slice(name.as_bytes());
    row.extend_from_slice(payload);
    row
}

/// The channel a row is from and its message, when it is a channel's row.
fn channel_of(row: &HistoryRow) -> Option<(&str, &[u8])> {
    if row.subject != CHANNEL_ROW {
        return None;
    }
    let (&len, rest) = row.payload.split_first()?;
    let name = std::str::from_utf8(rest.get(..usize::from(len))?).ok()?;
    (router::channels::key(name) == row.user).then(|| (name, &rest[usize::from(len)..]))
}

/// Writes `journal` (one group's changes) to `log` in one transaction.
pub fn write(log: &mut dyn HistoryLog, journal: &[Journal], keep: usize) -> Result<(), StoreError> {
    // Channels' rows carry their name in front of the message.
    let rows: Vec<Option<Vec<u8>>> = journal
        .iter()
        .map(|j| match j {
            Journal::Kept { msg, .. } => msg
                .channel
                .as_deref()
                .map(|name| channel_row(name, &msg.payload)),
            Journal::Forgot(_) => None,
        })
        .collect();
    let changes: Vec<HistoryChange<'_>> = journal
        .iter()
        .zip(&rows)
        .map(|(j, row)| match j {
            Journal::Kept {
                user,
                epoch,
                seq,
                msg,
            } => HistoryChange::Kept {
                user: *user,
                epoch: *epoch,
                seq: *seq,
                subject: if row.is_some() {
                    CHANNEL_ROW
                } else {
                    msg.subject
                },
                payload: row.as_deref().unwrap_or(&msg.payload),
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
            kept += match msgs.first().and_then(|m| m.channel.clone()) {
                Some(name) => router.restore_channel(&name, epoch, first, msgs, now),
                None => router.restore(ring[0].user, epoch, first, msgs, now),
            };
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

/// The newest run of consecutive numbers of one epoch in one user's (or channel's)
/// rows (in the order written: the last row is the newest): `(epoch, first seq,
/// messages)`. A run is all one channel's or all a user's: a key a channel and a
/// user (or two channels) share keeps only the newest ring's run.
/// Rows before a hole are not history any more (the ring dropped them when the
/// hole was made), nor rows of an older ring a log still holds (JetStream keeps
/// them until the newer ring displaces them).
fn contiguous_tail(rows: &[HistoryRow]) -> Option<(u32, u64, Vec<Arc<Message>>)> {
    let last = rows.last()?;
    let whose = |r: &HistoryRow| channel_of(r).map(|(name, _)| name.to_string());
    let mut start = rows.len() - 1;
    while start > 0
        && rows[start - 1].epoch == last.epoch
        && rows[start - 1].seq + 1 == rows[start].seq
        && whose(&rows[start - 1]) == whose(last)
    {
        start -= 1;
    }
    let msgs = rows[start..]
        .iter()
        .map(|r| {
            Arc::new(match channel_of(r) {
                Some((name, payload)) => Message::to_channel(name, Bytes::copy_from_slice(payload)),
                None => Message::to_subject(r.subject, Bytes::from(r.payload.clone())),
            })
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

    #[test]
    fn a_channels_rows_carry_its_name_and_are_checked_against_its_key() {
        let name = "room:1";
        let row = |user, subject, payload: Vec<u8>| HistoryRow {
            user,
            epoch: 2,
            seq: 1,
            subject,
            payload,
        };
        let ok = row(
            router::channels::key(name),
            CHANNEL_ROW,
            channel_row(name, b"hi"),
        );
        assert_eq!(channel_of(&ok), Some((name, &b"hi"[..])));
        let (_, _, msgs) = contiguous_tail(std::slice::from_ref(&ok)).unwrap();
        assert_eq!(msgs[0].channel.as_deref(), Some(name));
        // A user's message to subject u64::MAX, or another key: not a channel's row.
        assert_eq!(
            channel_of(&row(7, CHANNEL_ROW, channel_row(name, b"hi"))),
            None
        );
        assert_eq!(channel_of(&row(7, 7, channel_row(name, b"hi"))), None);
        assert_eq!(
            channel_of(&row(router::channels::key(name), CHANNEL_ROW, vec![200])),
            None
        );
    }
}
