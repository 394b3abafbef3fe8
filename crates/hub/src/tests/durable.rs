//! Durable history in the store: read back with its epoch and numbers (only for the
//! users a shard owns), a local publish answered after its commit, a batch stored and
//! delivered in order, and a failed write told to the publisher while the message is
//! still delivered.

use super::*;

#[test]
fn durable_history_is_read_back_with_its_epoch_and_numbers() {
    let (path, args) = durable_args("durable", 3);
    let (epoch, last) = {
        let hub = Hub::open_args(&args).unwrap();
        let login = Request::Login {
            user: 5,
            since: None,
            epoch: None,
        };
        call(&hub, conn(0, 1), login);
        for text in ["a", "b", "c", "d"] {
            call(&hub, conn(0, 1), publish(5, text));
        }
        let position = hub.router.lock().position(5);
        position
    };
    assert_eq!(last, 4);
    // A new process on the same file: the ring is back, same epoch, same numbers.
    let hub = Hub::open_args(&args).unwrap();
    let read = hub.router.lock().history_read(5, epoch, 1);
    assert_eq!(read.epoch, epoch);
    assert!(
        !read.gap,
        "the newest 3 of 4 are kept: nothing after 1 is lost"
    );
    let got: Vec<(u64, &[u8])> = read
        .messages
        .iter()
        .map(|(seq, m)| (*seq, &m.payload[..]))
        .collect();
    assert_eq!(got, vec![(2, &b"b"[..]), (3, b"c"), (4, b"d")]);
    drop(hub);
    remove_db(&path);
}

/// With durable history, a publish through [`LocalBus`] does not make the calling
/// loop wait: the call returns no reply, and the answer arrives in the loop's
/// mailbox after the deliveries — by then the message is in the store (read back
/// through a connection of its own), and a batch is answered once for all items.
#[test]
fn a_local_durable_publish_is_answered_through_the_mailbox_after_its_commit() {
    let (path, args) = durable_args("later", 8);
    let hub = Arc::new(Hub::open_args(&args).unwrap());
    let mailboxes: Vec<Arc<bus::Mailbox>> =
        (0..2).map(|_| Arc::new(bus::Mailbox::new(|| {}))).collect();
    let local = LocalBus::new(hub.clone(), mailboxes.clone());
    use bus::Bus;
    let login = Request::Login {
        user: 4,
        since: None,
        epoch: None,
    };
    assert!(
        local.call(conn(1, 40), login).is_some(),
        "logins answer at once"
    );
    assert!(local.call(conn(0, 7), publish(4, "one")).is_none());
    let items = vec![
        (4, Bytes::from_static(b"two")),
        (4, Bytes::from_static(b"three")),
    ];
    assert!(local
        .call(
            conn(0, 8),
            Request::PublishBatch {
                items,
                parallel: false,
            }
        )
        .is_none());
    // Loop 0 (the publisher's) gets both answers, loop 1 the three deliveries.
    let (mut answers, mut delivered) = (Vec::new(), Vec::new());
    let until = Instant::now() + std::time::Duration::from_secs(10);
    while answers.len() < 2 && Instant::now() < until {
        let mut got = Vec::new();
        mailboxes[0].drain(&mut got);
        for item in got {
            let bus::Inbound::Reply { token, reply } = item else {
                panic!("no delivery for loop 0")
            };
            // Answered only once its messages are on disk and handed out.
            let mut stored = Vec::new();
            store::history::open_history(&args.store, &args.store_options())
                .unwrap()
                .for_each(&mut |row| stored.push(row.payload))
                .unwrap();
            let mut got1 = Vec::new();
            mailboxes[1].drain(&mut got1);
            for d in got1 {
                let bus::Inbound::Deliver(d) = d else {
                    panic!("a reply on loop 1")
                };
                delivered.push((d.targets[0].seq, d.msg.payload.clone()));
            }
            answers.push((token, reply, stored.len(), delivered.len()));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(answers.len(), 2, "both publishes answered");
    assert!(
        matches!(answers[0], (7, Reply::Published { messages: 1, connections: 1, users: 1 }, stored, seen) if stored >= 1 && seen >= 1)
    );
    assert!(matches!(
        answers[1],
        (
            8,
            Reply::Published {
                messages: 2,
                connections: 2,
                users: 2
            },
            3,
            3
        )
    ));
    let seqs: Vec<u64> = delivered.iter().map(|d| d.0).collect();
    assert_eq!(seqs, vec![1, 2, 3], "in sequence order");
    assert_eq!(&delivered[2].1[..], b"three");
    drop(local);
    drop(hub);
    remove_db(&path);
}

/// Router shards share one durable log: each reads back only the users it owns
/// (a shard holding another's ring would delete that shard's rows at its ttl).
#[test]
fn durable_history_is_read_back_only_for_the_users_owned() {
    let (path, args) = durable_args("owned", 8);
    {
        let hub = Hub::open_args(&args).unwrap();
        for user in [6, 7] {
            let login = Request::Login {
                user,
                since: None,
                epoch: None,
            };
            call(&hub, conn(0, user as u32), login);
            call(&hub, conn(0, user as u32), publish(user, "m"));
        }
    }
    let open = |owns: &dyn Fn(u64) -> bool| {
        let log = store::history::open_history(&args.store, &args.store_options()).unwrap();
        Hub::open_with_history(&args, Some(log), owns).unwrap()
    };
    let even = open(&|u| u % 2 == 0);
    assert_eq!(even.router.lock().last_seq(6), 1);
    assert_eq!(
        even.router.lock().last_seq(7),
        0,
        "user 7 is another shard's"
    );
    drop(even);
    let all = open(&|_| true);
    assert_eq!(
        all.router.lock().last_seq(7),
        1,
        "and its rows are still stored"
    );
    drop(all);
    remove_db(&path);
}

/// A batch through `Hub::handle` with durable history (the router role's path):
/// every item stored before the call returns, deliveries in sequence order, the
/// counts summed.
#[test]
fn a_durable_batch_is_stored_and_delivered_in_order_by_one_call() {
    let (path, args) = durable_args("batch", 8);
    let hub = Hub::open_args(&args).unwrap();
    let login = Request::Login {
        user: 9,
        since: None,
        epoch: None,
    };
    call(&hub, conn(1, 90), login);
    let items = ["a", "b", "c"]
        .iter()
        .map(|t| (9, Bytes::from_static(t.as_bytes())))
        .collect();
    let (reply, batches) = call(
        &hub,
        conn(0, 1),
        Request::PublishBatch {
            items,
            parallel: false,
        },
    );
    assert!(matches!(
        reply,
        Reply::Published {
            messages: 3,
            connections: 3,
            users: 3
        }
    ));
    let seqs: Vec<u64> = batches.iter().map(|b| b.1[0].1).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
    let mut stored = Vec::new();
    store::history::open_history(&args.store, &args.store_options())
        .unwrap()
        .for_each(&mut |row| stored.push((row.seq, row.payload)))
        .unwrap();
    assert_eq!(
        stored,
        vec![(1, b"a".to_vec()), (2, b"b".to_vec()), (3, b"c".to_vec())]
    );
    drop(hub);
    remove_db(&path);
}

/// Makes every history write to the SQLite file at `path` fail (`refuse`) or
/// succeed again, from a connection of the test's own: a real SQLite error.
fn refuse_history_writes(path: &std::path::Path, refuse: bool) {
    let db = rusqlite::Connection::open(path).unwrap();
    let sql = match refuse {
        true => {
            "CREATE TRIGGER refuse BEFORE INSERT ON history \
                 BEGIN SELECT RAISE(ABORT, 'the test refuses history rows'); END;"
        }
        false => "DROP TRIGGER refuse;",
    };
    db.execute_batch(sql).unwrap();
}

#[test]
fn a_failed_durable_write_is_told_to_the_publisher_and_the_message_still_delivered() {
    let (path, args) = durable_args("refused", 8);
    let hub = Hub::open_args(&args).unwrap();
    let login = Request::Login {
        user: 6,
        since: None,
        epoch: None,
    };
    call(&hub, conn(1, 60), login);
    let (reply, _) = call(&hub, conn(0, 1), publish(6, "kept"));
    assert!(
        matches!(reply, Reply::Published { messages: 1, .. }),
        "{reply:?}"
    );

    refuse_history_writes(&path, true);
    let (reply, batches) = call(&hub, conn(0, 2), publish(6, "lost"));
    let Reply::NotStored {
        messages: 1,
        connections: 1,
        users: 1,
        error,
    } = &reply
    else {
        panic!("a refused write answered {reply:?}")
    };
    assert!(error.contains("the test refuses history rows"), "{error}");
    assert_eq!(batches, vec![(1, vec![(60, 2)])], "still delivered live");
    let items = vec![(6, Bytes::from_static(b"x")), (6, Bytes::from_static(b"y"))];
    let (reply, batches) = call(
        &hub,
        conn(0, 3),
        Request::PublishBatch {
            items,
            parallel: false,
        },
    );
    assert!(
        matches!(
            reply,
            Reply::NotStored {
                messages: 2,
                connections: 2,
                ..
            }
        ),
        "{reply:?}"
    );
    assert_eq!(batches.len(), 2);
    // Nobody's history was written: a publish to a user nobody follows stores
    // nothing and is answered as usual.
    let (reply, _) = call(&hub, conn(0, 4), publish(999, "nobody"));
    assert!(
        matches!(reply, Reply::Published { connections: 0, .. }),
        "{reply:?}"
    );

    refuse_history_writes(&path, false);
    let (reply, _) = call(&hub, conn(0, 5), publish(6, "kept again"));
    assert!(
        matches!(reply, Reply::Published { messages: 1, .. }),
        "{reply:?}"
    );
    let mut stored = Vec::new();
    store::history::open_history(&args.store, &args.store_options())
        .unwrap()
        .for_each(&mut |row| stored.push((row.seq, row.payload)))
        .unwrap();
    assert_eq!(
        stored,
        vec![(1, b"kept".to_vec()), (5, b"kept again".to_vec())],
        "only what was answered as stored is on disk"
    );
    drop(hub);
    remove_db(&path);
}

#[test]
fn a_failed_durable_write_reaches_the_mailbox_answer_of_a_later_publish() {
    let (path, args) = durable_args("refused-later", 8);
    let hub = Arc::new(Hub::open_args(&args).unwrap());
    let mailboxes: Vec<Arc<bus::Mailbox>> =
        (0..2).map(|_| Arc::new(bus::Mailbox::new(|| {}))).collect();
    let local = LocalBus::new(hub.clone(), mailboxes.clone());
    use bus::Bus;
    let login = Request::Login {
        user: 3,
        since: None,
        epoch: None,
    };
    assert!(local.call(conn(1, 30), login).is_some());
    refuse_history_writes(&path, true);
    assert!(local.call(conn(0, 9), publish(3, "lost")).is_none());
    let until = Instant::now() + std::time::Duration::from_secs(10);
    let mut answer = None;
    while answer.is_none() && Instant::now() < until {
        let mut got = Vec::new();
        mailboxes[0].drain(&mut got);
        answer = got.into_iter().find_map(|item| match item {
            bus::Inbound::Reply { token: 9, reply } => Some(reply),
            _ => None,
        });
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let answer = answer.expect("the publish is answered");
    assert!(
        matches!(&answer, Reply::NotStored { messages: 1, connections: 1, error, .. } if error.contains("refuses")),
        "{answer:?}"
    );
    let mut delivered = Vec::new();
    mailboxes[1].drain(&mut delivered);
    assert!(
        matches!(delivered.as_slice(), [bus::Inbound::Deliver(d)] if d.msg.payload == "lost"),
        "still delivered live"
    );
    drop(local);
    drop(hub);
    remove_db(&path);
}
