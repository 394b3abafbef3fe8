//! `hub`: the router role — one [`Router`] and the durable [`Store`] behind one lock
//! order, answering bus requests (DESIGN "processes and machines").
//!
//! In one process the gateways reach it through [`LocalBus`], a direct call; across
//! processes a broker carries the same requests to it. Either way this is the only
//! place that locks the router or the store.
//!
//! **Lock order: `store` → `router` → a loop's mailbox.** Subscription changes write
//! the store first and then the index while still holding the store, so a crash
//! between the two leaves only the store, from which the index is rebuilt at start.
//! A publish hands every loop its delivery batch before the router lock is released,
//! which is what keeps each user's messages in sequence order on every loop (with
//! durable history: after the commit, in the order of tickets taken under the lock).
//!
//! Layout:
//! - this file: [`Hub`], requests in, replies and delivery batches out.
//! - [`local`]: [`LocalBus`], the in-process [`bus::Bus`].
//! - [`args`]: the router-side flags of `myriad serve` (store, history).
//! - [`durable`]: `--history-store store|jetstream`, the history rings' copy in a
//!   durable [`store::history::HistoryLog`].
//! - [`commit`]: its writes, one transaction per group of publishes, outside the
//!   router lock, and the committer thread that answers publishes after them.
//! - [`pusher`]: Pusher apps on the router side: each app's webhook
//!   (`--pusher-webhook`, [`webhook`], [`webhook_style`]) and a client event's member.
//! - [`publish`]: the one publish path, [`Hub::publish`]: a [`Publish`] (messages,
//!   each with whom it reaches) handed out as a [`Handout`] says — at once, or, with
//!   durable history, by the committer thread with the answer (what [`LocalBus`]
//!   uses, so a loop never waits on the disk).

pub mod args;
pub mod commit;
pub mod durable;
pub mod local;
pub mod presence;
pub mod publish;
pub mod pusher;
mod stats;
pub mod webhook;
pub mod webhook_style;

pub use args::HubArgs;
pub use local::LocalBus;
pub use publish::{Handout, Item, Publish, Published, Reach};
pub use stats::stats_json;

use anyhow::Context;
use bus::{ConnRef, HistoryRead, Mail, Reply, Request};
use parking_lot::Mutex;
use router::{Router, RouterConfig, RouterStats};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use store::Store;

pub struct Hub {
    store: Mutex<Box<dyn Store>>,
    router: Mutex<Router>,
    /// The durable copy of history (`--history-store store`), written by group
    /// commit after the router lock is released and before deliveries leave.
    history: Option<commit::GroupCommit>,
    /// Most connections seen by a tick since the last compaction (see [`Hub::tick`]).
    peak: AtomicU64,
    /// Most history bytes seen by a tick since memory was last given back.
    history_peak: AtomicU64,
    /// Most users holding a history ring since the last trim.
    rings_peak: AtomicU64,
    /// Where membership pushes without a waiting caller go in this process
    /// ([`presence`]); unset, they are `kept`.
    post: std::sync::OnceLock<publish::Post>,
    kept: Mutex<Vec<(u16, Mail)>>,
    /// Friends messages for followers other router shards own ([`presence`]).
    friends_for_shards: Mutex<Vec<(u64, String)>>,
    /// Back-end sinks of membership events (NATS).
    sinks: parking_lot::RwLock<Vec<presence::Sink>>,
    /// `--webhook`: membership events (and, in Pusher's format, client events).
    webhook: Option<webhook::Webhook>,
    /// Each `--pusher-webhook`, by its app's id (see [`pusher`]).
    pusher_webhooks: Vec<(String, webhook::Webhook)>,
    /// Where presence lists spend their time in the router role (`/stats`).
    lists: stats::ListTimes,
    /// Channels' presence mirrors by name, and the list bound when made (weak: a
    /// mirror lives with its channel, so a channel made again is not read from
    /// its predecessor's).
    mirrors: Mutex<Mirrors>,
    /// Some user has presence info: lists are read under the router lock. Set
    /// under it wherever infos change, before the change is answered.
    infos: std::sync::atomic::AtomicBool,
}

/// Channels' presence mirrors by name, each with the list bound when it was made.
type Mirrors = HashMap<Box<str>, (std::sync::Weak<router::Mirror>, usize)>;

/// History this large that expired by half is worth returning to the kernel: rings
/// are many small allocations the allocator otherwise keeps resident (a churn soak's
/// server stayed at 55 MB after every user and their history had gone, idle 10 MB).
const TRIM_HISTORY_BYTES: u64 = 4 << 20;

impl Hub {
    pub fn new(router: Router, store: Box<dyn Store>) -> Hub {
        Hub {
            store: Mutex::new(store),
            router: Mutex::new(router),
            history: None,
            peak: AtomicU64::new(0),
            history_peak: AtomicU64::new(0),
            rings_peak: AtomicU64::new(0),
            post: std::sync::OnceLock::new(),
            kept: Mutex::new(Vec::new()),
            friends_for_shards: Mutex::new(Vec::new()),
            sinks: parking_lot::RwLock::new(Vec::new()),
            webhook: None,
            pusher_webhooks: Vec::new(),
            lists: stats::ListTimes::default(),
            mirrors: Mutex::new(HashMap::new()),
            infos: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Opens the hub `serve` flags describe: the store (with `--store-sync`), the
    /// index and, with `--history-store store`, the durable history in that store
    /// read back into the router (epochs and numbers kept). `jetstream` needs the
    /// NATS client, which this crate does not link: see [`Hub::open_with_history`].
    pub fn open_args(args: &HubArgs) -> anyhow::Result<Hub> {
        let log = match args.history_store {
            args::HistoryStore::Memory => None,
            args::HistoryStore::Store => Some(
                store::history::open_history(&args.store, &args.store_options())
                    .with_context(|| format!("cannot open durable history in {}", args.store))?,
            ),
            args::HistoryStore::Jetstream => {
                anyhow::bail!(
                    "--history-store jetstream is opened by the caller (Hub::open_with_history)"
                )
            }
        };
        Hub::open_with_history(args, log, &|_| true)
    }

    /// [`Hub::open_args`] with the durable history `log` (or none: in memory), read
    /// back into the router before the hub answers anything. Only users `owns`
    /// accepts come back: router shards share one log, and a shard holding another
    /// shard's ring would, at its ttl, delete that shard's stored rows. The index
    /// holds only the edges of subjects `owns` accepts (a router shard keeps the
    /// follower lists of its own subjects: `--router-shards` divides the index).
    pub fn open_with_history(
        args: &HubArgs,
        log: Option<Box<dyn store::history::HistoryLog>>,
        owns: &dyn Fn(u64) -> bool,
    ) -> anyhow::Result<Hub> {
        let mut config = args.router_config();
        config.journal = log.is_some();
        let store = store::open_with(&args.store, &args.store_options())
            .with_context(|| format!("cannot open store {}", args.store))?;
        let mut hub = Hub::with_store(store, &args.store, config, owns)?;
        if let Some(log) = log {
            let log = durable::restore(&hub.router, log, owns)?;
            hub.history = Some(commit::GroupCommit::new(log, args.history)?);
        }
        if let Some(url) = &args.webhook {
            hub.webhook = Some(pusher::webhook(url, args)?);
        }
        Ok(hub)
    }

    /// Opens the store named by `url` and builds the router's index from every
    /// stored subscription.
    pub fn open(url: &str, config: RouterConfig) -> anyhow::Result<Hub> {
        let store = store::open(url).with_context(|| format!("cannot open store {url}"))?;
        Hub::with_store(store, url, config, &|_| true)
    }

    /// The hub over `store`, its index built from the stored edges of the subjects
    /// `owns` accepts.
    fn with_store(
        mut store: Box<dyn Store>,
        url: &str,
        config: RouterConfig,
        owns: &dyn Fn(u64) -> bool,
    ) -> anyhow::Result<Hub> {
        let started = Instant::now();
        // Sized up front: no array regrowth while 30 M edges stream in (a shard
        // that keeps a part of them has its arrays trimmed by `build`).
        let mut builder = router::IndexBuilder::with_capacity(store.edge_count()? as usize);
        let mut kept = 0u64;
        let edges = store.for_each_edge(&mut |subscriber, subject| {
            if owns(subject) {
                kept += 1;
                builder.push(subscriber, subject);
            }
        })?;
        let index = builder.build();
        tracing::info!(
            store = url,
            edges,
            kept,
            index_bytes = index.memory_bytes(),
            ms = started.elapsed().as_millis() as u64,
            "subscription index built"
        );
        Ok(Hub::new(Router::new(config, index), store))
    }

    /// Answers `request` from `conn`. A publish hands each loop's batch to
    /// `deliver(loop_id, batch)` while the router lock is held (see the crate doc).
    pub fn handle(
        &self,
        conn: ConnRef,
        request: Request,
        deliver: &mut dyn FnMut(u16, Mail),
    ) -> Reply {
        match request {
            Request::Login { user, since, epoch } => {
                Reply::History(self.login(conn, user, since, epoch))
            }
            Request::Logout { user } => {
                self.router.lock().handle_logout(user, conn, Instant::now());
                Reply::Done
            }
            Request::Publish { subject, payload } => {
                self.publish_now(Publish::to_followers([(subject, payload)]), deliver)
            }
            Request::Join {
                user,
                login,
                since,
                epoch,
                channels,
                info,
            } => self.join(
                conn,
                (user, info),
                login.then_some((since, epoch)),
                &channels,
                deliver,
            ),
            Request::Leave { channels } => {
                let mut router = self.router.lock();
                let now = Instant::now();
                for name in &channels {
                    router.handle_leave(name, conn, now);
                }
                self.announce(&mut router, Some(deliver));
                Reply::Done
            }
            Request::PublishChannel { channel, payload } => {
                let payload = self.pusher_client_event(conn, &channel, payload);
                let publish = Publish {
                    items: vec![Item::to_channel(&channel, payload)],
                };
                self.publish_now(publish, deliver)
            }
            Request::PublishChannels { items } => {
                let items = items
                    .into_iter()
                    .map(|(channel, payload)| Item::to_channel(&channel, payload))
                    .collect();
                self.publish_now(Publish { items }, deliver)
            }
            Request::ChannelHistory {
                channel,
                since,
                epoch,
                limit,
            } => {
                let router = self.router.lock();
                let read =
                    router.channel_history(&channel, since.map(|s| (epoch, s)), limit as usize);
                self.read_committed(router);
                Reply::History(read)
            }
            Request::PublishBatch { items, .. } => {
                self.publish_now(Publish::to_followers(items), deliver)
            }
            Request::ChangeSubscriptions { edges, add } => self.change(&edges, add),
            Request::ReadHistory { user, since } => {
                let router = self.router.lock();
                let read = router.history_since(user, since);
                self.read_committed(router);
                Reply::History(read)
            }
            Request::Subscribers { subject } => Reply::Ids(self.router.lock().subscribers(subject)),
            Request::Subscriptions { subscriber } => {
                match self.store.lock().subscriptions(subscriber) {
                    Ok(list) => Reply::Ids(list),
                    Err(e) => Reply::Unavailable(e.to_string()),
                }
            }
            Request::Presence { of, list } => {
                let presence = self.presence(&of, list);
                Reply::Presence { of, presence }
            }
            // What the user follows is the store's (the index keeps followers
            // only); each followed subject is then one lookup in the users table.
            Request::Online { user } => match self.store.lock().subscriptions(user) {
                Ok(follows) => Reply::Online {
                    user,
                    online: self.router.lock().online_among(&follows),
                },
                Err(e) => Reply::Unavailable(e.to_string()),
            },
            Request::Occupied { prefix } => {
                Reply::Occupied(self.router.lock().occupied_channels(&prefix))
            }
            Request::Stats => Reply::Stats(self.stats_json()),
        }
    }

    /// A publish handed out before the answer, answered with its reach summed.
    fn publish_now(&self, publish: Publish, deliver: &mut dyn FnMut(u16, Mail)) -> Reply {
        self.publish(publish, Handout::Now(deliver))
            .expect("a publish handed out now is answered now")
            .reply()
    }

    /// Logs `conn` in as `user` and, with `since`, reads the history after it under
    /// the same lock: every later message then arrives as a delivery, none twice.
    fn login(
        &self,
        conn: ConnRef,
        user: u64,
        since: Option<u64>,
        epoch: Option<u32>,
    ) -> HistoryRead {
        let mut router = self.router.lock();
        router.handle_login(user, conn);
        let read = match since {
            Some(since) => router.history_read(user, epoch, since),
            None => HistoryRead {
                messages: Vec::new(),
                last: router.last_seq(user),
                gap: false,
                epoch: router.position(user).0,
            },
        };
        self.read_committed(router);
        read
    }

    /// Subscribes `conn` to `channels` (logging it in as `user` first with `login`:
    /// the user's `since` and `epoch`) and reads each from its position, all under
    /// one router lock; those past the user's limit are answered as refused.
    fn join(
        &self,
        conn: ConnRef,
        (user, info): (Option<u64>, Option<String>),
        login: Option<(Option<u64>, Option<u32>)>,
        channels: &[bus::ChannelJoin],
        deliver: &mut dyn FnMut(u16, Mail),
    ) -> Reply {
        let login = match (user, login) {
            (Some(user), Some((since, epoch))) => Some(self.login(conn, user, since, epoch)),
            _ => None,
        };
        let mut router = self.router.lock();
        // The user's info before their joins are announced: an arrival's push
        // carries it (`Router::push_presence`).
        if let (Some(user), Some(info)) = (user, info) {
            router.set_presence_info(user, info.into_boxed_str());
            self.infos.store(true, Ordering::SeqCst);
        }
        let (mut reads, mut refused) = (Vec::with_capacity(channels.len()), Vec::new());
        // Presence companions after the joins are announced: a connection's pushes
        // start after its own arrival (never before its `subscribed`).
        let (watch, join): (Vec<_>, Vec<_>) = channels
            .iter()
            .partition(|c| wire::channel::presence_of(&c.name).is_some());
        for (i, part) in [join, watch].into_iter().enumerate() {
            for c in part {
                let since = c.since.map(|s| (c.epoch, s));
                match router.handle_join(c.name.clone(), conn, user, since) {
                    Ok(read) => reads.push((c.name.to_string(), read)),
                    Err(why) => refused.push((c.name.to_string(), why)),
                }
            }
            if i == 0 {
                self.announce(&mut router, Some(&mut *deliver));
            }
        }
        // Durable before anyone holds a number it read (as a login's read).
        self.read_committed(router);
        Reply::Joined {
            login,
            channels: reads,
            refused,
        }
    }

    /// Releases `router` and, with durable history, waits until everything the
    /// read under it saw is written: no client holds a number a kill -9 loses.
    fn read_committed(&self, mut router: parking_lot::MutexGuard<'_, Router>) {
        if let Some(commit) = &self.history {
            let position = commit.push(router.take_journal());
            drop(router);
            // A failed write is the publishers' to report; a client resuming
            // after a restart is told of the hole as a gap.
            let _ = commit.wait_committed(position);
        }
    }

    /// Adds or removes edges: the store first (durable), then the index, with the
    /// store held throughout (lock order store → router).
    fn change(&self, edges: &[(u64, u64)], add: bool) -> Reply {
        let mut store = self.store.lock();
        let result = if add {
            store.add(edges)
        } else {
            store.remove(edges)
        };
        let changed = match result {
            Ok(n) => n as u64,
            Err(e) => return Reply::Unavailable(e.to_string()),
        };
        let mut router = self.router.lock();
        for &(subscriber, subject) in edges {
            if add {
                router.subscribe(subscriber, subject);
            } else {
                router.unsubscribe(subscriber, subject);
            }
        }
        Reply::Changed {
            edges: edges.len() as u64,
            changed,
        }
    }

    /// `{subject} ∪ subscribers(subject)`, the subject first, each user once.
    pub fn recipients(&self, subject: u64) -> Vec<u64> {
        self.router.lock().recipients(subject)
    }

    /// Heap bytes of the subscription index (its share of memory, for `/stats`).
    pub fn index_bytes(&self) -> usize {
        self.router.lock().index().memory_bytes()
    }

    /// Logs out every connection on the loops `loops` (a gateway process that went
    /// away: the router numbers each gateway's loops in a range); returns how many.
    pub fn logout_loops(&self, loops: std::ops::Range<u16>, now: Instant) -> u64 {
        let mut router = self.router.lock();
        let n = router.logout_where(|c| loops.contains(&c.loop_id), now);
        self.announce(&mut router, None);
        n
    }

    /// Logs `conn` in as `user` without reading history (a gateway re-announcing
    /// connections it already holds).
    pub fn login_quietly(&self, user: u64, conn: ConnRef) {
        self.router.lock().handle_login(user, conn);
    }

    pub fn stats(&self) -> RouterStats {
        self.router.lock().stats()
    }

    /// Once a second: expires the history of users gone for its ttl, and gives
    /// memory back after a mass disconnect (presence fell below half its peak) or
    /// after history expired (its bytes below half their peak, from at least
    /// [`TRIM_HISTORY_BYTES`], or the users holding a ring below half theirs, from
    /// at least 1,024).
    pub fn tick(&self, now: Instant) {
        let mut router = self.router.lock();
        router.handle_tick(now);
        self.infos
            .store(router.has_presence_infos(), Ordering::SeqCst);
        self.announce_tick(&mut router);
        // Forgotten rings: deleted from the store once the router lock is released.
        let position = self.history.as_ref().map(|c| c.push(router.take_journal()));
        let stats = router.stats();
        let connections = stats.connections;
        let peak = self
            .peak
            .fetch_max(connections, Ordering::Relaxed)
            .max(connections);
        let history = stats.history_bytes;
        let history_peak = self
            .history_peak
            .fetch_max(history, Ordering::Relaxed)
            .max(history);
        let rings = stats.users_with_history;
        let rings_peak = self
            .rings_peak
            .fetch_max(rings, Ordering::Relaxed)
            .max(rings);
        // Many small rings expiring free as much as a few large ones: either halving
        // gives memory back.
        let history_gone = (history_peak >= TRIM_HISTORY_BYTES && history < history_peak / 2)
            || (rings_peak >= 1024 && rings < rings_peak / 2);
        let emptied = peak >= 1024 && connections < peak / 2;
        if emptied || history_gone {
            router.compact();
            self.peak.store(connections, Ordering::Relaxed);
        }
        if history_gone {
            self.history_peak.store(history, Ordering::Relaxed);
            self.rings_peak.store(rings, Ordering::Relaxed);
        }
        drop(router);
        if emptied || history_gone {
            // The loops trim after accept bursts; what closed connections freed
            // (in every loop's arena: malloc_trim walks them all) is given back
            // here, and what expired rings freed (docs/decisions/connection-budget.md).
            // SAFETY: malloc_trim only returns free heap pages to the kernel.
            #[cfg(target_os = "linux")]
            unsafe {
                libc::malloc_trim(0);
            }
        }
        if let (Some(commit), Some(position)) = (&self.history, position) {
            // Expiry's deletions: a failed one leaves rows a restart drops as
            // expired or outside the contiguous tail; logged by the commit.
            let _ = commit.wait_committed(position);
        }
    }

    /// Runs [`Hub::tick`] once a second on a thread of its own until the hub is
    /// dropped.
    pub fn start_ticking(hub: &Arc<Hub>) -> std::io::Result<std::thread::JoinHandle<()>> {
        let weak = Arc::downgrade(hub);
        std::thread::Builder::new()
            .name("myriad-hub-tick".into())
            .spawn(move || loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
                match weak.upgrade() {
                    Some(hub) => hub.tick(Instant::now()),
                    None => return,
                }
            })
    }
}

#[cfg(test)]
mod tests;
