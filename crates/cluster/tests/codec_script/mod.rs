//! The cluster codec on arbitrary bytes: what any client of the NATS server could
//! send a router, a gateway or another shard. Shared by the coverage-guided target
//! (`crates/cluster/fuzz`, `scripts/fuzz.sh cluster_codec`) and `tests/codec_fuzz.rs`.
//!
//! A script is a list of messages, each `[kind, len, bytes…]`: `kind % 3` says who
//! receives it (0 the router, 1 a gateway, 2 a shard), `len` how many bytes follow
//! (255: all the rest). Properties:
//! - decoding never panics, whatever the bytes;
//! - what decodes encodes to bytes that decode to the same value;
//! - parts of a large message ([`ToGateway::Fragment`], [`ToShard::Fragment`]) go through one
//!   [`Reassembly`] per receiver, as in the gateway and the router, which holds no
//!   more than its bound, and what it puts together is decoded the same way.

use cluster::codec::{self, ToGateway, ToShard};
use cluster::fragment::{Reassembly, MAX_PENDING};

/// Decoded a message to the router, to a gateway, to a shard; put one together.
pub const ROUTER: u8 = 1;
pub const GATEWAY: u8 = 2;
pub const SHARD: u8 = 4;
pub const WHOLE: u8 = 8;

/// Runs one script; returns what it reached (the bits above), so that the tests can
/// check their inputs reach every decoder.
pub fn run(data: &[u8]) -> u8 {
    let mut seen = 0;
    let (mut gateway_parts, mut shard_parts) = (Reassembly::default(), Reassembly::default());
    let mut rest = data;
    while let [kind, len, tail @ ..] = rest {
        let n = if *len == 255 {
            tail.len()
        } else {
            usize::from(*len).min(tail.len())
        };
        let (msg, next) = tail.split_at(n);
        rest = next;
        seen |= match kind % 3 {
            0 => to_router(msg),
            1 => to_gateway(msg, &mut gateway_parts),
            _ => to_shard(msg, &mut shard_parts),
        };
        assert!(gateway_parts.pending_bytes() <= MAX_PENDING);
        assert!(shard_parts.pending_bytes() <= MAX_PENDING);
    }
    seen
}

fn to_router(msg: &[u8]) -> u8 {
    decoded(msg, codec::decode_to_router, codec::encode_to_router).map_or(0, |_| ROUTER)
}

fn to_gateway(msg: &[u8], parts: &mut Reassembly) -> u8 {
    match decoded(msg, codec::decode_to_gateway, codec::encode_to_gateway) {
        None => 0,
        Some(ToGateway::Fragment(part)) => match parts.add(part) {
            Some(whole) => GATEWAY | WHOLE | to_gateway(&whole, parts),
            None => GATEWAY,
        },
        Some(_) => GATEWAY,
    }
}

fn to_shard(msg: &[u8], parts: &mut Reassembly) -> u8 {
    match decoded(msg, codec::decode_to_shard, codec::encode_to_shard) {
        None => 0,
        Some(ToShard::Fragment(part)) => match parts.add(part) {
            Some(whole) => SHARD | WHOLE | to_shard(&whole, parts),
            None => SHARD,
        },
        Some(_) => SHARD,
    }
}

/// `msg` decoded, when it decodes; its own encoding must decode to the same value.
fn decoded<M: PartialEq + std::fmt::Debug, B: AsRef<[u8]>>(
    msg: &[u8],
    decode: fn(&[u8]) -> Result<M, codec::DecodeError>,
    encode: fn(&M) -> B,
) -> Option<M> {
    let m = decode(msg).ok()?;
    let again = decode(encode(&m).as_ref());
    assert_eq!(again.expect("its own encoding decodes"), m);
    Some(m)
}
