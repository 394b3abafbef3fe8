//! What a channel keeps beyond its subscribers: its history ring read by clients
//! and pages, read back from a durable log at start, and forgotten with the channel
//! once it has been idle for its ttl.

use super::{key, Channel, Channels, Keep, Position};
use crate::budget::HistoryTotals;
use crate::history::{Journal, Ring};
use crate::{HistoryRead, Message};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The channels that may have outlived their ttl, oldest first: (idle since,
/// name, mark). A channel is forgotten `ttl` after it was last left empty or
/// published to while empty, at its entry whose mark is still its `idle` (checked
/// lazily by [`Channels::expire`]; an entry of an earlier period is stale).
#[derive(Debug, Default)]
pub(super) struct Idle {
    entries: VecDeque<(Instant, Arc<str>, u32)>,
    /// The last mark given.
    marks: u32,
}

impl Idle {
    /// `channel` (named `name`) has no subscriber from `now`: a new idle period,
    /// whose ttl runs from the entry queued here.
    pub(super) fn start(&mut self, channel: &mut Channel, name: Arc<str>, now: Instant) {
        self.marks = self.marks.checked_add(1).unwrap_or(1);
        channel.idle = self.marks;
        self.entries.push_back((now, name, self.marks));
    }

    /// Another entry at `now` for `channel`'s idle period going on (none while it
    /// has subscribers): it can end the period once the older one is past.
    pub(super) fn again(&mut self, channel: &Channel, name: Arc<str>, now: Instant) {
        if channel.idle != 0 {
            self.entries.push_back((now, name, channel.idle));
        }
    }

    /// The oldest entry queued `ttl` or longer before `now`, taken out.
    fn pop_older(&mut self, now: Instant, ttl: Duration) -> Option<(Arc<str>, u32)> {
        let (at, _, _) = self.entries.front()?;
        if now.saturating_duration_since(*at) < ttl {
            return None;
        }
        self.entries.pop_front().map(|(_, name, mark)| (name, mark))
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<(Instant, Arc<str>, u32)>()
    }
}

impl Channels {
    /// What `name` keeps after `since` (`None`: its newest `limit`), at most `limit`
    /// messages, oldest first. An unknown channel reads as empty, with a gap for a
    /// client that had a position in it.
    pub fn history(
        &self,
        name: &str,
        since: Option<(Option<u32>, u64)>,
        limit: usize,
    ) -> HistoryRead {
        match self.map.get(name) {
            Some(channel) => channel.read_ring(|ring| read(ring, since, limit)),
            None => HistoryRead {
                messages: Vec::new(),
                last: 0,
                gap: since.is_some_and(|(epoch, seq)| seq > 0 || epoch.is_some()),
                epoch: None,
            },
        }
    }

    /// The channel's position (`None` while it does not exist).
    pub fn position(&self, name: &str) -> Option<Position> {
        self.map.get(name).map(|c| Position {
            epoch: c.epoch,
            seq: c.ring.as_ref().map_or(0, |r| r.last()),
        })
    }

    /// Puts back a durable history of channel `name` read at start: `msgs` are
    /// numbers `first, first + 1, …` of `epoch`, oldest first, kept within the
    /// bounds as if published now; the channel counts as idle since `now`. Returns
    /// the messages kept (none for a channel that exists already).
    pub(crate) fn restore(
        &mut self,
        name: &str,
        (epoch, first): (u32, u64),
        msgs: impl IntoIterator<Item = Arc<Message>>,
        keep: Keep<'_>,
        now: Instant,
    ) -> usize {
        if first == 0 || self.map.contains_key(name) {
            return 0;
        }
        let mut channel = Channel::new(epoch);
        let ring = channel
            .ring
            .insert(Box::new(Ring::resume(epoch, first - 1)));
        for msg in msgs {
            let pushed = ring.push(&msg, keep.capacity, keep.max_bytes);
            keep.totals.record(&pushed);
            if pushed.stored {
                keep.totals.trim(ring);
            }
        }
        let kept = ring.len();
        let name: Arc<str> = name.into();
        self.idle.start(&mut channel, name.clone(), now);
        self.map.insert(name, channel);
        kept
    }

    /// Forgets channels idle (no subscriber) for `ttl`, with their history.
    pub(crate) fn expire(
        &mut self,
        now: Instant,
        ttl: Duration,
        totals: &mut HistoryTotals,
        mut journal: Option<&mut Vec<Journal>>,
    ) {
        while let Some((name, mark)) = self.idle.pop_older(now, ttl) {
            // Stale entries: the channel was joined again, or went idle later (a
            // later mark); a channel with users in their grace goes once they are
            // announced gone.
            let expired = self
                .map
                .get(&name)
                .is_some_and(|c| c.subs.is_empty() && c.leaving == 0 && c.idle == mark);
            if expired {
                self.mirrors.remove(&name);
                let channel = self.map.remove(&name).expect("checked above");
                if let Some(ring) = &channel.ring {
                    totals.forget(ring.len(), ring.bytes());
                }
                if let Some(journal) = journal.as_deref_mut() {
                    journal.push(Journal::Forgot(key(&name)));
                }
            }
        }
    }
}

/// `ring`'s answer to a client at `since` (see [`Ring::read`]), cut to `limit`:
/// from a position, the oldest `limit` after it (read on from the last); from
/// none, the newest `limit` (`usize::MAX`: none, only the position).
pub(super) fn read(ring: &Ring, since: Option<(Option<u32>, u64)>, limit: usize) -> HistoryRead {
    let (messages, gap) = match since {
        Some((epoch, seq)) => {
            let (mut messages, gap) = ring.read(epoch, seq);
            messages.truncate(limit);
            (messages, gap)
        }
        None if limit == usize::MAX => (Vec::new(), false),
        None => {
            let (mut messages, _) = ring.read(None, 0);
            let skip = messages.len().saturating_sub(limit);
            messages.drain(..skip);
            (messages, false)
        }
    };
    // A cut read answers the position of its last message, to read on from.
    let last = match (limit, messages.last()) {
        (usize::MAX, _) | (_, None) => ring.last(),
        (_, Some(&(seq, _))) => seq,
    };
    HistoryRead {
        messages,
        last,
        gap,
        epoch: Some(ring.epoch()),
    }
}
