//! The flags' names and help for the core's policies (`--ws-heartbeat`,
//! `--slow-policy`): value parsers for the core's own [`WsHeartbeat`] and
//! [`SlowPolicy`], written here so the core names no flag (and links no clap). The
//! help repeats the variants' docs.
//!
//! Not here: what the policies do (`connection::delivery`).

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use connection::{SlowPolicy, WsHeartbeat};

/// `--ws-heartbeat pong|ping`.
pub fn ws_heartbeat() -> impl TypedValueParser<Value = WsHeartbeat> {
    PossibleValuesParser::new([
        PossibleValue::new("pong").help(
            "An unsolicited pong (RFC 6455 5.5.3), a one-way heartbeat: the client owes no \
             answer. It keeps proxies and NAT mappings open and finds a dead peer through TCP \
             exactly as a ping does, since the server does nothing with pongs. Measured: a \
             WebSocket beat costs the machine about half what a ping costs \
             (docs/decisions/websocket-heartbeat-pong.md), the client's pong and the server's \
             read of it gone",
        ),
        PossibleValue::new("ping").help(
            "A ping (RFC 6455 5.5.2): every client answers with a pong the server reads and drops",
        ),
    ])
    .map(|name| match name.as_str() {
        "ping" => WsHeartbeat::Ping,
        _ => WsHeartbeat::Pong,
    })
}

/// `--slow-policy disconnect|drop`, as [`ws_heartbeat`].
pub fn slow_policy() -> impl TypedValueParser<Value = SlowPolicy> {
    PossibleValuesParser::new([
        PossibleValue::new("disconnect")
            .help("Close the connection: the client reconnects and resumes from history"),
        PossibleValue::new("drop")
            .help("Skip deliveries until the socket drains; the sequence gap shows the loss"),
    ])
    .map(|name| match name.as_str() {
        "drop" => SlowPolicy::Drop,
        _ => SlowPolicy::Disconnect,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<P: TypedValueParser>(parser: P, value: &str) -> Result<P::Value, clap::Error> {
        let cmd = clap::Command::new("t");
        parser.parse_ref(&cmd, None, std::ffi::OsStr::new(value))
    }

    #[test]
    fn the_policies_are_named_as_their_flags_say() {
        for (name, beat) in [("pong", WsHeartbeat::Pong), ("ping", WsHeartbeat::Ping)] {
            assert_eq!(parse(ws_heartbeat(), name).unwrap(), beat);
        }
        for (name, policy) in [
            ("disconnect", SlowPolicy::Disconnect),
            ("drop", SlowPolicy::Drop),
        ] {
            assert_eq!(parse(slow_policy(), name).unwrap(), policy);
        }
        assert!(parse(ws_heartbeat(), "pang").is_err());
    }
}
