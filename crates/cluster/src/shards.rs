//! Which router shard owns what (`--router-shards`): the one rule both sides route
//! by — a gateway to divide its calls (`shard_calls`), a router to keep or
//! forward what it is handed (`router_role`).

/// Router shards (`--router-shards`): shard `index` of `count` owns user `u` when
/// `u % count == index` (presence, sequence numbers, history) and subject `s` when
/// `s % count == index` (its follower list and its publishes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shards {
    pub index: u16,
    pub count: u16,
}

impl Default for Shards {
    fn default() -> Shards {
        Shards { index: 0, count: 1 }
    }
}

impl Shards {
    /// The shard owning user (or subject) `u`.
    pub fn owner(self, u: u64) -> u16 {
        (u % u64::from(self.count)) as u16
    }

    /// The shard owning channel `name`: the owner of its number
    /// ([`router::channels::key`]), so its durable rows belong to it too. A
    /// channel's presence companion is its channel's shard's (the shard that sees
    /// the membership change pushes it; a companion has no durable rows). A
    /// user's friends companion is the user's shard's (the shard a follower's
    /// online message is sent to, `router::router::friends`).
    pub fn owner_of_channel(self, name: &str) -> u16 {
        if let Some(user) = wire::channel::friends_of(name) {
            return self.owner(user);
        }
        let name = wire::channel::presence_of(name).unwrap_or(name);
        self.owner(router::channels::key(name))
    }

    /// Whether this router owns `u`.
    pub fn owns(self, u: u64) -> bool {
        self.owner(u) == self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_presence_companion_is_owned_by_its_channel_s_shard() {
        let shards = Shards { index: 0, count: 7 };
        for name in ["room:1", "news", "a.b", "x"] {
            let companion = wire::channel::presence_channel(name);
            assert_eq!(
                shards.owner_of_channel(&companion),
                shards.owner_of_channel(name)
            );
        }
        for user in [4u64, 7, 1_000_001] {
            assert_eq!(
                shards.owner_of_channel(&wire::channel::friends_channel(user)),
                shards.owner(user),
                "a friends companion is its user's shard's"
            );
        }
        // Not every name lands on one shard, so the test above can fail.
        let owners: std::collections::HashSet<u16> = (0..50)
            .map(|i| shards.owner_of_channel(&format!("room:{i}")))
            .collect();
        assert!(owners.len() > 1);
    }
}
