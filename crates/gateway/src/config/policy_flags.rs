//! The flags' names and help for the core's policies (`--ws-heartbeat`,
//! `--slow-policy`): `clap::ValueEnum` for the core's own [`WsHeartbeat`] and
//! [`SlowPolicy`], written here so the core names no flag. The help repeats the
//! variants' docs (what `--help` printed when the enums derived it).
//!
//! Not here: what the policies do (`core::delivery`).

use crate::core::{SlowPolicy, WsHeartbeat};
use clap::builder::PossibleValue;

/// `--ws-heartbeat pong|ping`.
impl clap::ValueEnum for WsHeartbeat {
    fn value_variants<'a>() -> &'a [Self] {
        &[WsHeartbeat::Pong, WsHeartbeat::Ping]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            WsHeartbeat::Pong => PossibleValue::new("pong").help(
                "An unsolicited pong (RFC 6455 5.5.3), a one-way heartbeat: the client owes no \
                 answer. It keeps proxies and NAT mappings open and finds a dead peer through TCP \
                 exactly as a ping does, since the server does nothing with pongs. Measured: a \
                 WebSocket beat costs the machine about half what a ping costs \
                 (docs/decisions/websocket-heartbeat-pong.md), the client's pong and the server's \
                 read of it gone",
            ),
            WsHeartbeat::Ping => PossibleValue::new("ping").help(
                "A ping (RFC 6455 5.5.2): every client answers with a pong the server reads and drops",
            ),
        })
    }
}

/// `--slow-policy disconnect|drop`, as [`WsHeartbeat`].
impl clap::ValueEnum for SlowPolicy {
    fn value_variants<'a>() -> &'a [Self] {
        &[SlowPolicy::Disconnect, SlowPolicy::Drop]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            SlowPolicy::Disconnect => PossibleValue::new("disconnect")
                .help("Close the connection: the client reconnects and resumes from history"),
            SlowPolicy::Drop => PossibleValue::new("drop")
                .help("Skip deliveries until the socket drains; the sequence gap shows the loss"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn the_policies_are_named_as_their_flags_say() {
        for (name, beat) in [("pong", WsHeartbeat::Pong), ("ping", WsHeartbeat::Ping)] {
            assert_eq!(WsHeartbeat::from_str(name, false), Ok(beat));
        }
        for (name, policy) in [
            ("disconnect", SlowPolicy::Disconnect),
            ("drop", SlowPolicy::Drop),
        ] {
            assert_eq!(SlowPolicy::from_str(name, false), Ok(policy));
        }
        assert!(WsHeartbeat::from_str("pang", false).is_err());
    }
}
