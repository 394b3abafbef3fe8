//! The connections this gateway has logged in, kept on the link's thread for two
//! jobs: sending them to the router again (a resync), and checking that each
//! delivery to a connection follows the one before it. The router numbers every
//! user's messages and sends a gateway each of them in order, so a delivery that
//! skips numbers in the same epoch means some never reached this gateway. Losses
//! on the NATS link itself are mostly caught earlier, by the numbered batches
//! ([`super::numbering`]); what only this check sees is what the router never sent
//! — it had forgotten this gateway (silent too long, or the router reconnected)
//! and logged its connections out until their presence came again. The connection
//! is then told to resume ([`bus::Inbound::Lost`]) instead of silently missing
//! them.
//!
//! 16 B per logged-in connection: the user, and the last (epoch, seq) seen, the
//! seq's low 32 bits being enough to see a skip.

use std::collections::HashMap;

/// A connection: (loop, token).
pub(super) type Key = (u16, u32);

/// No delivery and no login reply seen yet: the next delivery sets the place.
const UNKNOWN: u64 = u64::MAX;

#[derive(Default)]
pub(super) struct Presence {
    conns: HashMap<Key, Seen>,
    /// Connections holding named channels, with how many: a router that asks for
    /// presence has forgotten their subscriptions, so they are told to resume
    /// (they join again with their positions) rather than sent again from here:
    /// 12 B per such connection instead of a copy of every name.
    channels: HashMap<Key, u32>,
}

#[derive(Clone, Copy)]
struct Seen {
    user: u64,
    /// `epoch << 32 | seq & 0xffff_ffff` of the last message, or [`UNKNOWN`].
    last: u64,
}

fn place(epoch: u32, seq: u64) -> u64 {
    u64::from(epoch) << 32 | (seq & 0xffff_ffff)
}

impl Presence {
    /// A login is sent for `key`: its place is known once the reply comes.
    pub(super) fn login(&mut self, key: Key, user: u64) {
        self.conns.insert(
            key,
            Seen {
                user,
                last: UNKNOWN,
            },
        );
    }

    pub(super) fn logout(&mut self, key: Key) {
        self.conns.remove(&key);
    }

    /// `key` joined `n` channels.
    pub(super) fn join(&mut self, key: Key, n: usize) {
        *self.channels.entry(key).or_insert(0) += n as u32;
    }

    /// `key` left `n` channels.
    pub(super) fn leave(&mut self, key: Key, n: usize) {
        if let Some(held) = self.channels.get_mut(&key) {
            *held = held.saturating_sub(n as u32);
            if *held == 0 {
                self.channels.remove(&key);
            }
        }
    }

    /// The connections holding channels (a connection with a user too is also in
    /// [`Presence::all`]).
    pub(super) fn channel_holders(&self) -> Vec<Key> {
        self.channels
            .keys()
            .copied()
            .filter(|k| !self.conns.contains_key(k))
            .collect()
    }

    /// The connections holding channels, which a resync tells to resume.
    pub(super) fn take_channel_holders(&mut self) -> Vec<Key> {
        self.channels.drain().map(|(k, _)| k).collect()
    }

    pub(super) fn len(&self) -> usize {
        self.conns.len()
    }

    /// Every connection as `(loop, token, user)`, for a resync.
    pub(super) fn all(&self) -> Vec<(u16, u32, u64)> {
        self.conns
            .iter()
            .map(|(&(l, t), s)| (l, t, s.user))
            .collect()
    }

    /// The login reply of `key`: its user's messages up to `last` are history; the
    /// deliveries start after it. (`epoch: None`: the user had no history yet.)
    pub(super) fn replied(&mut self, key: Key, epoch: Option<u32>, last: u64) {
        if let Some(seen) = self.conns.get_mut(&key) {
            seen.last = place(epoch.unwrap_or(0), last);
        }
    }

    /// A delivery of `(epoch, seq)` to `key`: false when it skips numbers after the
    /// last one seen in the same epoch (a new epoch starts over: the router lost its
    /// history, and says so through the ids). Connections not logged in here, or
    /// logged out meanwhile, are not checked.
    pub(super) fn follows(&mut self, key: Key, epoch: u32, seq: u64) -> bool {
        let Some(seen) = self.conns.get_mut(&key) else {
            return true;
        };
        let last = std::mem::replace(&mut seen.last, place(epoch, seq));
        last == UNKNOWN
            || (last >> 32) as u32 != epoch
            || (last as u32).wrapping_add(1) == seq as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_that_skips_numbers_does_not_follow() {
        let mut p = Presence::default();
        p.login((0, 1), 7);
        // Before the login reply, anything sets the place.
        assert!(p.follows((0, 1), 5, 10));
        assert!(p.follows((0, 1), 5, 11));
        assert!(!p.follows((0, 1), 5, 13), "12 was lost");
        assert!(p.follows((0, 1), 5, 14));
        // The reply of a new login says where deliveries start.
        p.login((0, 1), 7);
        p.replied((0, 1), Some(5), 20);
        assert!(!p.follows((0, 1), 5, 22));
        p.replied((0, 1), Some(5), 30);
        assert!(p.follows((0, 1), 5, 31));
        // A new epoch (a restarted router) starts over; so does a user without
        // history at login.
        assert!(p.follows((0, 1), 6, 1));
        p.replied((0, 1), None, 0);
        assert!(p.follows((0, 1), 9, 1));
        // The low 32 bits wrap.
        p.replied((0, 1), Some(9), u64::from(u32::MAX));
        assert!(p.follows((0, 1), 9, 1 << 32));
        // Other connections and logged-out ones are not checked.
        assert!(p.follows((1, 1), 9, 100));
        p.logout((0, 1));
        assert!(p.follows((0, 1), 9, 100));
        assert_eq!(p.len(), 0);
    }
}
