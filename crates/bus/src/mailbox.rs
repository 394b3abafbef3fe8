//! A gateway loop's inbox: mail (a publish's message for the loop's connections)
//! and late replies queue here, and the loop is woken once per burst of arrivals,
//! not once per item.

use crate::request::Reply;
use parking_lot::Mutex;
use router::Message;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Mail: a message for some connections of one loop, one per publish and loop, so
/// deliveries (one message to one connection) cross threads in bulk, never one by
/// one.
#[derive(Debug)]
pub struct Mail {
    pub msg: Arc<Message>,
    /// When the router side received the publish (for delivery latency).
    pub published: Instant,
    /// The connections to hand the message, with their user's position for it.
    pub targets: Vec<Target>,
}

/// One recipient connection of a [`Mail`]: 16 bytes, like the `(token, seq)`
/// pair it replaced (the epoch fills what was padding). Crosses NATS as it is, a
/// few varint bytes each (`cluster::codec`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    Deliver(Mail),
    /// A reply that was not ready when the connection asked (see [`crate::Bus::call`]).
    Reply {
        token: u32,
        reply: Reply,
    },
    /// Deliveries for this connection were lost on the way (a gateway's NATS link
    /// dropped them): it is told to reconnect and resume from history, before any
    /// later delivery reaches it.
    Lost {
        token: u32,
    },
}

/// Who wakes the loop when a push finds its mailbox empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The pusher, now: a thread that is not a loop (a NATS receiver, a committer).
    Now,
    /// The loop thread that pushed, at the end of its round: the mailbox is marked
    /// unwoken and that loop settles every mark it made ([`Mailbox::take_unwoken`]) —
    /// by running a small batch itself while the owner sleeps, or by waking it
    /// (`gateway::pump::handoff`). A loop's pushes to its own mailbox are drained by
    /// itself after the round, with whatever else the round published.
    Later,
}

/// A loop's mailbox. `wake` pokes the loop (an eventfd write); it runs only when
/// the mailbox goes from empty to non-empty, so a burst costs one wake-up.
pub struct Mailbox {
    queue: Mutex<Queue>,
    /// Set by a [`Wake::Later`] push that found the queue empty; cleared by
    /// whoever settles it (drains or wakes).
    unwoken: AtomicBool,
    wake: Box<dyn Fn() + Send + Sync>,
}

#[derive(Default)]
struct Queue {
    items: Vec<Inbound>,
    /// Recipient connections queued (a reply counts one).
    weight: usize,
}

impl Mailbox {
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Mailbox {
        Mailbox {
            queue: Mutex::new(Queue::default()),
            unwoken: AtomicBool::new(false),
            wake: Box::new(wake),
        }
    }

    /// Queues `item`; when the mailbox was empty, wakes the loop now or leaves the
    /// wake-up to the pushing loop (see [`Wake`]).
    pub fn push(&self, item: Inbound, wake: Wake) {
        let weight = match &item {
            Inbound::Deliver(d) => d.targets.len(),
            Inbound::Reply { .. } | Inbound::Lost { .. } => 1,
        };
        let mut queue = self.queue.lock();
        let was_empty = queue.items.is_empty();
        queue.items.push(item);
        queue.weight += weight;
        if !was_empty {
            return;
        }
        match wake {
            // Marked under the queue's lock: whoever takes the mark finds the item.
            Wake::Later => self.unwoken.store(true, Ordering::Release),
            Wake::Now => {
                drop(queue);
                (self.wake)();
            }
        }
    }

    /// True once after a [`Wake::Later`] push left this mailbox unwoken: the caller
    /// now owes it a drain or a wake-up.
    pub fn take_unwoken(&self) -> bool {
        self.unwoken.load(Ordering::Relaxed) && self.unwoken.swap(false, Ordering::AcqRel)
    }

    /// Recipient connections waiting (a reply counts one).
    pub fn weight(&self) -> usize {
        self.queue.lock().weight
    }

    /// Wakes the loop without queueing anything (to make it look at other state,
    /// such as a stop flag).
    pub fn wake(&self) {
        (self.wake)();
    }

    /// True when something waits (a loop in the middle of a fan-out checks this to
    /// merge what arrived into the writes still to come).
    pub fn has_mail(&self) -> bool {
        !self.queue.lock().items.is_empty()
    }

    /// Swaps everything queued into `into` (which should be empty, to reuse its
    /// capacity).
    pub fn drain(&self, into: &mut Vec<Inbound>) {
        let mut queue = self.queue.lock();
        queue.weight = 0;
        std::mem::swap(&mut queue.items, into);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn delivery(n: u32) -> Inbound {
        Inbound::Deliver(Mail {
            msg: Arc::new(Message::to_subject(1, bytes::Bytes::from_static(b"x"))),
            published: Instant::now(),
            targets: vec![Target {
                token: n,
                epoch: 0,
                seq: 1,
            }],
        })
    }

    #[test]
    fn one_wake_per_burst_and_none_when_later() {
        let wakes = Arc::new(AtomicUsize::new(0));
        let w = wakes.clone();
        let mailbox = Mailbox::new(move || {
            w.fetch_add(1, Ordering::Relaxed);
        });
        mailbox.push(delivery(1), Wake::Now);
        mailbox.push(delivery(2), Wake::Now);
        assert_eq!(wakes.load(Ordering::Relaxed), 1, "a burst wakes once");
        let mut got = Vec::new();
        mailbox.drain(&mut got);
        assert_eq!(got.len(), 2);
        mailbox.push(delivery(3), Wake::Later);
        assert_eq!(wakes.load(Ordering::Relaxed), 1, "later pushes do not wake");
        got.clear();
        mailbox.drain(&mut got);
        assert!(matches!(&got[..], [Inbound::Deliver(d)] if d.targets[0].token == 3));
    }

    fn numbered(pusher: u32, n: u32) -> Inbound {
        Inbound::Reply {
            token: pusher,
            reply: Reply::Unavailable(n.to_string()),
        }
    }

    #[test]
    fn a_later_push_leaves_one_mark_for_its_pusher() {
        let wakes = Arc::new(AtomicUsize::new(0));
        let w = wakes.clone();
        let mailbox = Mailbox::new(move || {
            w.fetch_add(1, Ordering::Relaxed);
        });
        mailbox.push(delivery(1), Wake::Later);
        mailbox.push(numbered(0, 1), Wake::Later);
        assert_eq!(mailbox.weight(), 2);
        assert_eq!(wakes.load(Ordering::Relaxed), 0, "nobody was woken");
        assert!(mailbox.take_unwoken());
        assert!(!mailbox.take_unwoken(), "the debt is taken once");
        let mut got = Vec::new();
        mailbox.drain(&mut got);
        assert_eq!((got.len(), mailbox.weight()), (2, 0));
        // A push that wakes now leaves no mark.
        mailbox.push(delivery(2), Wake::Now);
        assert_eq!(wakes.load(Ordering::Relaxed), 1);
        assert!(!mailbox.take_unwoken());
    }

    /// The gateway's protocol with real threads: pushers push [`Wake::Later`], then settle each
    /// unwoken mark by draining the consumer's mailbox themselves when its state is
    /// free (`try_lock`), else by waking it; the consumer drains only when woken.
    /// Once every pusher is done and every wake-up taken, the mailbox must be
    /// empty (an item nobody drained and nobody was woken for is a lost wake-up),
    /// and every item must have arrived once, each pusher's in order.
    #[test]
    fn settled_by_drain_or_wake_nothing_is_lost_and_order_is_kept() {
        use std::sync::mpsc::RecvTimeoutError;
        const PUSHERS: u32 = 3;
        const EACH: u32 = 20_000;
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let tx = parking_lot::Mutex::new(tx);
        let mailbox = Arc::new(Mailbox::new(move || {
            let _ = tx.lock().send(());
        }));
        // The consumer loop's state: what it received, in order.
        let state = Arc::new(parking_lot::Mutex::new(Vec::<(u32, u32)>::new()));
        let done = Arc::new(AtomicUsize::new(0));
        let take = |mailbox: &Mailbox, into: &mut Vec<(u32, u32)>| {
            let mut got = Vec::new();
            mailbox.drain(&mut got);
            for item in got {
                let Inbound::Reply {
                    token,
                    reply: Reply::Unavailable(n),
                } = item
                else {
                    panic!("only numbered items")
                };
                into.push((token, n.parse().unwrap()));
            }
        };
        let pushers: Vec<_> = (0..PUSHERS)
            .map(|p| {
                let (mailbox, state, done) = (mailbox.clone(), state.clone(), done.clone());
                std::thread::spawn(move || {
                    let (mut drained, mut woke) = (0u32, 0u32);
                    for n in 0..EACH {
                        mailbox.push(numbered(p, n), Wake::Later);
                        if mailbox.take_unwoken() {
                            match state.try_lock() {
                                Some(mut s) => {
                                    take(&mailbox, &mut s);
                                    drained += 1;
                                }
                                None => {
                                    mailbox.wake();
                                    woke += 1;
                                }
                            }
                        }
                    }
                    done.fetch_add(1, Ordering::Release);
                    (drained, woke)
                })
            })
            .collect();
        let deadline = Instant::now() + std::time::Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "pushers never finished");
            match rx.recv_timeout(std::time::Duration::from_millis(20)) {
                Ok(()) => take(&mailbox, &mut state.lock()),
                Err(RecvTimeoutError::Timeout)
                    if done.load(Ordering::Acquire) == PUSHERS as usize =>
                {
                    break
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => unreachable!("the mailbox holds the sender"),
            }
        }
        // Wake-ups sent just before the last pusher finished.
        while rx.try_recv().is_ok() {
            take(&mailbox, &mut state.lock());
        }
        assert!(!mailbox.has_mail(), "items left behind without a wake-up");
        let settled: Vec<(u32, u32)> = pushers.into_iter().map(|p| p.join().unwrap()).collect();
        assert!(
            settled.iter().any(|&(d, _)| d > 0),
            "some pusher drained: {settled:?}"
        );
        let got = state.lock();
        for p in 0..PUSHERS {
            let mine: Vec<u32> = got.iter().filter(|x| x.0 == p).map(|x| x.1).collect();
            assert_eq!(mine, (0..EACH).collect::<Vec<_>>(), "pusher {p}");
        }
    }
}
