//! Deterministic fuzzing of the cluster codec on stable Rust (see `codec_script`):
//! the seed corpus of the coverage-guided target replayed, then well-formed scripts
//! of every message kind mutated, and random bytes, bounded by count so a run is
//! reproducible. `CODEC_FUZZ_SEED=<n>` picks another seed, `CODEC_FUZZ_SCALE=<k>`
//! multiplies the iterations. Coverage-guided: `scripts/fuzz.sh cluster_codec`.

mod codec_script;

use bytes::Bytes;
use cluster::codec::*;
use cluster::fragment;
use codec_script::{GATEWAY, ROUTER, SHARD, WHOLE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::sync::Arc;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// One message of a script: `[kind, len, bytes…]`.
fn framed(kind: u8, msg: &[u8]) -> Vec<u8> {
    assert!(
        msg.len() < 255,
        "a script message is shorter than 255 bytes"
    );
    let mut out = vec![kind, msg.len() as u8];
    out.extend_from_slice(msg);
    out
}

fn call(token: u32, part: Option<u64>, request: Request) -> WireCall {
    WireCall {
        loop_id: 1,
        token,
        part,
        request: CallRequest::Bus(request),
    }
}

/// Well-formed messages of every kind a router, a gateway and a shard receive, and
/// a large one of each of the last two in parts: each its own script.
fn well_formed() -> Vec<Vec<u8>> {
    let b = |s: &'static str| Bytes::from_static(s.as_bytes());
    let to_router = [
        ToRouter::Bundle {
            gateway: 7,
            calls: vec![
                call(
                    1,
                    None,
                    Request::Login {
                        user: 42,
                        since: Some(3),
                        epoch: Some(9),
                    },
                ),
                call(
                    2,
                    None,
                    Request::Publish {
                        subject: 42,
                        payload: b("hello"),
                    },
                ),
                WireCall {
                    loop_id: 1,
                    token: 3,
                    part: Some(1 << 16 | 1),
                    request: CallRequest::PublishInOrder {
                        items: vec![(0, 1, b("a")), (2, 3, b("c"))],
                        senders: vec![0, 1],
                    },
                },
                call(
                    5,
                    Some(2 << 16 | 1),
                    Request::Join {
                        user: Some(42),
                        login: true,
                        since: Some(1),
                        epoch: Some(9),
                        channels: vec![bus::ChannelJoin {
                            name: "room:1".into(),
                            since: Some(4),
                            epoch: None,
                        }],
                        info: Some(r#"{"name":"Ada"}"#.into()),
                    },
                ),
                call(
                    7,
                    None,
                    Request::Presence {
                        of: bus::PresenceOf::Channel("room:1".into()),
                        list: true,
                    },
                ),
                call(8, None, Request::Online { user: 7 }),
                call(
                    9,
                    None,
                    Request::Occupied {
                        prefix: "presence-".into(),
                    },
                ),
                call(
                    6,
                    None,
                    Request::PublishChannel {
                        channel: "news".into(),
                        payload: b("n"),
                    },
                ),
                call(
                    4,
                    None,
                    Request::PublishBatch {
                        items: vec![(5, b("x")), (6, b("y"))],
                        parallel: true,
                    },
                ),
                call(
                    5,
                    None,
                    Request::ChangeSubscriptions {
                        edges: vec![(1, 2)],
                        add: false,
                    },
                ),
            ],
        },
        ToRouter::Heartbeat {
            gateway: 7,
            connections: 19_000,
            place: Some(3),
        },
        ToRouter::Presence {
            gateway: 7,
            replace: true,
            conns: vec![(0, 1, 42), (1, 9, 43)],
        },
        ToRouter::Replay {
            gateway: 7,
            lane: 5,
            from: 2,
        },
    ];
    let target = |token, epoch, seq| Target { token, epoch, seq };
    let message = |subject, text| Arc::new(Message::to_subject(subject, b(text)));
    let delivery = GatewayItem::Deliver(GatewayMail {
        msg: message(42, "news"),
        published_ns: 1_700_000_000_000_000_000,
        loops: vec![
            (0, vec![target(1, 9, 2)]),
            (1, vec![target(5, 9, 3), target(6, 0, 1)]),
        ],
    });
    let reply = |answer| {
        GatewayItem::Reply(WireReply {
            loop_id: 0,
            token: 1,
            part: Some(3 << 16),
            reply: answer,
        })
    };
    let history = Reply::History(HistoryRead {
        messages: (1..=40)
            .map(|seq| (seq, message(42, "an old message")))
            .collect(),
        last: 40,
        gap: true,
        epoch: Some(9),
    });
    let to_gateway = [
        ToGateway::Bundle {
            shard: 1,
            lane: 5,
            n: 1,
            items: vec![
                reply(Reply::of_publish(2, 5, 4, Some("disk full".into()))),
                reply(Reply::Joined {
                    login: None,
                    channels: vec![("room:1".into(), HistoryRead::default())],
                    refused: vec![("room:2".into(), Refusal::UserLimit)],
                }),
                reply(Reply::Presence {
                    of: bus::PresenceOf::Channel("room:1".into()),
                    presence: bus::Presence {
                        users: vec![bus::Member {
                            user: 42,
                            connections: 2,
                            info: Some(r#"{"name":"Ada"}"#.into()),
                        }],
                        count: 1,
                        connections: 3,
                        cut: false,
                    },
                }),
                reply(Reply::Online {
                    user: 7,
                    online: vec![3, 9],
                }),
                reply(Reply::Occupied(vec![bus::Occupied {
                    name: "presence-a".into(),
                    users: 2,
                    connections: 3,
                }])),
                delivery,
            ],
        },
        ToGateway::Missed {
            lane: 5,
            from: 2,
            to: u64::MAX,
        },
        ToGateway::Rest { lane: 5, from: 9 },
        ToGateway::Resync { router: 11 },
        ToGateway::RouterStats("{\"connections\":1}".into()),
    ];
    let forward = ForwardItem {
        call: 4,
        subject: 42,
        payload: b("news"),
        published_ns: 1,
        users: vec![2, 4, 6],
    };
    let to_shard = [
        ToShard::Forward {
            from: 1,
            items: vec![forward.clone()],
        },
        ToShard::Counted {
            from: 0,
            counts: vec![ShardCount {
                call: 4,
                connections: 3,
                users: 3,
                error: None,
            }],
        },
        ToShard::InOrder {
            from: 1,
            gateway: 7,
            number: 1,
            items: vec![InOrderItem {
                at: 2,
                subject: 3,
                payload: b("c"),
                users: vec![2],
            }],
        },
        ToShard::Friends {
            from: 1,
            items: vec![(2, r#"{"online":[9],"offline":[]}"#.into())],
        },
    ];
    let mut scripts: Vec<Vec<u8>> = Vec::new();
    scripts.extend(to_router.iter().map(|m| framed(0, &encode_to_router(m))));
    scripts.extend(to_gateway.iter().map(|m| framed(1, &encode_to_gateway(m))));
    scripts.extend(to_shard.iter().map(|m| framed(2, &encode_to_shard(m))));
    // A history read and a forward too large for a (tiny) max_payload, in parts.
    let big = encode_to_gateway(&ToGateway::Bundle {
        shard: 0,
        lane: 5,
        n: 2,
        items: vec![reply(history)],
    });
    let parts = fragment::split(big, 200);
    assert!(parts.len() > 2);
    scripts.push(parts.iter().flat_map(|p| framed(1, p)).collect());
    let many = ToShard::Forward {
        from: 1,
        items: vec![forward; 30],
    };
    let parts = fragment::split_for_shard(encode_to_shard(&many), 200);
    assert!(parts.len() > 2);
    scripts.push(parts.iter().flat_map(|p| framed(2, p)).collect());
    scripts
}

fn seeds() -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/cluster_codec");
    if env("CODEC_FUZZ_WRITE_SEEDS", 0) == 1 {
        for (i, script) in well_formed().iter().enumerate() {
            std::fs::write(dir.join(format!("well_formed_{i:02}")), script).expect("seed");
        }
    }
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| std::fs::read(e.expect("entry").path()).expect("seed"))
        .collect();
    out.sort();
    out
}

/// The coverage-guided target's seeds replay and together reach every decoder and
/// the reassembly — so seeds a codec change left behind (another version byte, a
/// changed message) fail here: `CODEC_FUZZ_WRITE_SEEDS=1` writes them again from
/// [`well_formed`].
#[test]
fn the_seeds_replay_and_reach_every_decoder() {
    let seeds = seeds();
    assert!(
        seeds.len() >= well_formed().len(),
        "fuzz/seeds/cluster_codec"
    );
    let seen = seeds.iter().fold(0, |seen, s| seen | codec_script::run(s));
    assert_eq!(
        seen,
        ROUTER | GATEWAY | SHARD | WHOLE,
        "fuzz/seeds/cluster_codec is out of date"
    );
}

/// Mutated well-formed scripts and random bytes: no decoder panics, every decoded
/// message round-trips, and the mutations still reach every decoder.
#[test]
fn mutated_and_random_scripts_never_break_the_codec() {
    let mut rng = StdRng::seed_from_u64(env("CODEC_FUZZ_SEED", 0x636f_6465));
    let runs = 100_000 * env("CODEC_FUZZ_SCALE", 1);
    let base = well_formed();
    let mut seen = 0;
    for i in 0..runs {
        let script: Vec<u8> = if i % 5 == 0 {
            (0..rng.gen_range(0..300)).map(|_| rng.gen()).collect()
        } else {
            let mut s = base[rng.gen_range(0..base.len())].clone();
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..s.len());
                match rng.gen_range(0..3) {
                    0 => s[at] = rng.gen(),
                    1 => s.truncate(at.max(1)),
                    _ => s.insert(at, rng.gen()),
                }
            }
            s
        };
        match std::panic::catch_unwind(|| codec_script::run(&script)) {
            Ok(reached) => seen |= reached,
            Err(_) => panic!("script {i} failed: {script:?}"),
        }
    }
    assert_eq!(seen & (ROUTER | GATEWAY | SHARD), ROUTER | GATEWAY | SHARD);
}
