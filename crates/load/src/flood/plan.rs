//! What one flood process is told to do (its share of the connections, the ramp, the
//! hold and the close), whatever the protocol: `engine` (HTTP/1.1, TLS) and `h2` run
//! a [`Plan`] through `lifecycle`.

use super::rooms::Rooms;
use super::scan::Transport;
use super::stamp::LatencyAt;
use super::target::{user_of, Target};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

/// With `--rate 0`, connects started per loop turn (keeps the loop responsive).
pub const BURST: u32 = 1024;

/// How to close when the hold ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CloseMode {
    /// Close every connection at once (a mass disconnect).
    All,
    /// Close evenly over --close-secs.
    Gradual,
}

/// Everything one process needs to run its share.
#[derive(Clone, Debug)]
pub struct Plan {
    pub targets: Vec<Target>,
    pub transport: Transport,
    pub sources: Vec<Ipv4Addr>,
    pub users: Option<(u64, u64)>,
    pub first_user: u64,
    /// This process's connections are global numbers `offset .. offset + count`.
    pub offset: u64,
    pub count: u64,
    /// Connects per second; 0 = as fast as possible.
    pub rate: f64,
    pub hold: Option<Duration>,
    pub close: CloseMode,
    pub close_secs: f64,
    pub max_time: Duration,
    pub connect_timeout: Duration,
    pub max_inflight: usize,
    /// Extra request header lines ("Name: value").
    pub headers: Vec<String>,
    /// The client TLS config, when a target is `https://` or `wss://`.
    pub tls: Option<Arc<tls::rustls::ClientConfig>>,
    /// HTTP/2 (`--h2`): streams, not connections, are counted, `streams_per_conn` each.
    pub h2: bool,
    pub streams_per_conn: u32,
    /// `--reconnect`: a connection the server ends is opened again, resuming.
    pub reconnect: bool,
    /// `--latency-at`: a message's receive time is its read or its socket arrival.
    pub latency_at: LatencyAt,
    /// `--rooms`: the rooms each connection names in its URL's `%c`; then only
    /// stamped messages count (a channel protocol's replies are not messages).
    pub rooms: Option<Arc<Rooms>>,
    /// `--transport pusher`: the `pusher:subscribe` text a client sends once
    /// established (`--pusher-channel`).
    pub pusher_subscribe: Arc<[u8]>,
}

impl Plan {
    /// The target of global connection `g`.
    pub fn target(&self, g: u64) -> &Target {
        &self.targets[(g % self.targets.len() as u64) as usize]
    }

    /// The request path of global connection `g`: its user and its rooms.
    pub fn path(&self, g: u64, out: &mut Vec<u8>) {
        let user = user_of(g, self.users, self.first_user);
        self.target(g).path(user, out, &mut |o| {
            if let Some(r) = &self.rooms {
                r.write(g, o);
            }
        });
    }
}
