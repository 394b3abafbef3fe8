//! Router → gateway messages larger than the NATS server's `max_payload` (a resume
//! reading a huge history, a subscriber list of a hub, a batch of many large
//! deliveries), and router shard → shard forwards (a large payload to many
//! followers): NATS refuses them, so they cross as several [`Fragment`]s
//! ([`ToGateway::Fragment`], [`ToShard::Fragment`]), each under the limit, and the receiver
//! puts the encoded message back together before decoding it. One publisher's
//! messages on one subject keep their order in NATS, so a message's parts arrive in
//! order; parts of different messages (several routers) are told apart by their
//! random id.

use crate::codec::{self, Fragment, ToGateway, ToShard};
use bytes::Bytes;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Room kept under max_payload for a part's own header (version, id, index, length).
pub const PART_HEADER: usize = 32;

/// A message for a gateway that fits `max_payload` goes as it is; a larger one as
/// encoded [`ToGateway::Fragment`]s. `max_payload` 0 (unknown) means no limit.
pub fn split(encoded: Bytes, max_payload: usize) -> Vec<Bytes> {
    split_as(encoded, max_payload, |part| {
        codec::encode_to_gateway(&ToGateway::Fragment(part))
    })
}

/// [`split`] for a message to another router shard: [`ToShard::Fragment`]s.
pub fn split_for_shard(encoded: Bytes, max_payload: usize) -> Vec<Bytes> {
    split_as(encoded, max_payload, |part| {
        codec::encode_to_shard(&ToShard::Fragment(part))
    })
}

/// `encoded` as it is, or as parts each encoded by `encode` under `max_payload`.
fn split_as(encoded: Bytes, max_payload: usize, encode: impl Fn(Fragment) -> Bytes) -> Vec<Bytes> {
    if max_payload == 0 || encoded.len() <= max_payload {
        return vec![encoded];
    }
    let size = max_payload.saturating_sub(PART_HEADER).max(1);
    let id: u64 = rand::random();
    let count = encoded.len().div_ceil(size);
    (0..count)
        .map(|i| {
            let part = Fragment {
                id,
                index: i as u32,
                last: i + 1 == count,
                bytes: encoded.slice(i * size..((i + 1) * size).min(encoded.len())),
            };
            encode(part)
        })
        .collect()
}

/// How long an unfinished message is kept (its sender died mid-way).
const STALE: Duration = Duration::from_secs(30);

/// The largest message put together from parts. Far above any the cluster sends (a
/// subscriber list of a million users is ~5 MB, a reply stays under the history
/// rings' bound), so only a broken or hostile client of the NATS server reaches it.
pub const MAX_WHOLE: usize = 64 << 20;

/// All unfinished messages together: past it, a message's next part drops it.
pub const MAX_PENDING: usize = 4 * MAX_WHOLE;

/// Parts received so far, by message id, within [`MAX_WHOLE`] per message and
/// [`MAX_PENDING`] for all.
pub struct Reassembly {
    partial: HashMap<u64, (u32, Vec<u8>, Instant)>,
    /// Bytes of every unfinished message.
    pending: usize,
    max_whole: usize,
    max_pending: usize,
}

impl Default for Reassembly {
    fn default() -> Reassembly {
        Reassembly {
            partial: HashMap::new(),
            pending: 0,
            max_whole: MAX_WHOLE,
            max_pending: MAX_PENDING,
        }
    }
}

impl Reassembly {
    /// Adds one part; returns the whole encoded message once its last part came. A
    /// part out of order drops the message (and is logged): NATS does not reorder,
    /// so it can only mean parts were lost. So does a part past the bounds.
    pub fn add(&mut self, part: Fragment) -> Option<Vec<u8>> {
        let now = Instant::now();
        let pending = &mut self.pending;
        self.partial.retain(|_, (_, buf, at)| {
            let keep = now.duration_since(*at) < STALE;
            if !keep {
                *pending -= buf.len();
            }
            keep
        });
        let (next, buf, at) = self
            .partial
            .entry(part.id)
            .or_insert_with(|| (0, Vec::new(), now));
        let size = part.bytes.len();
        let why = if part.index != *next {
            Some("a message part is missing")
        } else if buf.len() + size > self.max_whole {
            Some("a message in parts is larger than the bound")
        } else if self.pending + size > self.max_pending {
            Some("unfinished messages in parts exceed the bound")
        } else {
            None
        };
        if let Some(why) = why {
            tracing::warn!(
                id = part.id,
                want = *next,
                got = part.index,
                bytes = buf.len() + size,
                "{why}: message dropped"
            );
            let (_, dropped, _) = self.partial.remove(&part.id).expect("entry above");
            self.pending -= dropped.len();
            return None;
        }
        buf.extend_from_slice(&part.bytes);
        self.pending += size;
        (*next, *at) = (*next + 1, now);
        if part.last {
            let (_, whole, _) = self.partial.remove(&part.id).expect("entry above");
            self.pending -= whole.len();
            return Some(whole);
        }
        None
    }

    /// Bytes held for unfinished messages.
    pub fn pending_bytes(&self) -> usize {
        self.pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode_to_gateway, GatewayItem, WireReply};
    use bus::{HistoryRead, Message, Reply};
    use std::sync::Arc;

    fn history(n: usize, size: usize) -> ToGateway {
        let messages = (1..=n as u64)
            .map(|seq| {
                let payload = Bytes::from(vec![b'x'; size]);
                let msg = Arc::new(Message::to_subject(7, payload));
                (seq, msg)
            })
            .collect();
        ToGateway::Bundle {
            shard: 0,
            lane: 1,
            n: 1,
            items: vec![GatewayItem::Reply(WireReply {
                loop_id: 1,
                token: 9,
                part: None,
                reply: Reply::History(HistoryRead {
                    messages,
                    last: n as u64,
                    gap: false,
                    epoch: Some(3),
                }),
            })],
        }
    }

    #[test]
    fn a_large_message_crosses_in_parts_under_the_limit_and_comes_back_whole() {
        let msg = history(20, 30_000);
        let encoded = codec::encode_to_gateway(&msg);
        let parts = split(encoded.clone(), 65_536);
        assert_eq!(parts.len(), encoded.len().div_ceil(65_536 - PART_HEADER));
        assert!(parts.iter().all(|p| p.len() <= 65_536), "every part fits");
        let mut r = Reassembly::default();
        let mut whole = None;
        for (i, p) in parts.iter().enumerate() {
            let ToGateway::Fragment(part) = decode_to_gateway(p).unwrap() else {
                panic!("part {i} is not a part");
            };
            whole = r.add(part);
            assert_eq!(whole.is_some(), i + 1 == parts.len());
        }
        assert_eq!(decode_to_gateway(&whole.unwrap()).unwrap(), msg);
        // A small message is not split.
        let small = codec::encode_to_gateway(&history(1, 10));
        assert_eq!(split(small.clone(), 65_536), vec![small]);
    }

    /// A forward between router shards over the limit: a payload near it and
    /// thousands of followers, as shard parts, back whole.
    #[test]
    fn a_large_forward_crosses_to_its_shard_in_parts() {
        let forward = ToShard::Forward {
            from: 1,
            items: vec![crate::codec::ForwardItem {
                call: 3,
                subject: 1,
                payload: Bytes::from(vec![b'x'; 60_000]),
                published_ns: 1,
                users: (1..=3_000).map(|u| u * 2).collect(),
            }],
        };
        let encoded = codec::encode_to_shard(&forward);
        assert!(encoded.len() > 65_536);
        let parts = split_for_shard(encoded, 65_536);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| p.len() <= 65_536), "every part fits");
        let mut r = Reassembly::default();
        let whole = parts.iter().fold(None, |_, p| {
            let Ok(ToShard::Fragment(part)) = codec::decode_to_shard(p) else {
                panic!("not a shard part");
            };
            r.add(part)
        });
        assert_eq!(codec::decode_to_shard(&whole.unwrap()).unwrap(), forward);
    }

    #[test]
    fn a_missing_part_drops_the_message_and_interleaved_messages_stay_apart() {
        let (a, b) = (history(5, 1_000), history(6, 1_000));
        let pa = split(codec::encode_to_gateway(&a), 1_024);
        let pb = split(codec::encode_to_gateway(&b), 1_024);
        let part = |p: &Bytes| match decode_to_gateway(p).unwrap() {
            ToGateway::Fragment(part) => part,
            other => panic!("{other:?}"),
        };
        let mut r = Reassembly::default();
        let (mut got_a, mut got_b) = (None, None);
        for i in 0..pa.len().max(pb.len()) {
            if let Some(p) = pa.get(i) {
                got_a = got_a.or(r.add(part(p)));
            }
            if let Some(p) = pb.get(i) {
                got_b = got_b.or(r.add(part(p)));
            }
        }
        assert_eq!(decode_to_gateway(&got_a.unwrap()).unwrap(), a);
        assert_eq!(decode_to_gateway(&got_b.unwrap()).unwrap(), b);
        // Part 1 lost: the message never comes out half.
        let mut r = Reassembly::default();
        assert!(pa
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 1)
            .all(|(_, p)| r.add(part(p)).is_none()));
        assert_eq!(r.pending_bytes(), 0, "nothing is kept of a dropped message");
    }

    /// A message past the per-message bound, and messages that together pass the
    /// bound for all, are dropped and their memory freed; others still come whole.
    #[test]
    fn messages_past_the_bounds_are_dropped_and_their_memory_freed() {
        let piece = |id, index, last| Fragment {
            id,
            index,
            last,
            bytes: Bytes::from(vec![b'x'; 100]),
        };
        let mut r = Reassembly {
            max_whole: 300,
            max_pending: 450,
            ..Reassembly::default()
        };
        // Three parts fit one message; a fourth does not.
        for index in 0..3 {
            assert_eq!(r.add(piece(1, index, false)), None);
        }
        assert_eq!(r.pending_bytes(), 300);
        assert_eq!(r.add(piece(1, 3, true)), None);
        assert_eq!(r.pending_bytes(), 0);
        // Three messages pending, one of them in two parts (400 B): another second
        // part would pass 450 B, so its message goes; the others still finish.
        for id in [2, 3, 4] {
            assert_eq!(r.add(piece(id, 0, false)), None);
        }
        assert_eq!(r.add(piece(2, 1, false)), None);
        assert_eq!(r.pending_bytes(), 400);
        assert_eq!(r.add(piece(4, 1, false)), None);
        assert_eq!(r.pending_bytes(), 300, "message 4 dropped");
        assert_eq!(r.add(piece(3, 1, true)).map(|m| m.len()), Some(200));
        assert_eq!(r.add(piece(2, 2, true)).map(|m| m.len()), Some(300));
        assert_eq!(r.pending_bytes(), 0);
    }
}
