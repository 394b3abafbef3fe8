//! Presence lists (`GET /presence/…`, [`Hub::presence`]: from a channel's mirror
//! without the router lock, or copied under it), and where the router's membership
//! events go (docs/protocol.md "Presence events"):
//! `member_*` pushed to the subscribers of the channel's presence companion, and
//! every event handed to the back-end sinks (NATS) and webhooks, all under the
//! router lock, so each channel's events leave in the order they happened.
//!
//! Most events come from a request (a join, a leave) whose caller takes the
//! deliveries. Those of the tick (a grace running out) and of a gateway's death
//! have no caller waiting: they are posted to the loops by the in-process bus
//! ([`Hub::set_post`]) or, across processes, kept until the router role takes
//! them ([`Hub::take_presence_mail`]), and a request's deliveries always go out
//! after whatever is kept, under the same lock, so the order holds there too.

use crate::publish::{Planned, Post};
use crate::Hub;
use bus::{Inbound, Mail};
use router::{PresenceEvent, Router};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// A back-end sink of membership events: called under the router lock with each
/// run of events and the time they were taken (Unix ms); it must not block.
pub type Sink = Box<dyn Fn(&[PresenceEvent], u64) + Send + Sync>;

impl Hub {
    /// The presence of `of` (`GET /presence/…`). A channel somebody listed before
    /// is read from its mirror (`router::Mirror`) without the router lock, unless
    /// some user has presence info (the infos are the router's); otherwise the
    /// members are copied under the router lock (which makes the mirror for the
    /// next ask) and sorted after it. Exact either way: every join and leave
    /// answered before this call is in it. Timed for `/stats` (`presence_lists`).
    pub fn presence(&self, of: &router::PresenceOf, list: bool) -> router::Presence {
        self.presence_versioned(of, list).0
    }

    /// [`Hub::presence`] and, for an answer read from a channel's mirror, the
    /// mirror's version it is of: the same answer holds while
    /// [`Hub::mirror_version`] says that version.
    pub fn presence_versioned(
        &self,
        of: &router::PresenceOf,
        list: bool,
    ) -> (router::Presence, Option<u64>) {
        let asked = Instant::now();
        if let router::PresenceOf::Channel(name) = of {
            if let Some((copy, version)) = self.read_mirror(name, list) {
                self.lists.record_mirror(asked.elapsed());
                return (copy.finish(), Some(version));
            }
        }
        let mut router = self.router.lock();
        let locked = Instant::now();
        let copy = router.presence_copy(of, list);
        if let router::PresenceOf::Channel(name) = of {
            if !router.has_presence_infos() {
                if let Some(mirror) = router.presence_mirror(name) {
                    let max = router.max_presence_members();
                    let mut mirrors = self.mirrors.lock();
                    if mirrors.len() >= 1024 {
                        mirrors.retain(|_, (m, _)| m.strong_count() > 0);
                    }
                    mirrors.insert(name.as_str().into(), (Arc::downgrade(&mirror), max));
                }
            }
        }
        drop(router);
        self.lists.record(locked - asked, locked.elapsed());
        (copy.finish(), None)
    }

    /// The version of channel `name`'s mirror, if a list would be read from it.
    pub fn mirror_version(&self, name: &str) -> Option<u64> {
        self.mirror_of(name).map(|(mirror, _)| mirror.version())
    }

    fn mirror_of(&self, name: &str) -> Option<(Arc<router::Mirror>, usize)> {
        if self.infos.load(Ordering::SeqCst) {
            return None;
        }
        let mirrors = self.mirrors.lock();
        let (weak, max) = mirrors.get(name)?;
        Some((weak.upgrade()?, *max))
    }

    /// Channel `name`'s presence read from its mirror, if it has one (it lives
    /// with its channel) and no user has presence info.
    fn read_mirror(&self, name: &str, list: bool) -> Option<(router::PresenceCopy, u64)> {
        let (mirror, max) = self.mirror_of(name)?;
        Some(router::PresenceCopy::of_mirror(&mirror, list, max))
    }

    /// Where events without a waiting caller are delivered in this process (the
    /// in-process bus's mailboxes). Set once; later calls change nothing.
    pub fn set_post(&self, post: Post) {
        let _ = self.post.set(post);
    }

    /// Adds a back-end sink of membership events.
    pub fn add_sink(&self, sink: Sink) {
        self.sinks.write().push(sink);
    }

    /// Hands `deliver` the pushes of events that had no caller waiting (kept when
    /// no post is set: across processes), in order.
    pub fn take_presence_mail(&self, deliver: &mut dyn FnMut(u16, Mail)) {
        let _router = self.router.lock();
        for (loop_id, mail) in self.kept.lock().drain(..) {
            deliver(loop_id, mail);
        }
    }

    /// Takes the router's events: pushes, then sinks. `deliver: None` is the tick
    /// or a gateway's death (posted or kept, see the module doc); the tick also
    /// pushes the friends changes of the second (`router::router::friends`).
    pub(crate) fn announce(&self, router: &mut Router, deliver: Option<&mut dyn FnMut(u16, Mail)>) {
        self.announce_with(router, deliver, false);
    }

    /// [`Hub::announce`] of the tick: with the friends changes.
    pub(crate) fn announce_tick(&self, router: &mut Router) {
        self.announce_with(router, None, true);
    }

    fn announce_with(
        &self,
        router: &mut Router,
        deliver: Option<&mut dyn FnMut(u16, Mail)>,
        deliver_friends: bool,
    ) {
        let events = router.take_presence_events();
        let mut kept = self.kept.lock();
        let mut keep;
        let deliver: &mut dyn FnMut(u16, Mail) = match deliver {
            Some(deliver) => {
                for (loop_id, mail) in kept.drain(..) {
                    deliver(loop_id, mail);
                }
                deliver
            }
            None => {
                keep = |loop_id, mail| match self.post.get() {
                    Some(post) => post(loop_id, Inbound::Deliver(mail)),
                    None => kept.push((loop_id, mail)),
                };
                &mut keep
            }
        };
        if deliver_friends {
            for (msg, deliveries) in router.push_friends(std::time::Instant::now()) {
                Planned::friends(msg, deliveries).hand_out(deliver);
            }
            self.friends_for_shards
                .lock()
                .extend(router.take_friends_for_shards());
        }
        if events.is_empty() {
            return;
        }
        for event in &events {
            if let Some(planned) = Planned::presence(router, event) {
                planned.hand_out(deliver);
            }
        }
        let time_ms = unix_ms();
        for sink in self.sinks.read().iter() {
            sink(&events, time_ms);
        }
        // A member's info names a Pusher id that is not a number; a leaving
        // member's is kept until the tick after its `member_removed`.
        let info = |user| router.presence_info(user).map(str::to_string);
        for hook in self.webhooks() {
            hook.push(&events, &info, time_ms);
        }
    }
}

impl Hub {
    /// Makes the router shard `shard` of `shards` for friends events
    /// (`router::router::friends`): followers other shards own are kept for
    /// [`Hub::take_friends_for_shards`].
    pub fn set_friends_shard(&self, shard: u16, shards: u16) {
        self.router.lock().set_friends_shard(shard, shards);
    }

    /// Friends messages for followers other shards own, (follower, payload), in
    /// the order the ticks made them: the router role sends each to its
    /// follower's shard.
    pub fn take_friends_for_shards(&self) -> Vec<(u64, String)> {
        std::mem::take(&mut *self.friends_for_shards.lock())
    }

    /// Another shard's friends messages for users of this one: each published to
    /// its user's companion if they opted in, else dropped; the pushes go to
    /// `deliver` after whatever was kept (so the companions' order holds).
    pub fn friends_from_shard(
        &self,
        items: Vec<(u64, String)>,
        deliver: &mut dyn FnMut(u16, Mail),
    ) {
        let mut router = self.router.lock();
        for (loop_id, mail) in self.kept.lock().drain(..) {
            deliver(loop_id, mail);
        }
        let now = std::time::Instant::now();
        for (recipient, payload) in items {
            if let Some((msg, deliveries)) = router.push_friends_from_shard(recipient, payload, now)
            {
                Planned::friends(msg, deliveries).hand_out(deliver);
            }
        }
    }
}

/// Milliseconds since the Unix epoch (0 on a clock before it).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One event as a back-end reads it: `{"event":"member_added","channel":"C",
/// "user":42,"time_ms":…}` (`user` only for `member_*`).
pub fn event_json(event: &PresenceEvent, time_ms: u64) -> serde_json::Value {
    let mut json = serde_json::json!({
        "event": event.kind.name(),
        "channel": &*event.channel,
        "time_ms": time_ms,
    });
    if let Some(user) = event.user {
        json["user"] = user.into();
    }
    json
}
