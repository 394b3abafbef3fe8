//! What one group of [`HistoryChange`]s leaves behind, per user: the shape the
//! remote backends write (PostgreSQL in a few set statements, JetStream as one
//! publish per surviving row), so a group costs a fixed number of round trips
//! whatever its size. Applying the result gives the same table as applying the
//! changes one by one (SQLite's way; `tests` checks the two agree).

use std::collections::BTreeMap;

use super::HistoryChange;

/// One row to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetRow<'a> {
    pub epoch: u32,
    pub seq: u64,
    pub subject: u64,
    pub payload: &'a [u8],
}

/// What a group leaves for one user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserNet<'a> {
    pub user: u64,
    /// Every row stored before this group goes (a new ring, or a forgotten one).
    pub reset: bool,
    /// Stored rows with `seq <= trim` go (older than the newest `keep`); 0: none.
    pub trim: u64,
    /// Rows to write (insert or replace), ascending `seq`, at most `keep`.
    pub rows: Vec<NetRow<'a>>,
}

impl UserNet<'_> {
    /// The group ended with the user's history forgotten (nothing to write after
    /// the reset): a store that cannot tell rings apart must delete their rows.
    pub fn forgotten(&self) -> bool {
        self.reset && self.rows.is_empty()
    }
}

/// The net effect of `changes` (in the router's order), ascending by user.
/// `keep` is the messages kept per user (0 behaves as 1, as in SQLite).
pub fn net<'a>(changes: &[HistoryChange<'a>], keep: usize) -> Vec<UserNet<'a>> {
    let keep = keep.max(1) as u64;
    let mut users: BTreeMap<u64, UserNet<'a>> = BTreeMap::new();
    for change in changes {
        match *change {
            HistoryChange::Kept {
                user,
                epoch,
                seq,
                subject,
                payload,
            } => {
                let u = users.entry(user).or_insert_with(|| UserNet {
                    user,
                    ..UserNet::default()
                });
                if seq == 1 {
                    u.reset = true;
                    u.trim = 0;
                    u.rows.clear();
                } else if seq > keep {
                    let upto = seq - keep;
                    u.trim = u.trim.max(upto);
                    u.rows.retain(|r| r.seq > upto);
                }
                // A number written twice (never by one router) keeps the latest.
                u.rows.retain(|r| r.seq != seq);
                u.rows.push(NetRow {
                    epoch,
                    seq,
                    subject,
                    payload,
                });
            }
            HistoryChange::Forgot { user } => {
                let u = users.entry(user).or_insert_with(|| UserNet {
                    user,
                    ..UserNet::default()
                });
                u.reset = true;
                u.trim = 0;
                u.rows.clear();
            }
        }
    }
    users.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(user: u64, epoch: u32, seq: u64) -> HistoryChange<'static> {
        HistoryChange::Kept {
            user,
            epoch,
            seq,
            subject: 9,
            payload: b"p",
        }
    }

    fn seqs(n: &UserNet<'_>) -> Vec<(u32, u64)> {
        n.rows.iter().map(|r| (r.epoch, r.seq)).collect()
    }

    #[test]
    fn trims_to_keep_and_resets_on_a_new_ring_or_a_forget() {
        let mut changes: Vec<_> = (3..=8).map(|s| kept(1, 5, s)).collect();
        changes.extend([kept(2, 5, 40), HistoryChange::Forgot { user: 2 }]);
        changes.extend([kept(3, 5, 7), kept(3, 6, 1), kept(3, 6, 2)]);
        let got = net(&changes, 3);
        assert_eq!(got.len(), 3);
        assert_eq!((got[0].reset, got[0].trim), (false, 5));
        assert_eq!(seqs(&got[0]), vec![(5, 6), (5, 7), (5, 8)]);
        assert!(got[1].forgotten());
        assert_eq!((got[2].reset, got[2].trim), (true, 0));
        assert_eq!(seqs(&got[2]), vec![(6, 1), (6, 2)]);
        assert!(!got[2].forgotten());
    }

    #[test]
    fn users_come_out_ascending() {
        let got = net(&[kept(9, 1, 2), kept(4, 1, 2), kept(9, 1, 3)], 64);
        let users: Vec<u64> = got.iter().map(|n| n.user).collect();
        assert_eq!(users, vec![4, 9]);
    }
}
