//! What a Pusher connection keeps for its life — its app, its socket id, its
//! client-event bucket — in a loop's side table keyed by the connection's key
//! ([`super::Cx::key`]), the table living in the loop's [`crate::Credentials`] so
//! that a closed connection's entry goes with its credentials (`forget`).
//!
//! Why a side table: the session used to sit in the connection's pending box, which
//! kept that box (with an empty input buffer and every other pending field) alive
//! for a Pusher connection's whole life: about 230 B more than a framed WebSocket
//! subscribed to one channel (docs/decisions/pusher.md). Here a session is one
//! 24-byte entry of a hash table, and the socket id is not stored as text: it is
//! `<random>.<connection key>`, written when asked for.
//!
//! Not here: what a Pusher connection says (`pusher`), the clock (ticks come in).

use crate::clock::{Tick, TICK_MS};
use std::collections::HashMap;

/// Client events a connection may send per second (Pusher's documented limit).
pub const CLIENT_EVENTS_PER_SECOND: u32 = 10;

/// One Pusher connection's session: 16 bytes.
pub(crate) struct Session {
    /// The socket id's first part (below 10^12); the second is the connection key.
    random: u64,
    /// Client-event bucket: events available, refilled by elapsed ticks.
    refilled: Tick,
    /// Index of its app in `Access::pusher`.
    pub(crate) app: u16,
    tokens: u8,
}

/// The loop's Pusher sessions, by connection key.
#[derive(Default)]
pub struct Sessions {
    by_key: HashMap<u32, Session>,
    /// Signed-in connections (`pusher:signin`, `pusher_user`): the `user_data` as
    /// signed, apart so that a session that never signs in stays 16 bytes.
    users: HashMap<u32, Box<str>>,
}

impl Session {
    pub(crate) fn new(app: u16, random: u64, now: Tick) -> Session {
        Session {
            random,
            refilled: now,
            app,
            tokens: CLIENT_EVENTS_PER_SECOND as u8,
        }
    }

    /// `<random>.<key>`: what its app's auth endpoint signs.
    pub(crate) fn socket_id(&self, key: u32) -> String {
        format!("{}.{key}", self.random)
    }

    /// Whether `socket_id` (a message's sender) is this session's, without
    /// writing this one out (asked for every client event delivered).
    pub(crate) fn is_socket(&self, key: u32, socket_id: &str) -> bool {
        let Some((random, k)) = socket_id.split_once('.') else {
            return false;
        };
        random.parse() == Ok(self.random) && k.parse() == Ok(key)
    }

    /// Takes one client event from the bucket at `now`; false when it is empty.
    pub(crate) fn take_token(&mut self, now: Tick) -> bool {
        let ticks_per_token = (1000 / TICK_MS / u64::from(CLIENT_EVENTS_PER_SECOND)).max(1) as u32;
        let earned = now.wrapping_sub(self.refilled) / ticks_per_token;
        if earned > 0 {
            let tokens = (u32::from(self.tokens) + earned).min(CLIENT_EVENTS_PER_SECOND);
            self.tokens = tokens as u8;
            self.refilled = self.refilled.wrapping_add(earned * ticks_per_token);
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

impl Sessions {
    pub(crate) fn insert(&mut self, key: u32, session: Session) {
        self.by_key.insert(key, session);
    }

    pub(crate) fn get(&self, key: u32) -> Option<&Session> {
        if self.by_key.is_empty() {
            return None; // asked on every framed delivery; most loops hold none
        }
        self.by_key.get(&key)
    }

    pub(crate) fn get_mut(&mut self, key: u32) -> Option<&mut Session> {
        self.by_key.get_mut(&key)
    }

    /// Connection `key` closed.
    pub(crate) fn forget(&mut self, key: u32) {
        if !self.by_key.is_empty() {
            self.by_key.remove(&key);
        }
        if !self.users.is_empty() {
            self.users.remove(&key);
        }
    }

    /// The `user_data` connection `key` signed in with, if it did.
    pub(crate) fn user_data(&self, key: u32) -> Option<&str> {
        if self.users.is_empty() {
            return None;
        }
        self.users.get(&key).map(|d| &**d)
    }

    /// Connection `key` signed in with `user_data`.
    pub(crate) fn sign_in(&mut self, key: u32, user_data: &str) {
        self.users.insert(key, user_data.into());
    }

    /// Sessions held (tests, memory accounting).
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_small_and_its_socket_id_is_its_random_and_key() {
        assert_eq!(std::mem::size_of::<Session>(), 16);
        let s = Session::new(0, 123_456, 0);
        assert_eq!(s.socket_id(42), "123456.42");
        assert!(s.is_socket(42, "123456.42"));
        for other in [
            "123456.43",
            "123457.42",
            "123456",
            "",
            "x.42",
            "123456.42.1",
        ] {
            assert!(!s.is_socket(42, other), "{other}");
        }
    }

    #[test]
    fn the_bucket_holds_ten_and_refills_with_time() {
        let mut s = Session::new(0, 1, 0);
        let taken = (0..20).filter(|_| s.take_token(0)).count();
        assert_eq!(taken, CLIENT_EVENTS_PER_SECOND as usize);
        let second = (1000 / TICK_MS) as Tick;
        assert!(s.take_token(second));
        let taken = (0..20).filter(|_| s.take_token(10 * second)).count();
        assert_eq!(taken, CLIENT_EVENTS_PER_SECOND as usize, "never above ten");
    }

    #[test]
    fn a_forgotten_connection_has_no_session() {
        let mut t = Sessions::default();
        t.insert(7, Session::new(1, 9, 0));
        assert_eq!(t.get(7).map(|s| s.app), Some(1));
        t.forget(7);
        assert!(t.get(7).is_none() && t.is_empty());
    }
}
