//! Presence queries: who is in a channel (`GET /presence/<channel>`, its counts
//! alone with `/stats`), is a user online (`GET /presence/<id>`), and which of the
//! subjects a user follows are online (`GET /online/<user>`).
//!
//! Read only, from what the router keeps anyway: a channel's members (user →
//! subscribed connections, `channels`) and the users table (user → connections).
//! Nothing is stored for presence, so it costs no memory per membership. A list
//! names at most `RouterConfig::max_presence_members` users (the lowest ids, so
//! every gateway asking gets the same cut) and says it is cut; the counts beside
//! it are always exact.

use serde::{Deserialize, Serialize};

use super::Router;
use crate::{SubjectId, UserId};

/// Whose presence a query asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PresenceOf {
    /// A named channel: its subscribed users.
    Channel(String),
    /// A numeric subject as a user: online or not, with their connections.
    Subject(SubjectId),
}

/// A presence answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Presence {
    /// Users present with their connection counts, by id; empty for a counts-only
    /// query, at most `max_presence_members` otherwise.
    pub users: Vec<(UserId, u32)>,
    /// Users present, exact whatever the cut.
    pub count: u64,
    /// Connections, exact: in a channel every subscribed connection, those
    /// without a user too.
    pub connections: u64,
    /// True when `users` does not name every user present.
    pub cut: bool,
}

impl Router {
    /// The presence of `of`: with `list`, the users (the lowest ids up to
    /// `max_presence_members`), else the counts alone. O(members) for a channel,
    /// O(1) for a subject.
    pub fn presence(&self, of: &PresenceOf, list: bool) -> Presence {
        match of {
            PresenceOf::Channel(name) => self.channel_presence(name, list),
            PresenceOf::Subject(user) => {
                let n = self
                    .users
                    .get(*user)
                    .map_or(0, |s| s.conns.len(&self.overflow) as u32);
                Presence {
                    users: if list && n > 0 {
                        vec![(*user, n)]
                    } else {
                        Vec::new()
                    },
                    count: u64::from(n > 0),
                    connections: u64::from(n),
                    cut: false,
                }
            }
        }
    }

    fn channel_presence(&self, name: &str, list: bool) -> Presence {
        let Some((members, connections)) = self.channels.presence_of(name) else {
            return Presence::default();
        };
        let max = self.config.max_presence_members;
        let mut users = Vec::new();
        if list {
            users.reserve_exact(members.len());
            users.extend(members.iter().map(|(&u, &n)| (u, n)));
            if users.len() > max {
                if max > 0 {
                    users.select_nth_unstable(max - 1);
                }
                users.truncate(max);
                users.shrink_to_fit();
            }
            users.sort_unstable();
        }
        Presence {
            cut: list && members.len() > users.len(),
            users,
            count: members.len() as u64,
            connections: connections as u64,
        }
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
}

#[cfg(test)]
mod tests;
