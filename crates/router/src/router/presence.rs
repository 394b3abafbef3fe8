//! The router's membership events (see `channels::membership`): taken by the
//! caller, and pushed to a channel's presence companion.

use super::Router;
use crate::channels::{EventKind, Keep, PresenceEvent};
use crate::{ConnRef, Delivery, Message, UserId};
use std::sync::Arc;
use std::time::Instant;

impl Router {
    /// The membership changes of named channels since the last call, in order
    /// (none unless `RouterConfig::presence.enabled`; a caller that enables them
    /// takes them after every join, leave, `logout_where` and tick).
    pub fn take_presence_events(&mut self) -> Vec<PresenceEvent> {
        self.channels.take_events()
    }

    /// The presence info `user` joined with: a member's, kept while it holds a
    /// channel or is in a channel's grace (its `member_removed` shows it too).
    pub fn presence_info(&self, user: UserId) -> Option<&str> {
        self.infos.get(user)
    }

    /// Whether `conn` is one of `user`'s online connections (O(the user's
    /// connections)): a presence member's client event names the member only when
    /// it came from one of them.
    pub fn is_connection_of(&self, user: UserId, conn: ConnRef) -> bool {
        let mut found = false;
        if let Some(s) = self.users.get(user) {
            s.conns.for_each(&self.overflow, |c| found |= c == conn);
        }
        found
    }

    /// Pushes a `member_*` event to the subscribers of its channel's presence
    /// companion (`wire::channel::presence_channel`), as a message of that channel
    /// (`+<user>` or `-<user>`; a user with presence info says it after a space,
    /// `+<user> <info>`, for clients that show it with the join, as Pusher's
    /// `member_added` does, and on the leave, where a Pusher user id that is not
    /// a number rides in it: `wire::pusher_user`), handing `deliver` each delivery. Nothing is
    /// published (and no history kept) while the companion has no subscriber, and
    /// nothing is journaled: presence is not durable. Returns the message, if any.
    pub fn push_presence(
        &mut self,
        event: &PresenceEvent,
        now: Instant,
        deliver: &mut impl FnMut(Delivery),
    ) -> Option<Arc<Message>> {
        let sign = match event.kind {
            EventKind::MemberAdded => '+',
            EventKind::MemberRemoved => '-',
            EventKind::ChannelOccupied | EventKind::ChannelVacated => return None,
        };
        let companion = wire::channel::presence_channel(&event.channel);
        if self.channels.connections(&companion) == 0 {
            return None;
        }
        let user = event.user.unwrap_or(0);
        let payload = match self.infos.get(user) {
            Some(info) => format!("{sign}{user} {info}"),
            None => format!("{sign}{user}"),
        };
        let msg = Arc::new(Message::to_channel(&companion, payload.into()));
        let keep = Keep::within(&self.config, &mut self.totals, &mut self.epochs, None);
        let (counts, _) = self.channels.publish(&companion, &msg, keep, now, deliver);
        self.deliveries += u64::from(counts.connections);
        Some(msg)
    }
}
