use super::*;
use crate::{Reach, Router, RouterConfig, SubscriptionIndex};
use std::time::Duration;

fn router() -> Router {
    Router::new(
        RouterConfig {
            history: 4,
            history_ttl: Duration::from_secs(60),
            ..RouterConfig::default()
        },
        SubscriptionIndex::default(),
    )
}

fn conn(token: u32) -> ConnRef {
    ConnRef { loop_id: 0, token }
}

fn publish(r: &mut Router, name: &str, body: &str, now: Instant) -> (PublishCounts, Vec<Delivery>) {
    let msg = Arc::new(Message::to_channel(
        name,
        bytes::Bytes::from(body.to_string()),
    ));
    let mut out = Vec::new();
    let counts = r.handle_publish(&msg, &Reach::Channel, now, &mut |d| out.push(d));
    out.sort_by_key(|d| d.conn);
    (counts, out)
}

#[test]
fn a_publish_reaches_the_subscribed_connections_of_that_name_only() {
    let mut r = router();
    let now = Instant::now();
    r.handle_join("room:1", conn(1), Some(7), None).unwrap();
    r.handle_join("room:1", conn(2), Some(7), None).unwrap();
    r.handle_join("room:1", conn(3), None, None).unwrap();
    r.handle_join("room:2", conn(4), Some(8), None).unwrap();
    let (counts, out) = publish(&mut r, "room:1", "hi", now);
    assert_eq!(
        counts,
        PublishCounts {
            connections: 3,
            users: 1
        }
    );
    assert_eq!(
        out.iter().map(|d| d.conn.token).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(out.iter().all(|d| d.seq == 1));
    let (counts, out) = publish(&mut r, "room:2", "x", now);
    assert_eq!(
        counts,
        PublishCounts {
            connections: 1,
            users: 1
        }
    );
    assert_eq!(out[0].seq, 1, "each channel numbers its own messages");
    assert_ne!(out[0].epoch, r.channels().position("room:1").unwrap().epoch);
    assert_eq!(r.stats().channel_subscriptions, 4);
}

#[test]
fn joining_with_a_position_reads_what_was_missed_and_a_foreign_epoch_is_a_gap() {
    let mut r = router();
    let now = Instant::now();
    for body in ["a", "b", "c"] {
        publish(&mut r, "news", body, now);
    }
    let epoch = r.channels().position("news").unwrap().epoch;
    let read = r
        .handle_join("news", conn(1), None, Some((Some(epoch), 1)))
        .unwrap();
    assert_eq!(
        read.messages.iter().map(|m| m.0).collect::<Vec<_>>(),
        [2, 3]
    );
    assert!(!read.gap);
    assert_eq!((read.epoch, read.last), (Some(epoch), 3));
    let read = r
        .handle_join("news", conn(2), None, Some((Some(epoch ^ 1), 1)))
        .unwrap();
    assert!(read.gap, "another epoch cannot be resumed");
    assert_eq!(read.messages.len(), 3, "everything kept is sent instead");
    let read = r.handle_join("news", conn(3), None, None).unwrap();
    assert!(read.messages.is_empty() && !read.gap && read.last == 3);
}

#[test]
fn history_reads_the_newest_or_pages_forward_from_a_position() {
    let mut r = router();
    let now = Instant::now();
    for body in ["1", "2", "3", "4", "5", "6"] {
        publish(&mut r, "feed", body, now);
    }
    // The ring keeps 4 (3..=6).
    let newest = r.channel_history("feed", None, 2);
    assert_eq!(
        newest.messages.iter().map(|m| m.0).collect::<Vec<_>>(),
        [5, 6]
    );
    assert_eq!(newest.last, 6);
    let page = r.channel_history("feed", Some((None, 3)), 2);
    assert_eq!(
        page.messages.iter().map(|m| m.0).collect::<Vec<_>>(),
        [4, 5]
    );
    assert_eq!(page.last, 5, "a cut page says where to read on from");
    assert!(!page.gap);
    let lost = r.channel_history("feed", Some((None, 1)), 10);
    assert!(lost.gap, "number 2 is no longer kept");
    let unknown = r.channel_history("nobody", Some((None, 4)), 10);
    assert!(unknown.gap && unknown.messages.is_empty());
}

#[test]
fn a_channel_left_empty_is_forgotten_after_the_ttl_with_its_history() {
    let mut r = router();
    let t0 = Instant::now();
    r.handle_join("lobby", conn(1), Some(1), None).unwrap();
    publish(&mut r, "lobby", "m", t0);
    assert!(r.handle_leave("lobby", conn(1), t0));
    assert!(!r.handle_leave("lobby", conn(1), t0), "left once");
    r.handle_tick(t0 + Duration::from_secs(30));
    assert_eq!(r.channels().len(), 1, "kept within the ttl");
    // Joined again and left later: the old idle entry is stale.
    r.handle_join("lobby", conn(2), None, None).unwrap();
    r.handle_leave("lobby", conn(2), t0 + Duration::from_secs(50));
    r.handle_tick(t0 + Duration::from_secs(61));
    assert_eq!(r.channels().len(), 1);
    r.handle_tick(t0 + Duration::from_secs(111));
    assert!(r.channels().is_empty());
    assert_eq!(
        r.stats().history_messages,
        0,
        "its history's bytes are given back"
    );
}

#[test]
fn a_publish_nobody_holds_is_kept_for_a_later_reader() {
    let mut r = router();
    let t0 = Instant::now();
    let (counts, out) = publish(&mut r, "later", "kept", t0);
    assert_eq!((counts.connections, out.len()), (0, 0));
    assert_eq!(r.channel_history("later", None, 10).messages.len(), 1);
    r.handle_tick(t0 + Duration::from_secs(61));
    assert!(r.channels().is_empty());
}

#[test]
fn a_dead_gateway_leaves_its_channels_and_members_are_rebuilt() {
    let mut r = router();
    let now = Instant::now();
    let (a, b) = (
        ConnRef {
            loop_id: 1,
            token: 1,
        },
        ConnRef {
            loop_id: 2,
            token: 1,
        },
    );
    r.handle_login(5, a);
    r.handle_login(5, b);
    r.handle_join("room", a, Some(5), None).unwrap();
    r.handle_join("room", b, Some(5), None).unwrap();
    r.logout_where(|c| c.loop_id == 1, now);
    assert_eq!(r.channels().connections("room"), 1);
    assert_eq!(r.channels().members("room"), [(5, 1)]);
    assert_eq!(r.stats().channel_subscriptions, 1);
}

#[test]
fn a_channel_nobody_published_to_keeps_no_ring() {
    // 64 bytes an entry of the channels' map: the ring is boxed at the first
    // message (a quiet room would pay 56 bytes more for an empty one).
    assert!(std::mem::size_of::<Channel>() <= 64);
    let channel = Channel::new(9);
    assert!(channel.ring.is_none());
    let position = channel.read_ring(|ring| (ring.epoch(), ring.last()));
    assert_eq!(position, (9, 0));
}

#[test]
fn a_new_channel_keeps_the_name_it_is_given_and_a_known_one_its_own() {
    let mut r = router();
    let name: Arc<str> = "shared:room".into();
    r.handle_join(name.clone(), conn(1), None, None).unwrap();
    assert_eq!(
        Arc::strong_count(&name),
        2,
        "the channel's name is this allocation"
    );
    let again: Arc<str> = "shared:room".into();
    r.handle_join(again.clone(), conn(2), None, None).unwrap();
    assert_eq!(
        Arc::strong_count(&again),
        1,
        "a known channel keeps its own name"
    );
    assert_eq!(Arc::strong_count(&name), 2);
}

#[test]
fn a_slot_of_the_channels_map_is_64_bytes() {
    assert_eq!(std::mem::size_of::<(Arc<str>, Channel)>(), 64);
}

#[test]
fn a_publish_to_an_idle_channel_starts_its_ttl_again() {
    let mut r = router();
    let t0 = Instant::now();
    r.handle_join("quiet", conn(1), None, None).unwrap();
    r.handle_leave("quiet", conn(1), t0);
    publish(&mut r, "quiet", "late", t0 + Duration::from_secs(50));
    r.handle_tick(t0 + Duration::from_secs(61));
    assert_eq!(
        r.channel_history("quiet", None, 10).messages.len(),
        1,
        "kept"
    );
    r.handle_tick(t0 + Duration::from_secs(111));
    assert!(r.channels().is_empty());
}
