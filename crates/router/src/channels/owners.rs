//! Which user each connection holding channel subscriptions is logged in as, on
//! this router: what a gateway's death needs to take its connections' users out of
//! the channels' members. The users table cannot say: with router shards a
//! channel's shard is often not its members' (a user's logins go to the user's
//! shard only). One entry per connection with a user and a channel, not per
//! subscription: 24 B in a map kept at most 7/8 full, removed with the
//! connection's last channel.

use std::collections::HashMap;

use crate::hash::IdHashBuilder;
use crate::{ConnRef, UserId};

/// Connection (packed) → (its user, the channel subscriptions it holds here).
#[derive(Debug, Default)]
pub(super) struct Owners {
    map: HashMap<u64, (UserId, u32), IdHashBuilder>,
}

fn pack(conn: ConnRef) -> u64 {
    u64::from(conn.loop_id) << 32 | u64::from(conn.token)
}

impl Owners {
    /// `conn` (of `user`) took one more channel.
    pub(super) fn add(&mut self, conn: ConnRef, user: UserId) {
        self.map.entry(pack(conn)).or_insert((user, 0)).1 += 1;
    }

    /// `conn` gave one channel back; the entry goes with its last.
    pub(super) fn sub(&mut self, conn: ConnRef) {
        let key = pack(conn);
        if let Some((_, n)) = self.map.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.map.remove(&key);
            }
        }
    }

    /// The user `conn` joined its channels as.
    pub(super) fn user(&self, conn: ConnRef) -> Option<UserId> {
        self.map.get(&pack(conn)).map(|&(user, _)| user)
    }

    /// Forgets every connection `gone` says is gone.
    pub(super) fn forget_where(&mut self, gone: &impl Fn(ConnRef) -> bool) {
        self.map.retain(|&key, _| {
            let conn = ConnRef {
                loop_id: (key >> 32) as u16,
                token: key as u32,
            };
            !gone(conn)
        });
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.map.capacity() * (std::mem::size_of::<(u64, (UserId, u32))>() + 1)
    }
}
