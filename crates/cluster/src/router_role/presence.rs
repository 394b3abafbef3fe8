//! Membership events over NATS (docs/protocol.md "Presence events"): each on
//! `myriad.presence.<channel>` (the channel's dots are NATS tokens, as on
//! `myriad.pub.<channel>`: `myriad.presence.>` takes them all), payload the
//! event's JSON; and the pushes of events no request was waiting for (a grace
//! that ran out, a gateway gone) taken from the hub on the tick.

use super::RouterRole;
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
