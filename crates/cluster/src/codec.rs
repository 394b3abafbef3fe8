//! What crosses NATS between gateways and the router, and its binary encoding.
//!
//! Every NATS message of the cluster is one [`VERSION`] byte followed by one
//! postcard-encoded value (varint integers, length-prefixed byte strings): a
//! [`ToRouter`] on the router's subject, a [`ToGateway`] on a gateway's own subject.
//! Nothing is sent per recipient: a gateway's requests of one wake-up travel as one
//! [`ToRouter::Bundle`]; a publish reaches each gateway as one [`GatewayMail`]
//! carrying its recipients as [`bus::Target`] lists per loop, inside the one
//! [`ToGateway::Bundle`] the router sends that gateway per message it handled.
//! Router shards hand each other a publish's followers, and friends online
//! messages for each other's users, as [`ToShard`] messages.
//!
//! The bus seam's own types cross as they are — [`bus::Request`], [`bus::Reply`],
//! [`bus::Target`], [`bus::Message`] — with no copy of them for the wire: this
//! module only adds the envelopes that exist on the wire alone (which gateway,
//! which connection and part of a call, numbering, pieces, what shards hand each
//! other).
//!
//! [`decode_to_router`], [`decode_to_gateway`] and [`decode_to_shard`] reject a wrong version, a
//! malformed value and trailing bytes with a [`DecodeError`]; they never panic.

/// The bus seam's types these messages carry, as they are.
pub use bus::{HistoryRead, Message, Refusal, Reply, Request, Target};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The format version, the first byte of every message. A decoder refuses others,
/// so a mixed-version cluster fails loudly instead of misreading.
pub const VERSION: u8 = 14;

/// Why bytes from NATS were refused.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("cluster codec: empty message")]
    Empty,
    #[error("cluster codec: version {0}, this build speaks {VERSION}")]
    Version(u8),
    #[error("cluster codec: malformed message: {0}")]
    Malformed(#[from] postcard::Error),
    #[error("cluster codec: {0} bytes after the message")]
    Trailing(usize),
}

/// A gateway's id: random per gateway process start, so a restarted gateway is a
/// new one for the router (its old connections are gone).
pub type GatewayId = u64;

/// From a gateway (or a back-end) to the router.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToRouter {
    /// Requests of one gateway in the order its loops made them.
    Bundle {
        gateway: GatewayId,
        calls: Vec<WireCall>,
    },
    /// "I am alive, holding this many logged-in connections"; once a second.
    /// `place`: the supervisor's number for this gateway (`--supervised-place`); a
    /// new gateway in the place of a known one means that one died.
    Heartbeat {
        gateway: GatewayId,
        connections: u64,
        place: Option<u32>,
    },
    /// Logged-in connections of the gateway, `(loop, token, user)`: the answer to
    /// [`ToGateway::Resync`], in chunks. The first chunk (`replace`) replaces what
    /// the router knew of this gateway; the others add to it.
    Presence {
        gateway: GatewayId,
        replace: bool,
        conns: Vec<(u16, u32, u64)>,
    },
    /// "Send me your bundles from number `from` on again": the gateway saw
    /// [`ToGateway::Bundle`] numbers of `lane` skip, or its NATS connection dropped
    /// (what the router sent meanwhile is gone). Answered with those bundles, and a
    /// [`ToGateway::Missed`] for any the router no longer keeps.
    Replay {
        gateway: GatewayId,
        lane: u64,
        from: u64,
    },
}

/// One request of one connection of a gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireCall {
    pub loop_id: u16,
    pub token: u32,
    /// `Some` for one shard's part of a call divided among router shards
    /// (`--router-shards`): the gateway's number for that part, echoed in its
    /// [`WireReply`] so the reply finds its call, and so a reply that comes after the
    /// call was answered without it is recognised and dropped
    /// (`crate::shard_calls`). `None` for a call sent whole. Packed by
    /// [`part_id`].
    pub part: Option<u64>,
    pub request: CallRequest,
}

/// A call part's number on the wire: the gateway's number for the divided call
/// and the shard the part goes to, packed in one place. The gateway makes it; an
/// ordered batch's shards read the call's number back ([`part_of`]).
pub fn part_id(number: u64, shard: u16) -> u64 {
    number << 16 | u64::from(shard)
}

/// The call's number and the shard of a part made by [`part_id`].
pub fn part_of(part: u64) -> (u64, u16) {
    (part >> 16, part as u16)
}

/// What a [`WireCall`] asks: the bus's own [`Request`], or the one request that
/// exists only between a gateway and router shards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CallRequest {
    /// A request of the bus seam, whole or one router shard's part of it.
    Bus(Request),
    /// A shard's part of a publish batch over several router shards that keeps the
    /// batch's order (`crate::router_role::in_order`): the items whose subject it
    /// owns, each with its place in the batch. Every shard gets one, with or
    /// without items: each must hear from every shard in `senders` (those with
    /// items) before it delivers.
    PublishInOrder {
        items: Vec<(u32, u64, Bytes)>,
        senders: Vec<u16>,
    },
}

impl CallRequest {
    /// The bus request this is: an ordered part is the batch of its items in their
    /// order (what one router makes of it).
    pub fn into_request(self) -> Request {
        match self {
            CallRequest::Bus(request) => request,
            CallRequest::PublishInOrder { mut items, .. } => {
                items.sort_by_key(|(at, ..)| *at);
                let items = items.into_iter().map(|(_, s, p)| (s, p)).collect();
                Request::PublishBatch {
                    items,
                    parallel: false,
                }
            }
        }
    }
}

/// From the router to one gateway (or to all of them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToGateway {
    /// Replies and deliveries in the order the router decided them: everything for
    /// this gateway from one message the router handled (a gateway's bundle of calls,
    /// a back-end's publish), so a publish's reply and its delivery to the same
    /// gateway cross NATS as one message. Numbered 1, 2, … within `lane` (one
    /// per router shard and gateway, random when the router starts keeping it), so
    /// a gateway sees a lost bundle and asks router shard `shard` for it again
    /// ([`ToRouter::Replay`]).
    Bundle {
        shard: u16,
        lane: u64,
        n: u64,
        items: Vec<GatewayItem>,
    },
    /// The answer to a [`ToRouter::Replay`] the router cannot fully serve: bundles
    /// `from..=to` of `lane` are no longer kept (`to`: `u64::MAX` when the router
    /// does not know the lane at all). They may have held deliveries, so the
    /// gateway tells every connection to resume.
    Missed { lane: u64, from: u64, to: u64 },
    /// A replay stopped short (it goes in pieces, so that it cannot push a
    /// reconnected gateway past nats-server's `max_pending`): ask again from `from`.
    Rest { lane: u64, from: u64 },
    /// The router does not know this gateway's presence (it restarted, or it forgot
    /// a silent gateway): send every logged-in connection as [`ToRouter::Presence`].
    Resync { router: u64 },
    /// The router's counters (JSON text), sent back for each heartbeat so a
    /// gateway's `/stats` shows them without asking.
    RouterStats(String),
    /// A piece of an encoded [`ToGateway`] larger than NATS's max_payload
    /// (`crate::fragment`).
    Fragment(Fragment),
}

/// One piece of a message split by `crate::fragment::split`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fragment {
    /// Random per split message.
    pub id: u64,
    /// 0, 1, … in sending order.
    pub index: u32,
    pub last: bool,
    /// The next bytes of the encoded message.
    pub bytes: Bytes,
}

/// One item of a [`ToGateway::Bundle`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum GatewayItem {
    /// The reply to one call.
    Reply(WireReply),
    /// One publish: the recipients this gateway holds.
    Deliver(GatewayMail),
}

/// The reply to one [`WireCall`], addressed to its connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireReply {
    pub loop_id: u16,
    pub token: u32,
    /// The call's [`WireCall::part`], echoed.
    pub part: Option<u64>,
    pub reply: Reply,
}

/// One message for the connections of one gateway: the parts of the
/// [`bus::Mail`] each of its loops gets, the message once for all of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GatewayMail {
    pub msg: Arc<Message>,
    /// When the router took the publish, in ns since the Unix epoch (latency; an
    /// `Instant` does not cross processes).
    pub published_ns: u64,
    /// `(the gateway's own loop, its recipients)`, one entry per loop: each loop's
    /// [`Target`]s as the router's hub made them, moved here, not copied.
    pub loops: Vec<(u16, Vec<Target>)>,
}

/// From one router shard to another (`--router-shards`), on
/// `myriad.router.<shard>.forward`: the subject's shard hands the followers other
/// shards own to those shards, one message per shard per message it handled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToShard {
    /// Publishes for the receiving shard to number and deliver to exactly the
    /// listed users (all its own); it answers with one [`ToShard::Counted`].
    Forward { from: u16, items: Vec<ForwardItem> },
    /// The receiving shard's counts, one per item of a [`ToShard::Forward`].
    Counted { from: u16, counts: Vec<ShardCount> },
    /// Shard `from`'s followers on the receiving shard of the items it owns of one
    /// ordered batch (gateway `gateway`'s call number `number`), sent even when
    /// empty: the receiving shard delivers the batch once every other shard's
    /// part is in (`crate::router_role::in_order`).
    InOrder {
        from: u16,
        gateway: GatewayId,
        number: u64,
        items: Vec<InOrderItem>,
    },
    /// A piece of an encoded [`ToShard`] larger than NATS's max_payload (a forward
    /// of a large payload to many followers; `crate::fragment`).
    Fragment(Fragment),
    /// Friends online messages of shard `from`'s tick for users the receiving
    /// shard owns, (user, payload): each published to the user's friends
    /// companion if they opted in (`router::router::friends`).
    Friends {
        from: u16,
        items: Vec<(u64, String)>,
    },
}

/// One publish's recipients on one shard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForwardItem {
    /// The forwarding shard's number for the call that waits for this count.
    pub call: u64,
    pub subject: u64,
    pub payload: Bytes,
    /// When the subject's shard took the publish (latency is measured from there).
    pub published_ns: u64,
    pub users: Vec<u64>,
}

/// One item of an ordered batch for the shard that owns `users`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InOrderItem {
    /// Its place in the batch.
    pub at: u32,
    pub subject: u64,
    pub payload: Bytes,
    pub users: Vec<u64>,
}

/// What a shard delivered of one [`ForwardItem`]; `error`: its durable history
/// write failed (delivered all the same).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardCount {
    pub call: u64,
    pub connections: u64,
    pub users: u64,
    pub error: Option<String>,
}

fn encode<T: Serialize>(value: &T) -> Bytes {
    let mut out = vec![VERSION];
    // Writing into a Vec cannot fail: postcard only fails on a full fixed buffer
    // or on types serde cannot express (none here).
    out = postcard::to_extend(value, out).expect("postcard into a Vec cannot fail");
    Bytes::from(out)
}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, DecodeError> {
    let (&version, rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
    if version != VERSION {
        return Err(DecodeError::Version(version));
    }
    let (value, trailing) = postcard::take_from_bytes(rest)?;
    if !trailing.is_empty() {
        return Err(DecodeError::Trailing(trailing.len()));
    }
    Ok(value)
}

pub fn encode_to_router(msg: &ToRouter) -> Bytes {
    encode(msg)
}

pub fn decode_to_router(bytes: &[u8]) -> Result<ToRouter, DecodeError> {
    decode(bytes)
}

pub fn encode_to_gateway(msg: &ToGateway) -> Bytes {
    encode(msg)
}

pub fn decode_to_gateway(bytes: &[u8]) -> Result<ToGateway, DecodeError> {
    decode(bytes)
}

pub fn encode_to_shard(msg: &ToShard) -> Bytes {
    encode(msg)
}

pub fn decode_to_shard(bytes: &[u8]) -> Result<ToShard, DecodeError> {
    decode(bytes)
}

#[cfg(test)]
mod tests;
