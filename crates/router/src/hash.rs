//! A keyed hasher for `u64` ids: much cheaper than SipHash on the fan-out path
//! (one lookup per recipient), yet keyed per process so clients choosing user ids
//! cannot aim collisions at a known function. It is not a general-purpose hasher:
//! anything but a single integer is folded in slowly.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// Builds [`IdHasher`]s sharing one random key.
#[derive(Clone, Debug)]
pub struct IdHashBuilder {
    key: u64,
}

impl Default for IdHashBuilder {
    fn default() -> Self {
        // RandomState is seeded by the OS once per process; hashing a constant turns
        // it into a key without any IO here.
        IdHashBuilder {
            key: RandomState::new().hash_one(0x6d79_7269_6164_u64) | 1,
        }
    }
}

impl BuildHasher for IdHashBuilder {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher { state: self.key }
    }
}

/// Murmur3's 64-bit finaliser over `id ^ key`: every input bit reaches the low
/// bits (bucket index) and the top 7 bits (hashbrown's control byte).
#[derive(Clone, Debug)]
pub struct IdHasher {
    state: u64,
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, id: u64) {
        let mut x = self.state ^ id;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^= x >> 33;
        self.state = x;
    }

    fn finish(&self) -> u64 {
        self.state
    }
}

/// A map keyed by user or subject id.
pub type IdMap<V> = std::collections::HashMap<u64, V, IdHashBuilder>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_spread_over_buckets() {
        let b = IdHashBuilder::default();
        let mut seen = vec![0u32; 1024];
        for id in 0..65_536u64 {
            seen[(b.hash_one(id) & 1023) as usize] += 1;
        }
        // 64 per bucket on average; a bad mix would leave buckets empty.
        assert!(seen.iter().all(|&n| n > 16 && n < 160), "{seen:?}");
    }

    #[test]
    fn ids_differing_only_in_high_bits_spread() {
        let b = IdHashBuilder::default();
        let mut seen = std::collections::HashSet::new();
        for i in 0..4096u64 {
            seen.insert(b.hash_one(i << 40) & 4095);
        }
        assert!(seen.len() > 2000, "only {} distinct buckets", seen.len());
    }
}
