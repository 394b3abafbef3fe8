//! Router shards (`--router-shards`): a shard's index holds only its own subjects'
//! edges, and a publish reaches exactly the users a shard is given.

use super::*;

/// 1,000 subjects with 30 followers each (the friends graph's mean), in SQLite.
fn stored_graph(name: &str) -> (std::path::PathBuf, HubArgs) {
    let (path, mut args) = durable_args(name, 8);
    args.history_store = args::HistoryStore::Memory;
    let hub = Hub::open_args(&args).unwrap();
    let edges: Vec<(u64, u64)> = (0..1000u64)
        .flat_map(|subject| (1..=30).map(move |f| (10_000 + subject * 100 + f, subject)))
        .collect();
    let add = Request::ChangeSubscriptions { edges, add: true };
    assert!(matches!(
        call(&hub, conn(0, 1), add).0,
        Reply::Changed { .. }
    ));
    (path, args)
}

#[test]
fn a_shards_index_holds_only_its_own_subjects_edges() {
    let (path, args) = stored_graph("shard-index");
    let open = |owns: &dyn Fn(u64) -> bool| Hub::open_with_history(&args, None, owns).unwrap();
    let whole = open(&|_| true);
    let even = open(&|s| s % 2 == 0);
    let odd = open(&|s| s % 2 == 1);
    assert_eq!(whole.stats().subscriptions, 30_000);
    assert_eq!(even.stats().subscriptions, 15_000);
    assert_eq!(odd.stats().subscriptions, 15_000);
    // The memory is divided too (the arrays are trimmed to what was kept).
    let (w, e, o) = (whole.index_bytes(), even.index_bytes(), odd.index_bytes());
    assert!(e * 10 < w * 6 && o * 10 < w * 6, "{e} and {o} of {w}");
    // A subject's followers are known to its shard only.
    let followers: Vec<u64> = (1..=30).map(|f| 10_400 + f).collect();
    let mut want = vec![4];
    want.extend(&followers);
    assert_eq!(even.recipients(4), want);
    assert_eq!(odd.recipients(4), vec![4]);
    drop((whole, even, odd));
    remove_db(&path);
}

/// What a shard does with followers forwarded to it: it numbers and delivers to
/// exactly those users, and does not count the message as one in.
#[test]
fn a_publish_to_listed_users_reaches_them_only() {
    let hub = hub();
    for user in [1u64, 2, 3] {
        let login = Request::Login {
            user,
            since: None,
            epoch: None,
        };
        call(&hub, conn(0, user as u32), login);
    }
    let add = Request::ChangeSubscriptions {
        edges: vec![(2, 1), (3, 1)],
        add: true,
    };
    call(&hub, conn(0, 9), add);
    let mut got = Vec::new();
    let reach = Reach::Users {
        users: vec![3],
        counted: false,
    };
    let item = Item {
        subject: 1,
        channel: None,
        payload: Bytes::from_static(b"m"),
        reach,
    };
    let published = hub.publish(
        Publish { items: vec![item] },
        Handout::Now(&mut |_, d| got.extend(d.targets.iter().map(|t| (t.token, t.seq)))),
    );
    let published = published.expect("handed out now");
    assert!(published.stored.is_ok());
    let counts = published.counts[0];
    assert_eq!((counts.users, counts.connections), (1, 1));
    assert_eq!(got, [(3, 1)]);
    assert_eq!(hub.stats().messages_in, 0);
    // The whole fan-out after it: user 3's numbering goes on.
    let (reply, batches) = call(&hub, conn(0, 1), publish(1, "n"));
    assert!(
        matches!(reply, Reply::Published { users: 3, .. }),
        "{reply:?}"
    );
    let mut seqs: Vec<(u32, u64)> = batches.into_iter().flat_map(|b| b.1).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, [(1, 1), (2, 1), (3, 2)]);
    assert_eq!(hub.stats().messages_in, 1);
}
