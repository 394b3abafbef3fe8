//! Presence queries: who is in a channel (`GET /presence/<channel>`, its counts
//! alone with `/stats`), is a user online (`GET /presence/<id>`), and which of the
//! subjects a user follows are online (`GET /online/<user>`).
//!
//! Read from what the router keeps anyway: a channel's members (user → subscribed
//! connections, `channels`) and the users table (user → connections), so presence
//! costs no memory per membership. The one thing kept for it is [`Infos`]: the
//! presence info of users whose token carries one, once per user (not per
//! channel), and nothing for users without it. A list names at most
//! `RouterConfig::max_presence_members` users (the lowest ids, so every gateway
//! asking gets the same cut) and says it is cut; the counts beside it are always
//! exact.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Router;
use crate::channels::mirror::Mirror;
use crate::channels::Channels;
use crate::hash::IdHashBuilder;
use crate::{SubjectId, UserId};

/// Whose presence a query asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PresenceOf {
    /// A named channel: its subscribed users.
    Channel(String),
    /// A numeric subject as a user: online or not, with their connections.
    Subject(SubjectId),
}

/// One user in a presence list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub user: UserId,
    /// The user's connections present (subscribed to the channel).
    pub connections: u32,
    /// The user's presence info (compact JSON), if their token carried one.
    pub info: Option<String>,
}

impl Member {
    /// A member without info.
    pub fn new(user: UserId, connections: u32) -> Member {
        Member {
            user,
            connections,
            info: None,
        }
    }
}

/// A presence answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Presence {
    /// Users present with their connection counts, by id; empty for a counts-only
    /// query, at most `max_presence_members` otherwise.
    pub users: Vec<Member>,
    /// Users present, exact whatever the cut.
    pub count: u64,
    /// Connections, exact: in a channel every subscribed connection, those
    /// without a user too.
    pub connections: u64,
    /// True when `users` does not name every user present.
    pub cut: bool,
}

/// A presence answer as copied under the router lock ([`Router::presence_copy`]):
/// the members unsorted, uncut. [`PresenceCopy::finish`] sorts and cuts them
/// once the lock is released, so a 10,000-member list holds the router for a
/// copy of its members, not for their sort.
#[derive(Debug, Default)]
pub struct PresenceCopy {
    /// (user, connections, info), in the channel's order.
    members: Vec<(UserId, u32, Option<String>)>,
    count: u64,
    connections: u64,
    /// `max_presence_members` when the copy was taken.
    max: usize,
    list: bool,
}

impl PresenceCopy {
    /// A copy read from a channel's `mirror` (no infos), cut at `max`, and the
    /// mirror's version it is of.
    pub fn of_mirror(mirror: &Mirror, list: bool, max: usize) -> (PresenceCopy, u64) {
        let (members, count, connections, version) = mirror.copy(list);
        let copy = PresenceCopy {
            members: members.into_iter().map(|(u, n)| (u, n, None)).collect(),
            count,
            connections,
            max,
            list,
        };
        (copy, version)
    }

    /// The answer: the lowest `max_presence_members` ids, by id, and whether that
    /// cut someone.
    pub fn finish(self) -> Presence {
        let PresenceCopy {
            mut members,
            count,
            connections,
            max,
            list,
        } = self;
        if members.len() > max {
            if max > 0 {
                members.select_nth_unstable_by_key(max - 1, |m| m.0);
            }
            members.truncate(max);
        }
        members.sort_unstable_by_key(|m| m.0);
        let users: Vec<Member> = members
            .into_iter()
            .map(|(user, connections, info)| Member {
                user,
                connections,
                info,
            })
            .collect();
        Presence {
            cut: list && count > users.len() as u64,
            users,
            count,
            connections,
        }
    }
}

impl Router {
    /// The presence of `of`: with `list`, the users (the lowest ids up to
    /// `max_presence_members`), else the counts alone. O(members) for a channel,
    /// O(1) for a subject. [`Router::presence_copy`] and then
    /// [`PresenceCopy::finish`] give the same answer with less under the lock.
    pub fn presence(&self, of: &PresenceOf, list: bool) -> Presence {
        self.presence_copy(of, list).finish()
    }

    /// What [`Router::presence`] needs of the router, copied: the members (ids,
    /// connection counts, infos) unsorted, and the counts. O(members), no sort.
    pub fn presence_copy(&self, of: &PresenceOf, list: bool) -> PresenceCopy {
        match of {
            PresenceOf::Channel(name) => self.channel_presence(name, list),
            PresenceOf::Subject(user) => {
                let n = self
                    .users
                    .get(*user)
                    .map_or(0, |s| s.conns.len(&self.overflow) as u32);
                PresenceCopy {
                    members: if list && n > 0 {
                        vec![(*user, n, None)]
                    } else {
                        Vec::new()
                    },
                    count: u64::from(n > 0),
                    connections: u64::from(n),
                    max: usize::MAX,
                    list,
                }
            }
        }
    }

    fn channel_presence(&self, name: &str, list: bool) -> PresenceCopy {
        let Some(crate::channels::Present {
            members,
            users: count,
            connections,
        }) = self.channels.presence_of(name, list)
        else {
            return PresenceCopy::default();
        };
        let mut copy = PresenceCopy {
            members: Vec::new(),
            count: count as u64,
            connections: connections as u64,
            max: self.config.max_presence_members,
            list,
        };
        if list {
            copy.members.reserve_exact(members.len());
            if self.infos.is_empty() {
                copy.members
                    .extend(members.into_iter().map(|(u, n)| (u, n, None)));
            } else {
                copy.members.extend(
                    members
                        .into_iter()
                        .map(|(u, n)| (u, n, self.infos.get(u).map(str::to_string))),
                );
            }
        }
        copy
    }

    /// Which of `subjects` (what a user follows) are online: a user with a
    /// connection on this router. One lookup each in the users table, in the
    /// order given; nothing allocated but the answer.
    pub fn online_among(&self, subjects: &[SubjectId]) -> Vec<UserId> {
        subjects
            .iter()
            .copied()
            .filter(|&s| {
                self.users
                    .get(s)
                    .is_some_and(|state| !state.conns.is_empty())
            })
            .collect()
    }

    /// Occupied channels whose names start with `prefix` (Pusher's channel list,
    /// `channels::by_prefix`): a scan of every channel.
    pub fn occupied_channels(&self, prefix: &str) -> Vec<crate::channels::Occupied> {
        self.channels.occupied_with_prefix(prefix)
    }

    /// Channel `name`'s members mirrored for lists read without the router lock
    /// (`channels::mirror`), made now if it had none; `None` if there is no such
    /// channel. A mirror has no infos: while [`Router::has_presence_infos`], lists
    /// are read here.
    pub fn presence_mirror(&mut self, name: &str) -> Option<Arc<Mirror>> {
        let m = self.channels.mirror(name)?;
        self.mirrored = true;
        Some(m)
    }

    /// The most users a list names (`--max-presence-members`).
    pub fn max_presence_members(&self) -> usize {
        self.config.max_presence_members
    }

    /// Whether some user has presence info (a list must then be read here, where
    /// the infos are).
    pub fn has_presence_infos(&self) -> bool {
        !self.infos.is_empty()
    }

    /// `user`'s presence info (a token's `info` claim) from now on; the latest
    /// join's wins. Forgotten at the first tick after the user holds no channel
    /// and is in no channel's grace.
    pub fn set_presence_info(&mut self, user: UserId, info: Box<str>) {
        self.infos.map.insert(user, info);
    }
}

/// User → presence info, for users whose token carried one and who hold a
/// channel subscription here (checked at each tick): 24 B and the text per such
/// user, none for the others.
#[derive(Debug, Default)]
pub(super) struct Infos {
    map: HashMap<UserId, Box<str>, IdHashBuilder>,
}

impl Infos {
    pub(super) fn get(&self, user: UserId) -> Option<&str> {
        self.map.get(&user).map(|i| &**i)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Forgets the info of users who hold no channel subscription any more and
    /// are in no channel's grace (a `member_removed` still to come shows it).
    pub(super) fn forget_absent(&mut self, channels: &Channels) {
        if !self.map.is_empty() {
            let grace = channels.users_in_grace();
            self.map
                .retain(|u, _| channels.subscriptions_of(*u) > 0 || grace.contains(u));
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        let slot = std::mem::size_of::<(UserId, Box<str>)>() + 1;
        self.map.capacity() * slot + self.map.values().map(|i| i.len()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests;
