//! A gateway loop's inbox: delivery batches and late replies queue here, and the
//! loop is woken once per batch of arrivals, not once per item.

use crate::request::Reply;
use parking_lot::Mutex;
use router::Message;
use std::cell::Cell;
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
    Deliver(Delivery),
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

/// A loop's mailbox. `wake` pokes the loop (an eventfd write); it runs only when
/// the mailbox goes from empty to non-empty, so a burst costs one wake-up.
///
/// A loop thread may take over that wake-up ([`defer_wakes_on_this_thread`]):
/// its pushes then only mark the mailbox *unwoken*, and after each bus call the
/// loop settles what it marked ([`take_deferred`], [`Mailbox::take_unwoken`]) —
/// by running the other loop's mailbox itself when that loop is asleep and the
/// mail is small (no wake-up, no context switch: the unicast path), else by
/// waking it as before.
pub struct Mailbox {
    queue: Mutex<Queue>,
    /// Set by a deferring push that found the queue empty; cleared by whoever
    /// settles it (drains or wakes).
    unwoken: AtomicBool,
    wake: Box<dyn Fn() + Send + Sync>,
}

#[derive(Default)]
struct Queue {
    items: Vec<Inbound>,
    /// Recipient connections queued (a reply counts one).
    weight: usize,
}

thread_local! {
    /// This thread settles the wake-ups of its pushes itself.
    static DEFERS: Cell<bool> = const { Cell::new(false) };
    /// Some push of this thread left a mailbox unwoken since the last settle.
    static DEFERRED: Cell<bool> = const { Cell::new(false) };
}

/// From now on, pushes from this thread that would wake a loop leave it unwoken
/// instead; the thread promises to call [`take_deferred`] after every call that
/// may push, and to settle every mailbox it finds [`Mailbox::take_unwoken`].
pub fn defer_wakes_on_this_thread() {
    DEFERS.with(|d| d.set(true));
}

/// True once after a push of this thread left some mailbox unwoken.
pub fn take_deferred() -> bool {
    DEFERRED.with(|d| d.replace(false))
}

impl Mailbox {
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Mailbox {
        Mailbox {
            queue: Mutex::new(Queue::default()),
            unwoken: AtomicBool::new(false),
            wake: Box::new(wake),
        }
    }

    /// Queues `item`; wakes the loop unless `quiet` (the caller is that loop, which
    /// drains its own mailbox before it sleeps again) or this thread defers its
    /// wake-ups (then it settles them: see [`defer_wakes_on_this_thread`]).
    pub fn push(&self, item: Inbound, quiet: bool) {
        let weight = match &item {
            Inbound::Deliver(d) => d.targets.len(),
            Inbound::Reply { .. } | Inbound::Lost { .. } => 1,
        };
        let mut queue = self.queue.lock();
        let was_empty = queue.items.is_empty();
        queue.items.push(item);
        queue.weight += weight;
        if !was_empty || quiet {
            return;
        }
        if DEFERS.with(Cell::get) {
            // Marked under the queue's lock: whoever takes the mark finds the item.
            self.unwoken.store(true, Ordering::Release);
            drop(queue);
            DEFERRED.with(|d| d.set(true));
        } else {
            drop(queue);
            (self.wake)();
        }
    }

    /// True once after a deferring push left this mailbox unwoken: the caller
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

    fn numbered(pusher: u32, n: u32) -> Inbound {
        Inbound::Reply {
            token: pusher,
            reply: Reply::Unavailable(n.to_string()),
        }
    }

    #[test]
    fn a_deferring_thread_settles_its_own_wakes() {
        let wakes = Arc::new(AtomicUsize::new(0));
        let w = wakes.clone();
        let mailbox = Arc::new(Mailbox::new(move || {
            w.fetch_add(1, Ordering::Relaxed);
        }));
        let m = mailbox.clone();
        std::thread::spawn(move || {
            defer_wakes_on_this_thread();
            assert!(!take_deferred());
            m.push(delivery(1), false);
            m.push(numbered(0, 1), false);
            assert!(
                take_deferred(),
                "the first push into an empty mailbox defers"
            );
            assert!(!take_deferred(), "once");
            assert_eq!(m.weight(), 2);
        })
        .join()
        .unwrap();
        assert_eq!(wakes.load(Ordering::Relaxed), 0, "nobody was woken");
        assert!(mailbox.take_unwoken());
        assert!(!mailbox.take_unwoken(), "the debt is taken once");
        let mut got = Vec::new();
        mailbox.drain(&mut got);
        assert_eq!((got.len(), mailbox.weight()), (2, 0));
        // A thread that does not defer wakes as before.
        mailbox.push(delivery(2), false);
        assert_eq!(wakes.load(Ordering::Relaxed), 1);
        assert!(!mailbox.take_unwoken());
    }

    /// The gateway's protocol with real threads: pushers defer, then settle each
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
                    defer_wakes_on_this_thread();
                    let (mut drained, mut woke) = (0u32, 0u32);
                    for n in 0..EACH {
                        mailbox.push(numbered(p, n), false);
                        if take_deferred() && mailbox.take_unwoken() {
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
