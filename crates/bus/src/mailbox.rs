//! A gateway loop's inbox: delivery batches and late replies queue here, and the
//! loop is woken once per batch of arrivals, not once per item.

use crate::request::Reply;
use parking_lot::Mutex;
use router::Message;
use std::sync::Arc;
use std::time::Instant;

/// A message for some connections of one loop: one batch per publish and loop, so
/// deliveries cross threads in bulk, never one by one.
#[derive(Debug)]
pub struct Delivery {
    pub msg: Arc<Message>,
    /// When the router side received the publish (for delivery latency).
    pub published: Instant,
    /// The connections to hand the message, with their user's position for it.
    pub targets: Vec<Target>,
}

/// One recipient connection of a [`Delivery`]: 16 bytes, like the `(token, seq)`
/// pair it replaced (the epoch fills what was padding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// The connection's token in its loop.
    pub token: u32,
    /// The epoch of the recipient user's history (SPEC B6): changes when that
    /// history is lost (restart, expiry), so a client can tell.
    pub epoch: u32,
    /// The recipient user's sequence number for this message.
    pub seq: u64,
}

/// What arrives in a mailbox.
#[derive(Debug)]
pub enum Inbound {
    Deliver(Delivery),
    /// A reply that was not ready when the connection asked (see [`crate::Bus::call`]).
    Reply {
        token: u32,
        reply: Reply,
    },
}

/// A loop's mailbox. `wake` pokes the loop (an eventfd write); it runs only when
/// the mailbox goes from empty to non-empty, so a burst costs one wake-up.
pub struct Mailbox {
    queue: Mutex<Vec<Inbound>>,
    wake: Box<dyn Fn() + Send + Sync>,
}

impl Mailbox {
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Mailbox {
        Mailbox {
            queue: Mutex::new(Vec::new()),
            wake: Box::new(wake),
        }
    }

    /// Queues `item`; wakes the loop unless `quiet` (the caller is that loop, which
    /// drains its own mailbox before it sleeps again).
    pub fn push(&self, item: Inbound, quiet: bool) {
        let mut queue = self.queue.lock();
        let was_empty = queue.is_empty();
        queue.push(item);
        drop(queue);
        if was_empty && !quiet {
            (self.wake)();
        }
    }

    /// Wakes the loop without queueing anything (to make it look at other state,
    /// such as a stop flag).
    pub fn wake(&self) {
        (self.wake)();
    }

    /// True when something waits (a loop in the middle of a fan-out checks this to
    /// merge what arrived into the writes still to come).
    pub fn has_mail(&self) -> bool {
        !self.queue.lock().is_empty()
    }

    /// Swaps everything queued into `into` (which should be empty, to reuse its
    /// capacity).
    pub fn drain(&self, into: &mut Vec<Inbound>) {
        std::mem::swap(&mut *self.queue.lock(), into);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn delivery(n: u32) -> Inbound {
        Inbound::Deliver(Delivery {
            msg: Arc::new(Message {
                subject: 1,
                payload: bytes::Bytes::from_static(b"x"),
            }),
            published: Instant::now(),
            targets: vec![Target {
                token: n,
                epoch: 0,
                seq: 1,
            }],
        })
    }

    #[test]
    fn one_wake_per_burst_and_none_when_quiet() {
        let wakes = Arc::new(AtomicUsize::new(0));
        let w = wakes.clone();
        let mailbox = Mailbox::new(move || {
            w.fetch_add(1, Ordering::Relaxed);
        });
        mailbox.push(delivery(1), false);
        mailbox.push(delivery(2), false);
        assert_eq!(wakes.load(Ordering::Relaxed), 1, "a burst wakes once");
        let mut got = Vec::new();
        mailbox.drain(&mut got);
        assert_eq!(got.len(), 2);
        mailbox.push(delivery(3), true);
        assert_eq!(wakes.load(Ordering::Relaxed), 1, "quiet pushes do not wake");
        got.clear();
        mailbox.drain(&mut got);
        assert!(matches!(&got[..], [Inbound::Deliver(d)] if d.targets[0].token == 3));
    }
}
