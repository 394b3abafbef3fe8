//! One publish: planned under the router lock (each loop's targets), then handed
//! out — at once under that lock, after the durable commit in ticket order, or, for
//! [`Hub::publish_later`], by the committer thread together with the answer.

use crate::commit::NotStored;
use crate::Hub;
use bus::{ConnRef, Delivery, Inbound, Reply, Request, Target};
use bytes::Bytes;
pub use router::Reach;
use router::{Message, PublishCounts, Router};
use std::sync::Arc;
use std::time::Instant;

/// Where the committer thread posts deliveries and late answers: `(loop id, item)`.
pub type Post = Arc<dyn Fn(u16, Inbound) + Send + Sync>;

/// One message's fan-out, planned under the router lock.
struct Planned {
    msg: Arc<Message>,
    published: Instant,
    /// Indexed by loop id; loops are few (one per core and gateway process).
    per_loop: Vec<Vec<Target>>,
    counts: PublishCounts,
}

impl Planned {
    fn new(router: &mut Router, subject: u64, payload: Bytes, reach: Reach) -> Planned {
        let msg = Arc::new(Message { subject, payload });
        let published = Instant::now();
        let mut per_loop: Vec<Vec<Target>> = Vec::new();
        let counts = router.handle_publish(&msg, &reach, published, &mut |d| {
            let slot = d.conn.loop_id as usize;
            if per_loop.len() <= slot {
                per_loop.resize_with(slot + 1, Vec::new);
            }
            per_loop[slot].push(Target {
                token: d.conn.token,
                epoch: d.epoch,
                seq: d.seq,
            });
        });
        Planned {
            msg,
            published,
            per_loop,
            counts,
        }
    }

    /// Gives each loop its batch (one per loop with targets).
    fn hand_out(self, deliver: &mut dyn FnMut(u16, Delivery)) {
        for (loop_id, targets) in self.per_loop.into_iter().enumerate() {
            if !targets.is_empty() {
                let batch = Delivery {
                    msg: self.msg.clone(),
                    published: self.published,
                    targets,
                };
                deliver(loop_id as u16, batch);
            }
        }
    }
}

impl Hub {
    /// Plans the fan-out of one message and hands every loop its batch before the
    /// router lock is released (with durable history: after the commit, in ticket
    /// order, which keeps the same order). `Err` carries the counts too: the
    /// message went out but its durable write failed.
    pub(crate) fn publish(
        &self,
        subject: u64,
        payload: Bytes,
        deliver: &mut dyn FnMut(u16, Delivery),
    ) -> (PublishCounts, Result<(), NotStored>) {
        self.publish_to(subject, payload, Reach::Followers, deliver)
    }

    /// [`Hub::publish`] reaching whom `reach` says.
    pub fn publish_to(
        &self,
        subject: u64,
        payload: Bytes,
        reach: Reach,
        deliver: &mut dyn FnMut(u16, Delivery),
    ) -> (PublishCounts, Result<(), NotStored>) {
        let mut router = self.router.lock();
        let planned = Planned::new(&mut router, subject, payload, reach);
        let counts = planned.counts;
        let mut stored = Ok(());
        match &self.history {
            None => {
                planned.hand_out(deliver);
                drop(router);
            }
            // Durable before anyone sees it: a client never holds a number that a
            // restart would not know (it would be told of a gap that is not one).
            // Tickets keep the router's order once its lock is gone.
            Some(commit) => {
                let journal = router.take_journal();
                let stores = !journal.is_empty();
                let (position, ticket) = commit.push_publish(journal);
                drop(router);
                if let (Err(why), true) = (commit.wait_committed(position), stores) {
                    stored = Err(why);
                }
                commit.in_turn(ticket, || planned.hand_out(deliver));
            }
        }
        (counts, stored)
    }

    /// Publishes `items` in order (one router lock per item) with ONE durable
    /// commit for all of them: each item is planned and queued with its ticket,
    /// the caller waits once for the last, then every item's deliveries go out in
    /// ticket order. Without durable history, the same as [`Hub::publish`] in turn.
    /// A batch, or a gateway's run of publishes at the router role, then costs one
    /// store round trip instead of one per message. `Err` when the commit failed
    /// (every item was still delivered).
    pub fn publish_each(
        &self,
        items: Vec<(u64, Bytes)>,
        deliver: &mut dyn FnMut(u16, Delivery),
    ) -> (Vec<PublishCounts>, Result<(), NotStored>) {
        let items = items
            .into_iter()
            .map(|(subject, payload)| (subject, payload, Reach::Followers))
            .collect();
        self.publish_each_to(items, deliver)
    }

    /// [`Hub::publish_each`], each item reaching whom its [`Reach`] says.
    pub fn publish_each_to(
        &self,
        items: Vec<(u64, Bytes, Reach)>,
        deliver: &mut dyn FnMut(u16, Delivery),
    ) -> (Vec<PublishCounts>, Result<(), NotStored>) {
        let Some(commit) = &self.history else {
            let counts = items
                .into_iter()
                .map(|(subject, payload, reach)| {
                    self.publish_to(subject, payload, reach, deliver).0
                })
                .collect();
            return (counts, Ok(()));
        };
        let mut planned = Vec::with_capacity(items.len());
        let (mut last, mut stores) = (0, false);
        for (subject, payload, reach) in items {
            let mut router = self.router.lock();
            let p = Planned::new(&mut router, subject, payload, reach);
            let journal = router.take_journal();
            stores |= !journal.is_empty();
            let (position, ticket) = commit.push_publish(journal);
            drop(router);
            last = position;
            planned.push((ticket, p));
        }
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
        (counts, stored)
    }

    /// True when publishes are written to the store before they are answered
    /// (`--history-store store`): then [`Hub::publish_later`] saves the caller the wait.
    pub fn durable_history(&self) -> bool {
        self.history.is_some()
    }

    /// Publishes `items` (one lock per item, like a batch through [`Hub::handle`])
    /// without waiting for the durable commit: the committer thread hands each
    /// item's deliveries out after its commit, in ticket order, and then posts the
    /// answer (`Reply::Published`) to `conn` as [`Inbound::Reply`] — the same
    /// guarantee as a synchronous publish (a 200 and every number a client sees
    /// come after the commit), but the calling loop goes on serving meanwhile.
    /// Returns the answer at once only when there is nothing to wait for (no
    /// durable history, or no item).
    pub fn publish_later(
        &self,
        conn: ConnRef,
        items: Vec<(u64, Bytes)>,
        post: &Post,
    ) -> Option<Reply> {
        let Some(commit) = &self.history else {
            let mut deliver = |loop_id, batch| post(loop_id, Inbound::Deliver(batch));
            return Some(self.handle(
                conn,
                Request::PublishBatch {
                    items,
                    parallel: false,
                },
                &mut deliver,
            ));
        };
        let messages = items.len() as u64;
        if messages == 0 {
            return Some(Reply::Published {
                messages,
                connections: 0,
                users: 0,
            });
        }
        let (mut connections, mut users) = (0u64, 0u64);
        // The first failed write among the items, for the answer (jobs run in
        // ticket order on the committer thread, the answer's last).
        let failed: Arc<parking_lot::Mutex<Option<NotStored>>> = Default::default();
        for (i, (subject, payload)) in items.into_iter().enumerate() {
            let mut router = self.router.lock();
            let planned = Planned::new(&mut router, subject, payload, Reach::Followers);
            connections += u64::from(planned.counts.connections);
            users += u64::from(planned.counts.users);
            // The answer rides with the last item: after every item is handed out.
            let answer = (i as u64 + 1 == messages).then_some(Reply::Published {
                messages,
                connections,
                users,
            });
            let post = post.clone();
            let failed = failed.clone();
            commit.push_later(
                router.take_journal(),
                Box::new(move |stored| {
                    planned.hand_out(&mut |loop_id, batch| post(loop_id, Inbound::Deliver(batch)));
                    if let Err(why) = stored {
                        failed.lock().get_or_insert(why);
                    }
                    if let Some(reply) = answer {
                        let reply = match failed.lock().take() {
                            Some(why) => reply.not_stored(&why),
                            None => reply,
                        };
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
}
