//! The hub against the memory store: exact replies, batches per loop, lock order
//! visible as behaviour (a failed store write leaves the index unchanged).

use super::*;
use bytes::Bytes;
use router::SubscriptionIndex;

fn hub() -> Hub {
    Hub::new(
        Router::new(RouterConfig::default(), SubscriptionIndex::new()),
        store::open("memory").unwrap(),
    )
}

fn conn(loop_id: u16, token: u32) -> ConnRef {
    ConnRef { loop_id, token }
}

/// Mail as (loop, targets).
type Batches = Vec<(u16, Vec<(u32, u64)>)>;

/// Sends `request` and collects the delivery batches.
fn call(hub: &Hub, from: ConnRef, request: Request) -> (Reply, Batches) {
    let mut batches = Vec::new();
    let reply = hub.handle(from, request, &mut |loop_id, d| {
        batches.push((
            loop_id,
            d.targets.iter().map(|t| (t.token, t.seq)).collect(),
        ))
    });
    (reply, batches)
}

fn publish(subject: u64, text: &'static str) -> Request {
    Request::Publish {
        subject,
        payload: Bytes::from_static(text.as_bytes()),
    }
}

#[test]
fn a_publish_reaches_followers_on_every_loop_in_one_batch_each() {
    let hub = hub();
    let edges = vec![(2, 1), (3, 1)];
    let (reply, _) = call(
        &hub,
        conn(0, 0),
        Request::ChangeSubscriptions { edges, add: true },
    );
    assert!(matches!(
        reply,
        Reply::Changed {
            edges: 2,
            changed: 2
        }
    ));
    for (user, c) in [(1, conn(0, 10)), (2, conn(1, 20)), (3, conn(1, 30))] {
        let (reply, _) = call(
            &hub,
            c,
            Request::Login {
                user,
                since: None,
                epoch: None,
            },
        );
        assert!(matches!(reply, Reply::History(h) if h.last == 0 && h.messages.is_empty()));
    }
    let (reply, batches) = call(&hub, conn(0, 10), publish(1, "hi"));
    assert!(matches!(
        reply,
        Reply::Published {
            messages: 1,
            connections: 3,
            users: 3
        }
    ));
    assert_eq!(
        batches,
        vec![(0, vec![(10, 1)]), (1, vec![(20, 1), (30, 1)])]
    );
}

#[test]
fn login_with_since_reads_history_and_a_batch_sums_its_reach() {
    let hub = hub();
    let items = vec![(7, Bytes::from_static(b"a")), (7, Bytes::from_static(b"b"))];
    let c = conn(0, 1);
    call(
        &hub,
        c,
        Request::Login {
            user: 7,
            since: None,
            epoch: None,
        },
    );
    let (reply, batches) = call(
        &hub,
        conn(0, 2),
        Request::PublishBatch {
            items,
            parallel: false,
        },
    );
    assert!(matches!(
        reply,
        Reply::Published {
            messages: 2,
            connections: 2,
            users: 2
        }
    ));
    assert_eq!(batches.len(), 2, "one batch per publish and loop");
    call(&hub, c, Request::Logout { user: 7 });
    let (reply, _) = call(
        &hub,
        conn(1, 9),
        Request::Login {
            user: 7,
            since: Some(1),
            epoch: None,
        },
    );
    let Reply::History(h) = reply else {
        panic!("login answers with history")
    };
    assert_eq!((h.last, h.gap, h.messages.len()), (2, false, 1));
    assert_eq!(&h.messages[0].1.payload[..], b"b");
}

#[test]
fn lists_and_removals_are_exact() {
    let hub = hub();
    let add = Request::ChangeSubscriptions {
        edges: vec![(5, 9), (6, 9), (5, 9)],
        add: true,
    };
    assert!(matches!(
        call(&hub, conn(0, 0), add).0,
        Reply::Changed {
            edges: 3,
            changed: 2
        }
    ));
    let (reply, _) = call(&hub, conn(0, 0), Request::Subscribers { subject: 9 });
    assert!(matches!(reply, Reply::Ids(ids) if ids == [5, 6]));
    let (reply, _) = call(&hub, conn(0, 0), Request::Subscriptions { subscriber: 5 });
    assert!(matches!(reply, Reply::Ids(ids) if ids == [9]));
    let remove = Request::ChangeSubscriptions {
        edges: vec![(5, 9), (5, 8)],
        add: false,
    };
    assert!(matches!(
        call(&hub, conn(0, 0), remove).0,
        Reply::Changed {
            edges: 2,
            changed: 1
        }
    ));
    let (reply, _) = call(&hub, conn(0, 0), Request::Stats);
    assert!(matches!(reply, Reply::Stats(s) if s["subscription_edges"] == 1));
}

#[test]
fn a_join_past_the_users_limit_answers_the_channels_beyond_it_as_refused() {
    let config = RouterConfig {
        max_subscriptions_per_user: 2,
        ..RouterConfig::default()
    };
    let hub = Hub::new(
        Router::new(config, SubscriptionIndex::new()),
        store::open("memory").unwrap(),
    );
    let join = |user, names: &[&str]| Request::Join {
        user,
        login: false,
        since: None,
        epoch: None,
        channels: names
            .iter()
            .map(|n| bus::ChannelJoin {
                name: (*n).into(),
                since: None,
                epoch: None,
            })
            .collect(),
        info: None,
    };
    let (reply, _) = call(&hub, conn(0, 1), join(Some(5), &["a", "b", "c"]));
    let Reply::Joined {
        channels, refused, ..
    } = reply
    else {
        panic!("{reply:?}")
    };
    let joined: Vec<&str> = channels.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(joined, ["a", "b"]);
    assert_eq!(refused, [("c".to_string(), router::Refusal::UserLimit)]);
    // The user's other connection is refused too; a connection without a user is not.
    let (reply, _) = call(&hub, conn(0, 2), join(Some(5), &["c"]));
    assert!(matches!(reply, Reply::Joined { refused, .. } if refused.len() == 1));
    let (reply, _) = call(&hub, conn(0, 3), join(None, &["c", "d", "e"]));
    assert!(matches!(reply, Reply::Joined { refused, channels, .. }
        if refused.is_empty() && channels.len() == 3));
}

/// A hub keeping history durably in a fresh SQLite file of its own (`name`), with
/// `history` messages per user; the file's path for [`remove_db`].
fn durable_args(name: &str, history: usize) -> (std::path::PathBuf, HubArgs) {
    let path = std::env::temp_dir().join(format!("myriad-hub-{name}-{}.db", std::process::id()));
    let args = HubArgs {
        store: format!("sqlite:{}", path.display()),
        store_sync: Default::default(),
        history,
        history_ttl: 60.0,
        history_store: args::HistoryStore::Store,
        history_replicas: 1,
        max_subscriptions_per_user: router::DEFAULT_MAX_SUBSCRIPTIONS_PER_USER,
        presence_grace: 5.0,
        presence_off_prefix: Vec::new(),
        webhook: None,
        webhook_secret: None,
        webhook_pusher_key: None,
        pusher_webhooks: Vec::new(),
        max_presence_members: router::DEFAULT_MAX_PRESENCE_MEMBERS,
        friends_max_fanout: router::DEFAULT_FRIENDS_MAX_FANOUT,
    };
    (path, args)
}

/// `serve`'s hub flags with a memory store, in-memory history and no webhook.
pub(crate) fn memory_args() -> HubArgs {
    let (_, mut args) = durable_args("unused", 8);
    args.store = "memory".into();
    args.history_store = args::HistoryStore::Memory;
    args
}

/// Removes a SQLite file and its WAL companions.
fn remove_db(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

mod durable;
mod shards;

#[test]
fn online_answers_the_followed_subjects_with_a_connection() {
    let hub = hub();
    let follows = Request::ChangeSubscriptions {
        edges: vec![(7, 3), (7, 5), (7, 9), (8, 4)],
        add: true,
    };
    call(&hub, conn(0, 0), follows);
    for (user, token) in [(3, 1), (9, 2), (4, 3)] {
        let login = Request::Login {
            user,
            since: None,
            epoch: None,
        };
        call(&hub, conn(0, token), login);
    }
    let (reply, _) = call(&hub, conn(0, 9), Request::Online { user: 7 });
    assert_eq!(
        reply,
        Reply::Online {
            user: 7,
            online: vec![3, 9]
        }
    );
    let of = router::PresenceOf::Subject(9);
    let (reply, _) = call(&hub, conn(0, 9), Request::Presence { of, list: false });
    assert!(
        matches!(&reply, Reply::Presence { presence, .. } if presence.count == 1 && presence.connections == 1),
        "{reply:?}"
    );
}

#[test]
fn a_joins_info_is_shown_beside_its_user_until_they_hold_no_channel() {
    let hub = hub();
    let join = |user, info: Option<&str>| Request::Join {
        user: Some(user),
        login: false,
        since: None,
        epoch: None,
        channels: vec![bus::ChannelJoin {
            name: "room".into(),
            since: None,
            epoch: None,
        }],
        info: info.map(String::from),
    };
    call(&hub, conn(0, 1), join(5, Some(r#"{"name":"Ada"}"#)));
    call(&hub, conn(0, 2), join(6, None));
    let of = router::PresenceOf::Channel("room".into());
    let list = || match call(
        &hub,
        conn(0, 9),
        Request::Presence {
            of: of.clone(),
            list: true,
        },
    )
    .0
    {
        Reply::Presence { presence, .. } => presence.users,
        reply => panic!("{reply:?}"),
    };
    let ada = router::Member {
        user: 5,
        connections: 1,
        info: Some(r#"{"name":"Ada"}"#.into()),
    };
    assert_eq!(list(), [ada, router::Member::new(6, 1)]);
    let leave = Request::Leave {
        channels: vec!["room".into()],
    };
    call(&hub, conn(0, 1), leave);
    hub.router.lock().handle_tick(Instant::now());
    call(&hub, conn(0, 1), join(5, None));
    assert_eq!(
        list(),
        [router::Member::new(5, 1), router::Member::new(6, 1)]
    );
}
