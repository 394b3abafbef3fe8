//! Round trips of every message kind (property tests) and refusal of garbage.

use super::*;
use bus::HistoryRead;
use proptest::prelude::*;

fn bytes() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from)
}

fn request() -> impl Strategy<Value = CallRequest> {
    prop_oneof![
        (any::<u64>(), any::<Option<u64>>(), any::<Option<u32>>())
            .prop_map(|(user, since, epoch)| Request::Login { user, since, epoch }),
        any::<u64>().prop_map(|user| Request::Logout { user }),
        (any::<u64>(), bytes())
            .prop_map(|(subject, payload)| Request::Publish { subject, payload }),
        (
            proptest::collection::vec((any::<u64>(), bytes()), 0..8),
            any::<bool>()
        )
            .prop_map(|(items, parallel)| Request::PublishBatch { items, parallel }),
        (
            proptest::collection::vec(any::<(u64, u64)>(), 0..8),
            any::<bool>()
        )
            .prop_map(|(edges, add)| Request::ChangeSubscriptions { edges, add }),
        any::<(u64, u64)>().prop_map(|(user, since)| Request::ReadHistory { user, since }),
        any::<u64>().prop_map(|subject| Request::Subscribers { subject }),
        any::<u64>().prop_map(|subscriber| Request::Subscriptions { subscriber }),
        (presence_of(), any::<bool>()).prop_map(|(of, list)| Request::Presence { of, list }),
        any::<u64>().prop_map(|user| Request::Online { user }),
        ".{0,12}".prop_map(|prefix| Request::Occupied { prefix }),
        Just(Request::Stats),
    ]
    .prop_map(CallRequest::Bus)
    .boxed()
    .prop_union(
        (
            proptest::collection::vec((any::<u32>(), any::<u64>(), bytes()), 0..8),
            proptest::collection::vec(any::<u16>(), 0..4),
        )
            .prop_map(|(items, senders)| CallRequest::PublishInOrder { items, senders })
            .boxed(),
    )
}

fn presence_of() -> impl Strategy<Value = bus::PresenceOf> {
    prop_oneof![
        ".{0,12}".prop_map(bus::PresenceOf::Channel),
        any::<u64>().prop_map(bus::PresenceOf::Subject),
    ]
}

fn message() -> impl Strategy<Value = Arc<Message>> {
    (any::<u64>(), bytes())
        .prop_map(|(subject, payload)| Arc::new(Message::to_subject(subject, payload)))
}

/// A JSON document as `/stats` carries them: numbers, text, nesting.
fn stats() -> impl Strategy<Value = serde_json::Value> {
    (any::<u64>(), any::<i32>(), ".{0,12}", any::<bool>()).prop_map(|(n, f, text, b)| {
        serde_json::json!({"n": n, "ratio": f64::from(f) / 8.0, "text": text, "on": b, "list": [n, null]})
    })
}

fn answer() -> impl Strategy<Value = Reply> {
    prop_oneof![
        (
            proptest::collection::vec((any::<u64>(), message()), 0..6),
            any::<u64>(),
            any::<bool>(),
            any::<Option<u32>>()
        )
            .prop_map(|(messages, last, gap, epoch)| Reply::History(HistoryRead {
                messages,
                last,
                gap,
                epoch
            })),
        Just(Reply::Done),
        any::<(u64, u64, u64)>().prop_map(|(messages, connections, users)| {
            Reply::Published {
                messages,
                connections,
                users,
            }
        }),
        any::<(u64, u64)>().prop_map(|(edges, changed)| Reply::Changed { edges, changed }),
        proptest::collection::vec(any::<u64>(), 0..8).prop_map(Reply::Ids),
        (
            presence_of(),
            proptest::collection::vec(any::<(u64, u32, Option<String>)>(), 0..8),
            any::<(u64, u64, bool)>()
        )
            .prop_map(|(of, users, (count, connections, cut))| Reply::Presence {
                of,
                presence: bus::Presence {
                    users: users
                        .into_iter()
                        .map(|(user, connections, info)| bus::Member {
                            user,
                            connections,
                            info,
                        })
                        .collect(),
                    count,
                    connections,
                    cut,
                },
            }),
        (any::<u64>(), proptest::collection::vec(any::<u64>(), 0..8))
            .prop_map(|(user, online)| Reply::Online { user, online }),
        stats().prop_map(Reply::Stats),
        proptest::collection::vec((".{0,12}", any::<(u32, u32)>()), 0..4).prop_map(|list| {
            let occupied = list
                .into_iter()
                .map(|(name, (users, connections))| bus::Occupied {
                    name,
                    users,
                    connections,
                })
                .collect();
            Reply::Occupied(occupied)
        }),
        ".{0,20}".prop_map(Reply::Unavailable),
        ".{0,20}".prop_map(Reply::TimedOut),
        (any::<(u64, u64, u64)>(), ".{0,20}").prop_map(
            |((messages, connections, users), error)| {
                Reply::NotStored {
                    messages,
                    connections,
                    users,
                    error,
                }
            }
        ),
    ]
}

fn to_router() -> impl Strategy<Value = ToRouter> {
    prop_oneof![
        (
            any::<u64>(),
            proptest::collection::vec(
                (any::<u16>(), any::<u32>(), any::<Option<u64>>(), request()).prop_map(
                    |(loop_id, token, part, request)| WireCall {
                        loop_id,
                        token,
                        part,
                        request,
                    }
                ),
                0..6
            )
        )
            .prop_map(|(gateway, calls)| ToRouter::Bundle { gateway, calls }),
        any::<(u64, u64, Option<u32>)>().prop_map(|(gateway, connections, place)| {
            ToRouter::Heartbeat {
                place,
                gateway,
                connections,
            }
        }),
        (
            any::<u64>(),
            any::<bool>(),
            proptest::collection::vec(any::<(u16, u32, u64)>(), 0..8)
        )
            .prop_map(|(gateway, replace, conns)| ToRouter::Presence {
                gateway,
                replace,
                conns
            }),
        any::<(u64, u64, u64)>().prop_map(|(gateway, lane, from)| ToRouter::Replay {
            gateway,
            lane,
            from
        }),
    ]
}

fn target() -> impl Strategy<Value = Target> {
    any::<(u32, u32, u64)>().prop_map(|(token, epoch, seq)| Target { token, epoch, seq })
}

fn delivery() -> impl Strategy<Value = GatewayMail> {
    (
        message(),
        any::<u64>(),
        proptest::collection::vec(
            (any::<u16>(), proptest::collection::vec(target(), 0..8)),
            0..4,
        ),
    )
        .prop_map(|(msg, published_ns, loops)| GatewayMail {
            msg,
            published_ns,
            loops,
        })
}

fn item() -> impl Strategy<Value = GatewayItem> {
    prop_oneof![
        (any::<u16>(), any::<u32>(), any::<Option<u64>>(), answer()).prop_map(
            |(loop_id, token, part, reply)| {
                GatewayItem::Reply(WireReply {
                    loop_id,
                    token,
                    part,
                    reply,
                })
            }
        ),
        delivery().prop_map(GatewayItem::Deliver),
    ]
}

fn to_gateway() -> impl Strategy<Value = ToGateway> {
    prop_oneof![
        (
            any::<(u16, u64, u64)>(),
            proptest::collection::vec(item(), 0..6)
        )
            .prop_map(|((shard, lane, n), items)| ToGateway::Bundle {
                shard,
                lane,
                n,
                items
            }),
        (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(lane, from, to)| ToGateway::Missed {
            lane,
            from,
            to
        }),
        any::<(u64, u64)>().prop_map(|(lane, from)| ToGateway::Rest { lane, from }),
        any::<u64>().prop_map(|router| ToGateway::Resync { router }),
        ".{0,20}".prop_map(ToGateway::RouterStats),
        (any::<u64>(), any::<u32>(), any::<bool>(), bytes()).prop_map(
            |(id, index, last, bytes)| {
                ToGateway::Fragment(Fragment {
                    id,
                    index,
                    last,
                    bytes,
                })
            }
        ),
    ]
}

proptest! {
    #[test]
    fn to_router_round_trips(msg in to_router()) {
        let bytes = encode_to_router(&msg);
        prop_assert_eq!(bytes[0], VERSION);
        prop_assert_eq!(decode_to_router(&bytes).unwrap(), msg);
    }

    #[test]
    fn to_gateway_round_trips(msg in to_gateway()) {
        let bytes = encode_to_gateway(&msg);
        prop_assert_eq!(decode_to_gateway(&bytes).unwrap(), msg);
    }

    /// Any bytes: an error or a value, never a panic.
    #[test]
    fn garbage_is_refused_without_panic(raw in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_to_router(&raw);
        let _ = decode_to_gateway(&raw);
    }

    /// A message cut short is an error, not a shorter message.
    #[test]
    fn truncated_messages_are_errors(msg in to_gateway(), cut in 1usize..64) {
        let bytes = encode_to_gateway(&msg);
        let cut = cut.min(bytes.len() - 1);
        prop_assert!(decode_to_gateway(&bytes[..bytes.len() - cut]).is_err());
    }
}

#[test]
fn wrong_version_trailing_bytes_and_empty_input_are_refused() {
    let mut bytes = encode_to_router(&ToRouter::Heartbeat {
        gateway: 7,
        connections: 3,
        place: None,
    })
    .to_vec();
    assert!(matches!(decode_to_router(&[]), Err(DecodeError::Empty)));
    bytes.push(0);
    assert!(matches!(
        decode_to_router(&bytes),
        Err(DecodeError::Trailing(1))
    ));
    bytes.pop();
    bytes[0] = VERSION + 1;
    assert!(matches!(
        decode_to_router(&bytes),
        Err(DecodeError::Version(v)) if v == VERSION + 1
    ));
}

/// What one delivery costs on the wire: a 60-byte message to 100 recipients on two
/// loops is the payload once plus a few bytes per recipient (and ≤ 16 B of the
/// batch's numbering).
#[test]
fn a_delivery_is_the_payload_once_plus_a_few_bytes_per_recipient() {
    let targets: Vec<Target> = (0..50)
        .map(|i| Target {
            token: 1000 + i,
            epoch: 1,
            seq: 5 + u64::from(i),
        })
        .collect();
    let msg = ToGateway::Bundle {
        shard: 1,
        lane: u64::MAX,
        n: u64::from(u32::MAX),
        items: vec![GatewayItem::Deliver(GatewayMail {
            msg: Arc::new(Message::to_subject(42, Bytes::from(vec![b'x'; 60]))),
            published_ns: 1_700_000_000_000_000_000,
            loops: vec![(0, targets.clone()), (1, targets)],
        })],
    };
    let len = encode_to_gateway(&msg).len();
    assert!(len < 60 + 100 * 4 + 32 + 16, "{len} bytes");
}

/// What shards hand each other round-trips, and a forwarded user costs a few bytes.
#[test]
fn a_forward_its_counts_and_an_ordered_part_round_trip() {
    let forward = ToShard::Forward {
        from: 1,
        items: vec![ForwardItem {
            call: 9,
            subject: 7,
            payload: Bytes::from_static(b"hello"),
            published_ns: 1_700_000_000_000_000_000,
            users: (0..1000).map(|u| u * 2).collect(),
        }],
    };
    let bytes = encode_to_shard(&forward);
    assert_eq!(decode_to_shard(&bytes).unwrap(), forward);
    assert!(bytes.len() < 1000 * 3 + 64, "{} bytes", bytes.len());
    let counted = ToShard::Counted {
        from: 0,
        counts: vec![ShardCount {
            call: 9,
            connections: 3,
            users: 2,
            error: Some("disk full".into()),
        }],
    };
    assert_eq!(
        decode_to_shard(&encode_to_shard(&counted)).unwrap(),
        counted
    );
    let in_order = ToShard::InOrder {
        from: 1,
        gateway: 0xfeed,
        number: 12,
        items: vec![InOrderItem {
            at: 3,
            subject: 7,
            payload: Bytes::from_static(b"hello"),
            users: (0..1000).map(|u| u * 2).collect(),
        }],
    };
    let bytes = encode_to_shard(&in_order);
    assert_eq!(decode_to_shard(&bytes).unwrap(), in_order);
    assert!(bytes.len() < 1000 * 3 + 64, "{} bytes", bytes.len());
}
