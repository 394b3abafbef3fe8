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

    /// The shard owning channel `name`: a fixed hash of the name (FNV-1a), the same
    /// in every process of every version that shares this wire format.
    pub fn owner_of_channel(self, name: &str) -> u16 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in name.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.owner(h)
    }

    /// Whether this router owns `u`.
    pub fn owns(self, u: u64) -> bool {
        self.owner(u) == self.index
    }
}
