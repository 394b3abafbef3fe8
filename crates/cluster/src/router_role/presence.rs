//! Membership events over NATS (docs/protocol.md "Presence events"): each on
//! `myriad.presence.<channel>` (the channel's dots are NATS tokens, as on
//! `myriad.pub.<channel>`: `myriad.presence.>` takes them all), payload the
//! event's JSON; the pushes of events no request was waiting for (a grace
//! that ran out, a gateway gone) taken from the hub on the tick; and the friends
//! online messages a tick made for other shards' users, sent to those shards.

use super::RouterRole;
use crate::codec::{self, ToShard};
use crate::subjects;
use bytes::Bytes;
use router::PresenceEvent;

/// One event as a NATS message: its subject and its JSON.
pub(super) fn message(event: &PresenceEvent, time_ms: u64) -> (String, Bytes) {
    let json = hub::presence::event_json(event, time_ms).to_string();
    (subjects::presence(&event.channel), Bytes::from(json))
}

impl RouterRole {
    /// Queues the pushes the hub kept for want of a caller (see `hub::presence`).
    pub(super) fn presence_pushes(&mut self) {
        let mut batches = Vec::new();
        self.hub
            .take_presence_mail(&mut |loop_id, mail| batches.push((loop_id, mail)));
        if !batches.is_empty() {
            self.queue_deliveries(batches, crate::timing::unix_ns());
        }
    }

    /// Sends the friends messages the hub's ticks made for other shards' users,
    /// one [`ToShard::Friends`] per shard (`router::router::friends`).
    pub(super) fn friends_to_shards(&mut self) {
        let items = self.hub.take_friends_for_shards();
        if items.is_empty() || self.shards.count <= 1 {
            return;
        }
        let mut per_shard: Vec<Vec<(u64, String)>> =
            vec![Vec::new(); usize::from(self.shards.count)];
        for (user, payload) in items {
            per_shard[usize::from(self.shards.owner(user))].push((user, payload));
        }
        for (shard, items) in per_shard.into_iter().enumerate() {
            if items.is_empty() {
                continue;
            }
            let msg = ToShard::Friends {
                from: self.shards.index,
                items,
            };
            self.out.push((
                subjects::forward(shard as u16),
                codec::encode_to_shard(&msg),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use router::EventKind;

    #[test]
    fn an_event_goes_on_its_channel_s_subject_as_json() {
        let event = PresenceEvent {
            kind: EventKind::MemberAdded,
            channel: "room.1".into(),
            user: Some(42),
        };
        let (subject, payload) = message(&event, 7);
        assert_eq!(subject, "myriad.presence.room.1");
        let json: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"event":"member_added","channel":"room.1","user":42,"time_ms":7})
        );
        let odd = PresenceEvent {
            kind: EventKind::ChannelVacated,
            channel: "a..b".into(),
            user: None,
        };
        assert_eq!(message(&odd, 7).0, "myriad.presence");
    }
}
