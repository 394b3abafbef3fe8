//! [`LocalBus`]: the bus when the router lives in the gateways' own process — a
//! direct call into the [`Hub`], with deliveries pushed into the loops' mailboxes.

use crate::publish::{Handout, Post, Publish};
use crate::Hub;
use bus::{Bus, ConnRef, Inbound, Mailbox, Reply, Request, Wake};
use std::sync::Arc;

pub struct LocalBus {
    hub: Arc<Hub>,
    /// Indexed by loop id.
    mailboxes: Arc<[Arc<Mailbox>]>,
    /// The committer thread's way into the mailboxes (durable history).
    post: Post,
}

impl LocalBus {
    pub fn new(hub: Arc<Hub>, mailboxes: Vec<Arc<Mailbox>>) -> LocalBus {
        let mailboxes: Arc<[Arc<Mailbox>]> = mailboxes.into();
        let post: Post = {
            let mailboxes = mailboxes.clone();
            // Not a loop's thread: the loop is woken now.
            Arc::new(move |loop_id, item| push(&mailboxes, loop_id, item, Wake::Now))
        };
        // Membership pushes of the tick (a grace ran out) go the same way.
        hub.set_post(post.clone());
        LocalBus {
            hub,
            mailboxes,
            post,
        }
    }
}

/// Queues `item` for loop `loop_id` (see [`Wake`] for who wakes it).
fn push(mailboxes: &[Arc<Mailbox>], loop_id: u16, item: Inbound, wake: Wake) {
    match mailboxes.get(loop_id as usize) {
        Some(mailbox) => mailbox.push(item, wake),
        // A connection ref naming a loop this process does not have is a bug in the
        // caller; the message stays in history.
        None => tracing::error!(loop_id, "delivery for an unknown loop dropped"),
    }
}

impl Bus for LocalBus {
    /// Answers at once, except publishes with durable history: those are answered
    /// through the mailbox after their commit ([`Handout::Later`]), so the loop
    /// keeps serving while the disk writes. The caller is a loop's thread: every
    /// mailbox this call fills is left for it to wake ([`Wake::Later`]) once, at the
    /// end of its round — its own drained then, so everything published in one round
    /// leaves in one write per connection.
    fn call(&self, conn: ConnRef, request: Request) -> Option<Reply> {
        let durable = self.hub.durable_history();
        let later = |items| {
            let later = Handout::Later {
                conn,
                post: &self.post,
            };
            let published = self.hub.publish(Publish::to_followers(items), later);
            published.map(|p| p.reply())
        };
        match request {
            Request::Publish { subject, payload } if durable => later(vec![(subject, payload)]),
            Request::PublishBatch { items, .. } if durable => later(items),
            request => Some(self.handle(conn, request)),
        }
    }
}

impl LocalBus {
    fn handle(&self, conn: ConnRef, request: Request) -> Reply {
        self.hub.handle(conn, request, &mut |loop_id, batch| {
            push(
                &self.mailboxes,
                loop_id,
                Inbound::Deliver(batch),
                Wake::Later,
            )
        })
    }
}
