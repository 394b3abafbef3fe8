//! Occupied channels by name prefix (Pusher's `GET /apps/<id>/channels`): a scan
//! of every channel of this router, O(channels), for an operator's or a back-end's
//! occasional query, never on a message's path. Internal companions (names with
//! `~`) are not listed: no client names them.

use super::Channels;
use serde::{Deserialize, Serialize};

/// Most channels one router answers a prefix query with: the answer crosses NATS
/// as one message, bounded (the rest is cut, and said so by [`Occupied`] lists
/// of exactly this length).
pub const MAX_LISTED: usize = 10_000;

/// One occupied channel: its name, users with a connection in it, and its
/// subscribed connections (with or without a user).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Occupied {
    pub name: String,
    pub users: u32,
    pub connections: u32,
}

impl Channels {
    /// Channels whose name starts with `prefix` and that have a subscribed
    /// connection, sorted by name, at most [`MAX_LISTED`].
    pub fn occupied_with_prefix(&self, prefix: &str) -> Vec<Occupied> {
        let mut out: Vec<Occupied> = self
            .map
            .iter()
            .filter(|(name, c)| {
                name.starts_with(prefix) && !name.contains('~') && !c.subs.is_empty()
            })
            .map(|(name, c)| Occupied {
                name: name.to_string(),
                users: c.subs.users() as u32,
                connections: c.subs.len() as u32,
            })
            .collect();
        out.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        out.truncate(MAX_LISTED);
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::{ConnRef, Router, RouterConfig, SubscriptionIndex};

    #[test]
    fn lists_occupied_channels_of_a_prefix_without_companions() {
        let mut r = Router::new(RouterConfig::default(), SubscriptionIndex::default());
        let c = |token| ConnRef { loop_id: 0, token };
        r.handle_join("presence-a", c(1), Some(7), None).unwrap();
        r.handle_join("presence-a", c(2), None, None).unwrap();
        r.handle_join("presence-a~presence", c(1), Some(7), None)
            .unwrap();
        r.handle_join("news", c(3), None, None).unwrap();
        r.handle_join("presence-b", c(4), Some(8), None).unwrap();
        r.handle_leave("presence-b", c(4), std::time::Instant::now());
        let got = r.occupied_channels("presence-");
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(
            (got[0].name.as_str(), got[0].users, got[0].connections),
            ("presence-a", 1, 2)
        );
        assert_eq!(r.occupied_channels("").len(), 2);
    }
}
