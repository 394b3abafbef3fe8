//! What the router keeps of each gateway's bundles, to send again: a NATS
//! connection that drops on the gateway's side only (nats-server cutting off a
//! gateway that fell behind, a blip on one host) loses what the router sent it
//! meanwhile, with the router none the wiser. Each router → gateway
//! [`ToGateway::Bundle`] is numbered in a lane per gateway; the gateway asks again
//! from the first number it missed ([`ToRouter::Replay`](crate::codec::ToRouter::Replay))
//! when the numbers skip or its connection came back, and gets the bundles this
//! ring still holds, in pieces of [`REPLAY_PIECE`], with a [`ToGateway::Missed`]
//! for the ones it no longer does.
//!
//! A ring holds the encoded bundles (the bytes already made for sending, shared,
//! not copied) for at most [`RING_AGE`] and `--replay-bytes` per gateway. It
//! outlives a forgotten gateway for [`RING_KEEP`], so a gateway cut off long enough
//! to be forgotten still gets its bundles back when it returns.

use super::RouterRole;
use crate::codec::{self, GatewayId, ToGateway};
use crate::subjects;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Bundles older than this are not kept: a gateway cut off for longer has been
/// forgotten, and its connections have reconnected elsewhere or will resume.
pub const RING_AGE: Duration = Duration::from_secs(10);
/// A forgotten gateway's ring is dropped after this long without a bundle.
pub const RING_KEEP: Duration = Duration::from_secs(60);
/// Default for `--replay-bytes`: what a ring holds at most per gateway. Enough for
/// [`RING_AGE`] of `bench c1m`'s publishing per gateway (~0.8 MiB of graph
/// deliveries at 1,000/s over 53 gateways), and at most 53 MiB for a million
/// connections — 53 B of the 256-B budget per connection — where 4 MiB would
/// be 212.
pub const DEFAULT_RING_BYTES: usize = 1 << 20;
/// Rings that held this much and then half as much give memory back.
const TRIM_AT: usize = 1 << 20;
/// A replay sends about this much (at least one bundle), then [`ToGateway::Rest`]:
/// the gateway asks for more once it has these. All at once, a ring's worth could
/// exceed nats-server's `max_pending` for a gateway just reconnected, and the
/// gateway would lose it again (measured with a `max_pending` of 64 KiB: a 224 KiB
/// replay was cut off at every try, one bundle getting through each time). A full
/// ring of 1 MiB comes back in 16 round trips.
const REPLAY_PIECE: usize = 64 << 10;

/// One gateway's numbered bundles.
struct Ring {
    /// Random when the ring starts: a gateway that sees another lane knows the
    /// numbering started over (a router restart, a ring dropped and begun again).
    lane: u64,
    /// The number of the next bundle.
    next: u64,
    /// `(n, since, encoded bundle)`, oldest first. `since` is when the bundle
    /// after it was numbered (its own numbering for the newest): the first moment
    /// its loss could show, a gateway seeing a later number. A bundle's age counts
    /// from then, so a router that sent a gateway nothing for a while (publishes
    /// waiting on a stream electing its leader) still has the last bundle before
    /// the lull when the next one reveals it lost.
    kept: VecDeque<(u64, Instant, Bytes)>,
    bytes: usize,
    last_sent: Instant,
}

/// The rings by gateway, and what they did.
pub(super) struct Rings {
    /// This router's shard, named in every bundle.
    pub(super) shard: u16,
    by_gateway: HashMap<GatewayId, Ring>,
    /// `--replay-bytes`: what one ring holds at most.
    pub(super) max_bytes: usize,
    /// The most the rings held at a tick since memory was last given back.
    peak: usize,
    replays: u64,
    batches_replayed: u64,
    missed: u64,
}

impl Rings {
    pub(super) fn new(max_bytes: usize) -> Rings {
        Rings {
            shard: 0,
            by_gateway: HashMap::new(),
            max_bytes,
            peak: 0,
            replays: 0,
            batches_replayed: 0,
            missed: 0,
        }
    }

    /// Requests to send again, bundles sent again, requests that reached past the
    /// ring.
    pub(super) fn counts(&self) -> (u64, u64, u64) {
        (self.replays, self.batches_replayed, self.missed)
    }

    /// Numbers `items` as `gateway`'s next bundle, keeps it and returns it encoded.
    pub(super) fn number(
        &mut self,
        gateway: GatewayId,
        items: Vec<codec::GatewayItem>,
        now: Instant,
    ) -> Bytes {
        let ring = self.by_gateway.entry(gateway).or_insert_with(|| Ring {
            lane: rand::random(),
            next: 1,
            kept: VecDeque::new(),
            bytes: 0,
            last_sent: now,
        });
        let n = ring.next;
        ring.next += 1;
        ring.last_sent = now;
        // The bundle before this one could be seen missing only from now on.
        if let Some(previous) = ring.kept.back_mut() {
            previous.1 = now;
        }
        let bytes = codec::encode_to_gateway(&ToGateway::Bundle {
            shard: self.shard,
            lane: ring.lane,
            n,
            items,
        });
        ring.bytes += bytes.len();
        ring.kept.push_back((n, now, bytes.clone()));
        ring.trim(self.max_bytes, now);
        bytes
    }

    /// Drops what is too old, and the rings of gateways gone for [`RING_KEEP`].
    /// Once they hold less than half their peak, the freed memory goes back to the
    /// kernel: a million logins fill the rings with their replies (up to
    /// `--replay-bytes` per gateway), and the router should not keep that while
    /// it only holds.
    pub(super) fn age(&mut self, known: impl Fn(GatewayId) -> bool, now: Instant) {
        let max = self.max_bytes;
        let before = self.bytes();
        self.by_gateway.retain(|&id, ring| {
            ring.trim(max, now);
            known(id) || now.saturating_duration_since(ring.last_sent) < RING_KEEP
        });
        let after = self.bytes();
        self.peak = self.peak.max(before);
        if self.peak >= TRIM_AT && after < self.peak / 2 {
            self.peak = after;
            // SAFETY: malloc_trim only returns free heap pages to the kernel.
            #[cfg(target_os = "linux")]
            unsafe {
                libc::malloc_trim(0);
            }
        }
    }

    /// The router's loop stalled: nothing it kept aged meanwhile, as no gateway
    /// could see a loss while it sent nothing.
    pub(super) fn restart_ages(&mut self, now: Instant) {
        for ring in self.by_gateway.values_mut() {
            for kept in &mut ring.kept {
                kept.1 = kept.1.max(now);
            }
        }
    }

    /// After the router's own NATS reconnect, which may have lost what it sent
    /// last: each gateway's newest bundle again. A gateway that had it drops it
    /// (seen twice); one that missed it, or bundles before it, asks for them at
    /// once — not when a later bundle shows the hole, perhaps past [`RING_AGE`].
    pub(super) fn newest(&self) -> Vec<(GatewayId, Bytes)> {
        self.by_gateway
            .iter()
            .filter_map(|(&id, ring)| Some((id, ring.kept.back()?.2.clone())))
            .collect()
    }

    /// What the rings hold.
    fn bytes(&self) -> usize {
        self.by_gateway.values().map(|r| r.bytes).sum()
    }

    /// What answers `gateway`'s request for `lane` from `from` on: a
    /// [`ToGateway::Missed`] for what is no longer kept, then the kept bundles.
    fn replay(&mut self, gateway: GatewayId, lane: u64, from: u64) -> Vec<Bytes> {
        self.replays += 1;
        let Some(ring) = self
            .by_gateway
            .get(&gateway)
            .filter(|ring| ring.lane == lane)
        else {
            self.missed += 1;
            return vec![missed(lane, from, u64::MAX)];
        };
        let mut out = Vec::new();
        let oldest = ring.kept.front().map_or(ring.next, |k| k.0);
        if from < oldest {
            self.missed += 1;
            out.push(missed(lane, from, oldest - 1));
        }
        let mut bytes = 0;
        let mut again = ring.kept.iter().filter(|k| k.0 >= from).peekable();
        while let Some((_, _, bundle)) = again.next_if(|_| bytes < REPLAY_PIECE) {
            bytes += bundle.len();
            out.push(bundle.clone());
            self.batches_replayed += 1;
        }
        if let Some((next, _, _)) = again.peek() {
            out.push(codec::encode_to_gateway(&ToGateway::Rest {
                lane,
                from: *next,
            }));
        }
        out
    }
}

impl Ring {
    /// Drops bundles past `max_bytes`, and those older than [`RING_AGE`] but the
    /// newest (nothing after it shows its loss yet).
    fn trim(&mut self, max_bytes: usize, now: Instant) {
        while let Some((_, since, bytes)) = self.kept.front() {
            let young = self.kept.len() == 1 || now.saturating_duration_since(*since) < RING_AGE;
            if self.bytes <= max_bytes && young {
                break;
            }
            self.bytes -= bytes.len();
            self.kept.pop_front();
        }
    }
}

fn missed(lane: u64, from: u64, to: u64) -> Bytes {
    codec::encode_to_gateway(&ToGateway::Missed { lane, from, to })
}

impl RouterRole {
    /// A gateway's [`ToRouter::Replay`](crate::codec::ToRouter::Replay): what it
    /// asked for goes out again, in order, after what is queued for it already.
    pub(super) fn replay(&mut self, gateway: GatewayId, lane: u64, from: u64) {
        let again = self.rings.replay(gateway, lane, from);
        let (replays, replayed, missed) = self.rings.counts();
        self.counters.replays.store(replays, Relaxed);
        self.counters.batches_replayed.store(replayed, Relaxed);
        self.counters.replays_missed.store(missed, Relaxed);
        tracing::warn!(
            gateway = format!("{gateway:016x}"),
            from,
            bundles = again.len(),
            "a gateway lost bundles on the way: sent again"
        );
        let subject = subjects::gateway(gateway);
        self.out
            .extend(again.into_iter().map(|bytes| (subject.clone(), bytes)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode_to_gateway;

    fn numbers(out: &[Bytes]) -> Vec<String> {
        out.iter()
            .map(|b| match decode_to_gateway(b).unwrap() {
                ToGateway::Bundle { n, .. } => format!("{n}"),
                ToGateway::Missed { from, to, .. } => format!("missed {from}..={to}"),
                ToGateway::Rest { from, .. } => format!("rest from {from}"),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    fn lane_of(bytes: &Bytes) -> u64 {
        match decode_to_gateway(bytes).unwrap() {
            ToGateway::Bundle { lane, .. } => lane,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_ring_sends_again_what_it_keeps_and_says_what_it_does_not() {
        let t0 = Instant::now();
        let mut rings = Rings::new(usize::MAX);
        let first = rings.number(1, Vec::new(), t0);
        let lane = lane_of(&first);
        // Room for five bundles like the first.
        rings.max_bytes = 5 * first.len();
        for _ in 2..=8 {
            rings.number(1, Vec::new(), t0);
        }
        // 8 sent, the last 5 kept.
        assert_eq!(numbers(&rings.replay(1, lane, 6)), ["6", "7", "8"]);
        assert_eq!(
            numbers(&rings.replay(1, lane, 2)),
            ["missed 2..=3", "4", "5", "6", "7", "8"]
        );
        assert!(rings.replay(1, lane, 9).is_empty(), "up to date");
        // Another lane (this one began after the gateway's), another gateway.
        assert_eq!(
            numbers(&rings.replay(1, lane ^ 1, 3)),
            [format!("missed 3..={}", u64::MAX)]
        );
        assert_eq!(
            numbers(&rings.replay(2, 0, 1))[0],
            format!("missed 1..={}", u64::MAX)
        );
        assert_eq!(rings.counts(), (5, 8, 3));

        // Past RING_AGE only the newest is kept (nothing after it could show it
        // lost yet); a forgotten gateway's ring goes after RING_KEEP, a known
        // one's stays and keeps numbering.
        let later = t0 + RING_AGE;
        rings.number(2, Vec::new(), t0);
        rings.age(|id| id == 1, later);
        assert_eq!(numbers(&rings.replay(1, lane, 7)), ["missed 7..=7", "8"]);
        rings.age(|id| id == 1, t0 + RING_KEEP);
        assert!(rings.by_gateway.contains_key(&1));
        assert!(!rings.by_gateway.contains_key(&2));
        assert_eq!(numbers(&[rings.number(1, Vec::new(), later)]), ["9"]);
    }

    /// A bundle's age counts from the next one: after a lull longer than RING_AGE
    /// (publishes waiting on a stream that elects its leader) the bundle before it
    /// is still there when the next reveals it lost, and the next tick's aging
    /// keeps it for RING_AGE more. A stall of the router's loop restarts every age.
    #[test]
    fn a_lull_or_a_stall_ages_nothing_a_gateway_could_not_see_lost() {
        let t0 = Instant::now();
        let mut rings = Rings::new(usize::MAX);
        let lane = lane_of(&rings.number(1, Vec::new(), t0));
        rings.number(1, Vec::new(), t0);
        let after_lull = t0 + 3 * RING_AGE;
        rings.age(|_| true, after_lull);
        rings.number(1, Vec::new(), after_lull);
        rings.age(|_| true, after_lull + RING_AGE / 2);
        assert_eq!(numbers(&rings.replay(1, lane, 2)), ["2", "3"]);
        assert_eq!(
            numbers(&rings.replay(1, lane, 1)),
            ["missed 1..=1", "2", "3"]
        );

        // Bundles 4 and 5 numbered, then the loop stalls past RING_AGE: 4 stays.
        let t1 = after_lull + RING_AGE;
        rings.number(1, Vec::new(), t1);
        rings.number(1, Vec::new(), t1);
        let woke = t1 + 2 * RING_AGE;
        rings.restart_ages(woke);
        rings.age(|_| true, woke);
        assert_eq!(numbers(&rings.replay(1, lane, 4)), ["4", "5"]);
        rings.age(|_| true, woke + RING_AGE);
        assert_eq!(numbers(&rings.replay(1, lane, 4)), ["missed 4..=4", "5"]);

        // The newest bundle of each ring, sent again after a reconnect.
        let newest = rings.newest();
        assert_eq!(newest.len(), 1);
        assert_eq!(numbers(&[newest[0].1.clone()]), ["5"]);
    }

    #[test]
    fn a_large_replay_goes_in_pieces() {
        let t0 = Instant::now();
        let mut rings = Rings::new(usize::MAX);
        let item = || {
            vec![codec::GatewayItem::Reply(codec::WireReply {
                loop_id: 0,
                token: 1,
                part: None,
                reply: bus::Reply::Unavailable("x".repeat(REPLAY_PIECE / 3)),
            })]
        };
        let lane = lane_of(&rings.number(1, item(), t0));
        for _ in 2..=5 {
            rings.number(1, item(), t0);
        }
        assert_eq!(
            numbers(&rings.replay(1, lane, 1)),
            ["1", "2", "3", "rest from 4"]
        );
        assert_eq!(numbers(&rings.replay(1, lane, 4)), ["4", "5"]);
    }
}
