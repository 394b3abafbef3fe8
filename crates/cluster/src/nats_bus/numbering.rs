//! The router's bundles in their numbered order: each router shard numbers what it
//! sends this gateway ([`ToGateway::Bundle`](crate::codec::ToGateway::Bundle) `n` of
//! its `lane`). A bundle that skips numbers is held back while the missing ones
//! are asked for again ([`ToRouter::Replay`](crate::codec::ToRouter::Replay)); a
//! number seen twice (a replay crossing the original) is dropped; a replay that
//! comes in pieces is asked on ([`ToGateway::Rest`](crate::codec::ToGateway::Rest)). After the NATS
//! connection came back, every lane is asked from its next number, so what was
//! lost meanwhile comes back even when nothing follows it. What the router no
//! longer keeps ([`ToGateway::Missed`](crate::codec::ToGateway::Missed)), or does
//! not send within [`GIVE_UP`] of the last progress, may have held deliveries to
//! any connection: they are all told to resume, and the held bundles go on.

use crate::codec::GatewayItem;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// A gap still open this long is asked for again (the request or its answer lost).
pub(super) const ASK_AGAIN: Duration = Duration::from_millis(500);
/// A gap that made no progress for this long is given up.
pub(super) const GIVE_UP: Duration = Duration::from_secs(3);

/// What the receiver does next, in this order.
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    /// Hand these items to the loops.
    Apply(Vec<GatewayItem>),
    /// Ask router shard `shard` for `lane`'s bundles from `from` on.
    Ask { shard: u16, lane: u64, from: u64 },
    /// Bundles were lost for good: tell every connection to resume.
    TellAll,
}

/// One router shard's lane to this gateway.
struct Lane {
    lane: u64,
    /// The number of the next bundle to apply.
    expect: u64,
    /// Bundles after a gap, by number.
    held: BTreeMap<u64, Vec<GatewayItem>>,
    /// When the current gap was seen or last narrowed, and last asked for.
    gap_since: Option<Instant>,
    asked: Instant,
}

/// Every shard's lane, and counts for `/stats`.
#[derive(Default)]
pub(super) struct Numbering {
    by_shard: HashMap<u16, Lane>,
    gaps: u64,
    duplicates: u64,
    given_up: u64,
}

impl Numbering {
    /// Bundle `n` of `lane` from router shard `shard`.
    pub(super) fn bundle(
        &mut self,
        shard: u16,
        lane: u64,
        n: u64,
        items: Vec<GatewayItem>,
        now: Instant,
        out: &mut Vec<Step>,
    ) {
        let s = self
            .by_shard
            .entry(shard)
            .or_insert_with(|| Lane::new(lane, now));
        if s.lane != lane {
            // The shard restarted or began the lane again: what the old lane
            // still held back after a gap goes on, with the gap told.
            if !s.held.is_empty() {
                out.push(Step::TellAll);
                out.extend(std::mem::take(&mut s.held).into_values().map(Step::Apply));
            }
            *s = Lane::new(lane, now);
        }
        if n < s.expect || s.held.contains_key(&n) {
            self.duplicates += 1;
            return;
        }
        if n > s.expect {
            s.held.insert(n, items);
            if s.gap_since.is_none() {
                self.gaps += 1;
                s.gap_since = Some(now);
                s.asked = now;
                out.push(Step::Ask {
                    shard,
                    lane,
                    from: s.expect,
                });
            }
            return;
        }
        out.push(Step::Apply(items));
        s.expect += 1;
        s.release(now, out);
    }

    /// The router no longer keeps bundles `from..=to` of `lane` (`to ==
    /// u64::MAX`: it does not know the lane).
    pub(super) fn missed(
        &mut self,
        lane: u64,
        from: u64,
        to: u64,
        now: Instant,
        out: &mut Vec<Step>,
    ) {
        let Some(s) = self.by_shard.values_mut().find(|s| s.lane == lane) else {
            return;
        };
        if s.expect < from || s.expect > to {
            return;
        }
        out.push(Step::TellAll);
        s.expect = if to == u64::MAX {
            s.held.keys().next().copied().unwrap_or(s.expect)
        } else {
            to + 1
        };
        s.held.retain(|&n, _| n >= s.expect);
        s.release(now, out);
    }

    /// The router's replay of `lane` stopped short: ask for the rest.
    pub(super) fn rest(&mut self, lane: u64, now: Instant, out: &mut Vec<Step>) {
        if let Some((&shard, s)) = self.by_shard.iter_mut().find(|(_, s)| s.lane == lane) {
            s.asked = now;
            out.push(Step::Ask {
                shard,
                lane,
                from: s.expect,
            });
        }
    }

    /// The NATS connection came back: ask every lane from its next number.
    pub(super) fn reconnected(&mut self, now: Instant, out: &mut Vec<Step>) {
        for (&shard, s) in &mut self.by_shard {
            s.asked = now;
            out.push(Step::Ask {
                shard,
                lane: s.lane,
                from: s.expect,
            });
        }
    }

    /// Gaps asked for [`ASK_AGAIN`] ago are asked again; gaps open for [`GIVE_UP`]
    /// are given up.
    pub(super) fn tick(&mut self, now: Instant, out: &mut Vec<Step>) {
        for (&shard, s) in &mut self.by_shard {
            let Some(since) = s.gap_since else {
                continue;
            };
            if now.saturating_duration_since(since) >= GIVE_UP {
                self.given_up += 1;
                out.push(Step::TellAll);
                s.expect = s.held.keys().next().copied().unwrap_or(s.expect);
                s.release(now, out);
            } else if now.saturating_duration_since(s.asked) >= ASK_AGAIN {
                s.asked = now;
                out.push(Step::Ask {
                    shard,
                    lane: s.lane,
                    from: s.expect,
                });
            }
        }
    }

    /// Gaps seen, bundles seen twice, gaps given up.
    pub(super) fn counts(&self) -> (u64, u64, u64) {
        (self.gaps, self.duplicates, self.given_up)
    }

    /// Whether some gap is open (the receiver's timer runs only then).
    pub(super) fn waiting(&self) -> bool {
        self.by_shard.values().any(|s| s.gap_since.is_some())
    }
}

impl Lane {
    fn new(lane: u64, now: Instant) -> Lane {
        Lane {
            lane,
            expect: 1,
            held: BTreeMap::new(),
            gap_since: None,
            asked: now,
        }
    }

    /// Applies the held bundles that now follow on; the gap is closed once none
    /// is held. A gap still open counts from now: [`GIVE_UP`] is time without
    /// progress, so a long replay in pieces is not given up while it comes.
    fn release(&mut self, now: Instant, out: &mut Vec<Step>) {
        while let Some(items) = self.held.remove(&self.expect) {
            out.push(Step::Apply(items));
            self.expect += 1;
        }
        self.gap_since = (!self.held.is_empty()).then_some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::WireReply;
    use bus::Reply;

    /// An item that says which bundle it came in.
    fn item(n: u64) -> Vec<GatewayItem> {
        vec![GatewayItem::Reply(WireReply {
            loop_id: 0,
            token: n as u32,
            part: None,
            reply: Reply::Done,
        })]
    }

    /// The steps as text: "3" applies bundle 3, "ask 2" asks from 2, "all" tells all.
    fn show(out: &mut Vec<Step>) -> Vec<String> {
        out.drain(..)
            .map(|s| match s {
                Step::Apply(items) => match &items[0] {
                    GatewayItem::Reply(r) => r.token.to_string(),
                    GatewayItem::Deliver(_) => unreachable!(),
                },
                Step::Ask { from, .. } => format!("ask {from}"),
                Step::TellAll => "all".into(),
            })
            .collect()
    }

    #[test]
    fn a_gap_is_held_asked_for_and_filled_in_order() {
        let (t0, mut out) = (Instant::now(), Vec::new());
        let mut nb = Numbering::default();
        for n in [1, 2, 4, 5] {
            nb.bundle(0, 9, n, item(n), t0, &mut out);
        }
        assert_eq!(show(&mut out), ["1", "2", "ask 3"]);
        assert!(nb.waiting());
        // Not answered: asked again, then the replay comes with a copy of 4.
        nb.tick(t0 + ASK_AGAIN, &mut out);
        assert_eq!(show(&mut out), ["ask 3"]);
        // A gap that makes progress is not given up: 3 s after it opened, but
        // only 1 s after 3 came, nothing is told.
        let mut slow = Numbering::default();
        for n in [1, 4] {
            slow.bundle(0, 9, n, item(n), t0, &mut out);
        }
        slow.bundle(0, 9, 2, item(2), t0 + GIVE_UP - ASK_AGAIN, &mut out);
        slow.tick(t0 + GIVE_UP, &mut out);
        assert_eq!(show(&mut out), ["1", "ask 2", "2", "ask 3"]);
        slow.tick(t0 + 2 * GIVE_UP, &mut out);
        assert_eq!(show(&mut out), ["all", "4"]);
        for n in [3, 4, 6] {
            nb.bundle(0, 9, n, item(n), t0, &mut out);
        }
        assert_eq!(show(&mut out), ["3", "4", "5", "6"]);
        assert!(!nb.waiting());
        // A replay in pieces: the rest is asked from the next number.
        nb.rest(9, t0, &mut out);
        assert_eq!(show(&mut out), ["ask 7"]);
        assert_eq!((nb.gaps, nb.duplicates), (1, 1));
        // After a reconnect every lane is asked from its next number; what comes
        // back twice is dropped.
        nb.bundle(1, 7, 1, item(1), t0, &mut out);
        assert_eq!(show(&mut out), ["1"]);
        nb.reconnected(t0, &mut out);
        out.sort_by_key(|s| format!("{s:?}"));
        assert_eq!(show(&mut out), ["ask 7", "ask 2"], "shard 0's, shard 1's");
        nb.bundle(0, 9, 6, item(6), t0, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn what_the_router_no_longer_keeps_is_told_to_every_connection() {
        let (t0, mut out) = (Instant::now(), Vec::new());
        let mut nb = Numbering::default();
        for n in [1, 5, 6] {
            nb.bundle(0, 9, n, item(n), t0, &mut out);
        }
        assert_eq!(show(&mut out), ["1", "ask 2"]);
        // 2..=3 are gone, 4 comes again.
        nb.missed(9, 2, 3, t0, &mut out);
        nb.bundle(0, 9, 4, item(4), t0, &mut out);
        assert_eq!(show(&mut out), ["all", "4", "5", "6"]);
        // A second answer to the same gap changes nothing.
        nb.missed(9, 2, 3, t0, &mut out);
        assert!(out.is_empty());
        // A lane the router does not know: all told, the held ones go on.
        nb.bundle(0, 9, 9, item(9), t0, &mut out);
        nb.missed(9, 7, u64::MAX, t0, &mut out);
        assert_eq!(show(&mut out), ["ask 7", "all", "9"]);
        // Never answered: given up after GIVE_UP.
        nb.bundle(0, 9, 12, item(12), t0, &mut out);
        nb.tick(t0 + GIVE_UP, &mut out);
        assert_eq!(show(&mut out), ["ask 10", "all", "12"]);
        assert_eq!(nb.given_up, 1);
        // A new lane from the shard (it restarted) starts at 1; a gap the old
        // one held is told and its bundles go on first.
        nb.bundle(0, 9, 15, item(15), t0, &mut out);
        nb.bundle(0, 4, 1, item(1), t0, &mut out);
        assert_eq!(show(&mut out), ["ask 13", "all", "15", "1"]);
        assert!(!nb.waiting());
    }
}
