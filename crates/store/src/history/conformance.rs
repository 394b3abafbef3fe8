//! The behaviour every [`HistoryLog`] backend must show, as functions a backend's
//! tests call with a way to open (and reopen) its log: SQLite and PostgreSQL in
//! `store/tests/history.rs`, JetStream in `cluster/tests/jet_history.rs`.
//!
//! What is compared is what a restart reads back: per user, the newest run of
//! consecutive numbers of one epoch (older rows a backend may still hold are
//! skipped by the reader as well, see `hub::durable`).

use std::collections::BTreeMap;

use super::{HistoryChange, HistoryLog, HistoryRow};

/// Messages kept per user in every check (a backend that bounds rows itself, like
/// a JetStream stream's `max_msgs_per_subject`, is opened with it).
pub const KEEP: usize = 3;

/// Opens the backend's log on the same storage each time.
pub type Open<'a> = &'a mut dyn FnMut() -> Box<dyn HistoryLog>;

/// Per user: `(epoch, [(seq, payload)])` of the ring a restart would rebuild.
pub type Rings = BTreeMap<u64, (u32, Vec<(u64, Vec<u8>)>)>;

/// A kept message of subject 7 (the checks' and the unit tests' shorthand).
pub fn kept(user: u64, epoch: u32, seq: u64, payload: &[u8]) -> HistoryChange<'_> {
    HistoryChange::Kept {
        user,
        epoch,
        seq,
        subject: 7,
        payload,
    }
}

/// Reads every row and checks that each user's rows come together.
pub fn rings(log: &mut dyn HistoryLog) -> Rings {
    let mut rows: Vec<HistoryRow> = Vec::new();
    let n = log.for_each(&mut |r| rows.push(r)).expect("for_each");
    assert_eq!(n as usize, rows.len(), "for_each counts what it streams");
    let mut out = Rings::new();
    let mut i = 0;
    while i < rows.len() {
        let user = rows[i].user;
        assert!(
            !out.contains_key(&user),
            "user {user}'s rows are not together"
        );
        let end = i + rows[i..].iter().take_while(|r| r.user == user).count();
        let mine = &rows[i..end];
        let last = mine.last().unwrap();
        let mut start = mine.len() - 1;
        while start > 0
            && mine[start - 1].epoch == last.epoch
            && mine[start - 1].seq + 1 == mine[start].seq
        {
            start -= 1;
        }
        let ring = mine[start..]
            .iter()
            .map(|r| (r.seq, r.payload.clone()))
            .collect();
        out.insert(user, (last.epoch, ring));
        i = end;
    }
    out
}

fn ring(
    epoch: u32,
    seqs: std::ops::RangeInclusive<u64>,
    payload: &[u8],
) -> (u32, Vec<(u64, Vec<u8>)>) {
    (epoch, seqs.map(|s| (s, payload.to_vec())).collect())
}

/// The newest `keep` per user survive reopening; binary and empty payloads and
/// ids above 2^63 come back as written.
pub fn keeps_the_newest_per_user_and_survives_reopening(open: Open<'_>) {
    let big = u64::MAX - 3;
    {
        let mut log = open();
        let changes: Vec<_> = (1..=5).map(|s| kept(1, 9, s, b"x")).collect();
        log.apply(&changes, KEEP).unwrap();
        log.apply(
            &[kept(2, 4, 1, b"a"), kept(2, 4, 2, &[0xff, 0, 0xfe])],
            KEEP,
        )
        .unwrap();
        log.apply(&[kept(big, u32::MAX, 1, b"")], KEEP).unwrap();
    }
    let mut log = open();
    let got = rings(&mut *log);
    let mut want = Rings::new();
    want.insert(1, ring(9, 3..=5, b"x"));
    want.insert(2, (4, vec![(1, b"a".to_vec()), (2, vec![0xff, 0, 0xfe])]));
    want.insert(big, ring(u32::MAX, 1..=1, b""));
    assert_eq!(got, want);
}

/// A new ring (seq 1, another epoch) replaces the old one; a forget empties.
pub fn a_new_ring_replaces_and_a_forget_empties(open: Open<'_>) {
    let mut log = open();
    let old: Vec<_> = (1..=4).map(|s| kept(1, 9, s, b"o")).collect();
    log.apply(&old, KEEP).unwrap();
    log.apply(&[kept(2, 4, 1, b"a"), kept(3, 4, 1, b"c")], KEEP)
        .unwrap();
    log.apply(
        &[
            kept(1, 10, 1, b"n"),
            HistoryChange::Forgot { user: 2 },
            kept(3, 4, 2, b"c"),
        ],
        KEEP,
    )
    .unwrap();
    let mut want = Rings::new();
    want.insert(1, ring(10, 1..=1, b"n"));
    want.insert(3, ring(4, 1..=2, b"c"));
    assert_eq!(rings(&mut *log), want);
    drop(log);
    let mut log = open();
    assert_eq!(rings(&mut *log), want, "after reopening");
}

/// Inside one group, changes apply in order: a forget then a new ring, a ring
/// then its forget, and more messages than [`KEEP`].
pub fn one_group_applies_in_order(open: Open<'_>) {
    let mut log = open();
    log.apply(&[kept(5, 1, 1, b"e"), kept(6, 1, 1, b"f")], KEEP)
        .unwrap();
    let mut group = vec![
        HistoryChange::Forgot { user: 5 },
        kept(5, 2, 1, b"E"),
        kept(6, 1, 2, b"f"),
        HistoryChange::Forgot { user: 6 },
    ];
    group.extend((1..=10).map(|s| kept(7, 3, s, b"g")));
    log.apply(&group, KEEP).unwrap();
    let mut want = Rings::new();
    want.insert(5, ring(2, 1..=1, b"E"));
    want.insert(7, ring(3, 8..=10, b"g"));
    assert_eq!(rings(&mut *log), want);
}

/// Runs every check, each on fresh storage from `fresh` (a new opener each).
pub fn all(fresh: &mut dyn FnMut() -> Box<dyn FnMut() -> Box<dyn HistoryLog>>) {
    keeps_the_newest_per_user_and_survives_reopening(&mut *fresh());
    a_new_ring_replaces_and_a_forget_empties(&mut *fresh());
    one_group_applies_in_order(&mut *fresh());
}
