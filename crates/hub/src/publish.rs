//! The one publish path: [`Hub::publish`] takes a [`Publish`] (its messages, each
//! with whom it reaches) and a [`Handout`] (where the deliveries go, and when).
//!
//! Each message is planned under the router lock — one lock per message, so a long
//! batch never holds the router for its whole length — into one
//! [`bus::Mail`] per loop it reaches, and handed out:
//! - without durable history, at once, under that lock: that is what keeps each
//!   user's messages in sequence order on every loop;
//! - with durable history (`--history-store store`), after ONE commit for all the
//!   messages, in the order of the tickets taken under the lock (the same order):
//!   by the caller's thread ([`Handout::Now`]), or by the committer thread together
//!   with the answer ([`Handout::Later`], so an event loop never waits on the disk).
//!
//! What varies is data, not a function: one message or a batch (`POST /pub`'s
//! NDJSON, a gateway's run of publishes at the router role), the followers or a
//! listed set of users ([`Reach`], a router shard's part of a publish). A batch's
//! `parallel` flag changes nothing here: it only lets a gateway send a batch's parts
//! to several router shards at once, and one hub keeps the order for free.

use crate::commit::NotStored;
use crate::Hub;
use bus::{ConnRef, Inbound, Mail, Reply, Target};
use bytes::Bytes;
pub use router::Reach;
use router::{Message, PublishCounts, Router};
use std::sync::Arc;
use std::time::Instant;

/// Where the committer thread posts deliveries and late answers: `(loop id, item)`.
pub type Post = Arc<dyn Fn(u16, Inbound) + Send + Sync>;

/// One message of a publish.
#[derive(Debug, Clone)]
pub struct Item {
    pub subject: u64,
    /// The channel, for a message to a channel (`reach` is then `Reach::Channel`).
    pub channel: Option<Box<str>>,
    pub payload: Bytes,
    pub reach: Reach,
}

impl Item {
    /// A message to channel `name`'s subscribers.
    pub fn to_channel(name: &str, payload: Bytes) -> Item {
        Item {
            subject: 0,
            channel: Some(name.into()),
            payload,
            reach: Reach::Channel,
        }
    }
}

/// What to publish: messages applied in this order (one router lock each, one
/// durable commit for all).
#[derive(Debug, Clone, Default)]
pub struct Publish {
    pub items: Vec<Item>,
}

impl Publish {
    /// Messages `(subject, payload)` to their subjects' followers: what a gateway's
    /// `Publish` or `PublishBatch` asks.
    pub fn to_followers(items: impl IntoIterator<Item = (u64, Bytes)>) -> Publish {
        let items = items
            .into_iter()
            .map(|(subject, payload)| Item {
                subject,
                channel: None,
                payload,
                reach: Reach::Followers,
            })
            .collect();
        Publish { items }
    }
}

/// Where a publish's deliveries go, and when.
pub enum Handout<'a> {
    /// To `deliver(loop id, mail)` before [`Hub::publish`] returns.
    Now(&'a mut dyn FnMut(u16, Mail)),
    /// Posted through `post` by the committer thread after the commit, followed by
    /// the answer to `conn` ([`Inbound::Reply`], the summed [`Published::reply`]):
    /// a 200 and every number a client sees still come after the commit, but the
    /// caller goes on meanwhile. Without durable history there is nothing to wait
    /// for: posted at once, and answered by the return value.
    Later { conn: ConnRef, post: &'a Post },
}

/// What a publish reached: each message's counts, in order, and whether its
/// durable write held (`Err`: every message was still delivered, but a restart
/// would not know them).
#[derive(Debug, Clone)]
pub struct Published {
    pub counts: Vec<PublishCounts>,
    pub stored: Result<(), NotStored>,
}

impl Published {
    /// The answer to one call whose messages are `counts` (a run of calls shares
    /// one [`Published`]): `Published`, or `NotStored` when the write failed.
    pub fn reply_for(&self, counts: &[PublishCounts]) -> Reply {
        let (connections, users) = counts.iter().fold((0u64, 0u64), |(c, u), n| {
            (c + u64::from(n.connections), u + u64::from(n.users))
        });
        let reply = Reply::Published {
            messages: counts.len() as u64,
            connections,
            users,
        };
        match &self.stored {
            Ok(()) => reply,
            Err(why) => reply.not_stored(why),
        }
    }

    /// The answer to the whole publish: its messages' reach summed.
    pub fn reply(&self) -> Reply {
        self.reply_for(&self.counts)
    }
}

/// One message's fan-out, planned under the router lock.
pub(crate) struct Planned {
    msg: Arc<Message>,
    published: Instant,
    /// Indexed by loop id; loops are few (one per core and gateway process).
    per_loop: Vec<Vec<Target>>,
    counts: PublishCounts,
}

impl Planned {
    fn new(router: &mut Router, item: Item) -> Planned {
        let msg = Arc::new(Message {
            subject: item.subject,
            channel: item.channel,
            payload: item.payload,
        });
        let published = Instant::now();
        let mut per_loop: Vec<Vec<Target>> = Vec::new();
        let counts = router.handle_publish(&msg, &item.reach, published, &mut |d| {
            add_target(&mut per_loop, d)
        });
        Planned {
            msg,
            published,
            per_loop,
            counts,
        }
    }

    /// A membership event pushed to its channel's presence companion (see
    /// [`Router::push_presence`]); `None` when nobody watches it.
    pub(crate) fn presence(router: &mut Router, event: &router::PresenceEvent) -> Option<Self> {
        let published = Instant::now();
        let mut per_loop: Vec<Vec<Target>> = Vec::new();
        let msg = router.push_presence(event, published, &mut |d| add_target(&mut per_loop, d))?;
        Some(Planned {
            msg,
            published,
            per_loop,
            counts: PublishCounts::default(),
        })
    }

    /// A friends companion's message with its deliveries (see
    /// [`Router::push_friends`]).
    pub(crate) fn friends(msg: Arc<Message>, deliveries: Vec<router::Delivery>) -> Self {
        let mut per_loop: Vec<Vec<Target>> = Vec::new();
        for d in deliveries {
            add_target(&mut per_loop, d);
        }
        Planned {
            msg,
            published: Instant::now(),
            per_loop,
            counts: PublishCounts::default(),
        }
    }

    /// Gives each loop its mail (one per loop with targets).
    pub(crate) fn hand_out(self, deliver: &mut dyn FnMut(u16, Mail)) {
        for (loop_id, targets) in self.per_loop.into_iter().enumerate() {
            if !targets.is_empty() {
                let mail = Mail {
                    msg: self.msg.clone(),
                    published: self.published,
                    targets,
                };
                deliver(loop_id as u16, mail);
            }
        }
    }
}

/// `d` in its loop's list of targets.
fn add_target(per_loop: &mut Vec<Vec<Target>>, d: router::Delivery) {
    let slot = d.conn.loop_id as usize;
    if per_loop.len() <= slot {
        per_loop.resize_with(slot + 1, Vec::new);
    }
    per_loop[slot].push(Target {
        token: d.conn.token,
        epoch: d.epoch,
        seq: d.seq,
    });
}

impl Hub {
    /// Publishes `publish`'s messages in order and hands their deliveries out as
    /// `handout` says (see the module doc). Returns what they reached; `None` only
    /// for [`Handout::Later`] with durable history, whose answer is posted.
    pub fn publish(&self, publish: Publish, handout: Handout<'_>) -> Option<Published> {
        let Some(commit) = &self.history else {
            let mut post_all;
            let deliver: &mut dyn FnMut(u16, Mail) = match handout {
                Handout::Now(deliver) => deliver,
                Handout::Later { post, .. } => {
                    post_all = |loop_id, mail| post(loop_id, Inbound::Deliver(mail));
                    &mut post_all
                }
            };
            let counts = publish
                .items
                .into_iter()
                .map(|item| {
                    let mut router = self.router.lock();
                    let planned = Planned::new(&mut router, item);
                    let counts = planned.counts;
                    // Under the lock: the order of every user's numbers.
                    planned.hand_out(deliver);
                    counts
                })
                .collect();
            return Some(Published {
                counts,
                stored: Ok(()),
            });
        };
        match handout {
            Handout::Now(deliver) => Some(self.publish_committed(commit, publish, deliver)),
            Handout::Later { conn, post } => self.publish_later(commit, publish, conn, post),
        }
    }

    /// [`Hub::publish`] with durable history, handed out by this thread: each
    /// message planned and queued with its ticket, one wait for the last, then
    /// every message's deliveries in ticket order. Durable before anyone sees it:
    /// a client never holds a number that a restart would not know.
    fn publish_committed(
        &self,
        commit: &crate::commit::GroupCommit,
        publish: Publish,
        deliver: &mut dyn FnMut(u16, Mail),
    ) -> Published {
        let mut planned = Vec::with_capacity(publish.items.len());
        let (mut last, mut stores) = (0, false);
        for item in publish.items {
            let mut router = self.router.lock();
            let p = Planned::new(&mut router, item);
            let journal = router.take_journal();
            stores |= !journal.is_empty();
            let (position, ticket) = commit.push_publish(journal);
            drop(router);
            last = position;
            planned.push((ticket, p));
        }
        // A publish that stored nothing (nobody reached) has no write to fail.
        let stored = match (commit.wait_committed(last), stores) {
            (Err(why), true) => Err(why),
            _ => Ok(()),
        };
        let counts = planned
            .into_iter()
            .map(|(ticket, p)| {
                let counts = p.counts;
                commit.in_turn(ticket, || p.hand_out(deliver));
                counts
            })
            .collect();
        Published { counts, stored }
    }

    /// [`Hub::publish`] with durable history, handed out by the committer thread:
    /// each message's deliveries after its commit, in ticket order, and with the
    /// last one the answer to `conn`. Answers at once only a publish of nothing.
    fn publish_later(
        &self,
        commit: &crate::commit::GroupCommit,
        publish: Publish,
        conn: ConnRef,
        post: &Post,
    ) -> Option<Published> {
        let messages = publish.items.len();
        if messages == 0 {
            return Some(Published {
                counts: Vec::new(),
                stored: Ok(()),
            });
        }
        let mut counts = Vec::with_capacity(messages);
        // The first failed write among the messages, for the answer (jobs run in
        // ticket order on the committer thread, the answer's last).
        let failed: Arc<parking_lot::Mutex<Option<NotStored>>> = Default::default();
        for item in publish.items {
            let mut router = self.router.lock();
            let planned = Planned::new(&mut router, item);
            counts.push(planned.counts);
            // The answer rides with the last message: after every one is handed out.
            let answer = (counts.len() == messages).then(|| Published {
                counts: std::mem::take(&mut counts),
                stored: Ok(()),
            });
            let post = post.clone();
            let failed = failed.clone();
            commit.push_later(
                router.take_journal(),
                Box::new(move |stored| {
                    planned.hand_out(&mut |loop_id, mail| post(loop_id, Inbound::Deliver(mail)));
                    if let Err(why) = stored {
                        failed.lock().get_or_insert(why);
                    }
                    if let Some(mut answer) = answer {
                        if let Some(why) = failed.lock().take() {
                            answer.stored = Err(why);
                        }
                        let reply = answer.reply();
                        post(
                            conn.loop_id,
                            Inbound::Reply {
                                token: conn.token,
                                reply,
                            },
                        );
                    }
                }),
            );
            drop(router);
        }
        None
    }

    /// True when publishes are written to the store before they are answered
    /// (`--history-store store`): then [`Handout::Later`] saves the caller the wait.
    pub fn durable_history(&self) -> bool {
        self.history.is_some()
    }
}
