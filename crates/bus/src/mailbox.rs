//! A gateway loop's inbox: delivery batches and late replies queue here, and the
//! loop is woken only when it is about to sleep or sleeping (parked), once per park:
//! a loop that is awake drains its mailbox before it sleeps, so waking it would only
//! cost an eventfd write and a spurious poll round.

use crate::request::Reply;
use parking_lot::Mutex;
use router::Message;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// A loop's mailbox. `wake` pokes the loop (an eventfd write); it runs only for a
/// parked loop, once per park, so a burst — or anything that arrives while the loop
/// works — costs at most one wake-up.
pub struct Mailbox {
    queue: Mutex<Vec<Inbound>>,
    /// Set by the loop before it sleeps, cleared when it wakes or by the push that
    /// wakes it. No wake-up is lost: the loop sets it *before* it looks at the queue
    /// and a pusher reads it *after* it queued, both under the queue's lock, so
    /// either the loop sees the item or the pusher sees the flag.
    parked: AtomicBool,
    wake: Box<dyn Fn() + Send + Sync>,
}

impl Mailbox {
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Mailbox {
        Mailbox {
            queue: Mutex::new(Vec::new()),
            parked: AtomicBool::new(false),
            wake: Box::new(wake),
        }
    }

    /// Queues `item`; wakes the loop unless `quiet` (the caller is that loop, which
    /// drains its own mailbox before it sleeps again).
    pub fn push(&self, item: Inbound, quiet: bool) {
        self.queue.lock().push(item);
        if !quiet
            && self.parked.load(Ordering::Acquire)
            && self.parked.swap(false, Ordering::AcqRel)
        {
            (self.wake)();
        }
    }

    /// Called by the loop before it sleeps: false (and not parked) when mail is
    /// already waiting, so the loop drains instead of sleeping.
    pub fn park(&self) -> bool {
        self.parked.store(true, Ordering::Release);
        if self.queue.lock().is_empty() {
            return true;
        }
        self.parked.store(false, Ordering::Release);
        false
    }

    /// Called by the loop when its poll returns: pushes no longer wake it.
    pub fn unpark(&self) {
        self.parked.store(false, Ordering::Release);
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
        mailbox.push(delivery(0), false);
        assert_eq!(
            wakes.load(Ordering::Relaxed),
            0,
            "an awake loop is not woken"
        );
        assert!(!mailbox.park(), "mail waits: the loop must not sleep");
        let mut got = Vec::new();
        mailbox.drain(&mut got);
        assert!(mailbox.park());
        mailbox.push(delivery(1), false);
        mailbox.push(delivery(2), false);
        assert_eq!(wakes.load(Ordering::Relaxed), 1, "a burst wakes once");
        got.clear();
        mailbox.drain(&mut got);
        assert_eq!(got.len(), 2);
        assert!(mailbox.park());
        mailbox.push(delivery(3), true);
        assert_eq!(wakes.load(Ordering::Relaxed), 1, "quiet pushes do not wake");
        got.clear();
        mailbox.drain(&mut got);
        assert!(matches!(&got[..], [Inbound::Deliver(d)] if d.targets[0].token == 3));
    }

    /// Two threads push numbered items while a consumer parks and sleeps between
    /// drains, as a loop does: every item arrives, once, in each pusher's order, so
    /// no wake-up was lost to the park/push race.
    #[test]
    fn parked_consumer_gets_everything_in_order() {
        const PER_PUSHER: u32 = 50_000;
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let tx = Mutex::new(tx);
        let mailbox = Arc::new(Mailbox::new(move || {
            let _ = tx.lock().send(());
        }));
        let pushers: Vec<_> = (0..2u32)
            .map(|p| {
                let mailbox = mailbox.clone();
                std::thread::spawn(move || {
                    for i in 0..PER_PUSHER {
                        mailbox.push(delivery(p * PER_PUSHER + i), false);
                        if i % 1000 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let mut next = [0u32; 2];
        let mut got = Vec::new();
        while next.iter().sum::<u32>() < 2 * PER_PUSHER {
            if mailbox.park() {
                // A lost wake-up would hang here: fail instead of waiting forever.
                rx.recv_timeout(std::time::Duration::from_secs(20))
                    .expect("a parked consumer with mail waiting was not woken");
            }
            mailbox.unpark();
            mailbox.drain(&mut got);
            for item in got.drain(..) {
                let Inbound::Deliver(d) = item else {
                    panic!("only deliveries were pushed")
                };
                let n = d.targets[0].token;
                let p = (n / PER_PUSHER) as usize;
                assert_eq!(n % PER_PUSHER, next[p], "pusher {p}'s order");
                next[p] += 1;
            }
        }
        for p in pushers {
            p.join().unwrap();
        }
        mailbox.drain(&mut got);
        assert!(got.is_empty(), "nothing beyond what was pushed");
        assert_eq!(next, [PER_PUSHER; 2]);
    }
}
