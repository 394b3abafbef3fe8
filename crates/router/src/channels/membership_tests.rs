//! Membership events: once per user (not per connection), the grace, a gateway's
//! death, off prefixes, and pushes to a channel's presence companion.

use super::*;
use crate::{Router, RouterConfig, SubscriptionIndex};
use std::time::Duration;

const GRACE: Duration = Duration::from_secs(5);

fn router(grace: Duration, off: &[&str]) -> Router {
    let config = RouterConfig {
        presence: PresenceConfig {
            enabled: true,
            grace,
            off_prefixes: off.iter().map(|p| p.to_string()).collect(),
        },
        ..RouterConfig::default()
    };
    Router::new(config, SubscriptionIndex::default())
}

fn conn(loop_id: u16, token: u32) -> ConnRef {
    ConnRef { loop_id, token }
}

fn ev(kind: EventKind, channel: &str, user: Option<UserId>) -> PresenceEvent {
    PresenceEvent {
        kind,
        channel: channel.into(),
        user,
    }
}

fn added(c: &str, u: UserId) -> PresenceEvent {
    ev(EventKind::MemberAdded, c, Some(u))
}

fn removed(c: &str, u: UserId) -> PresenceEvent {
    ev(EventKind::MemberRemoved, c, Some(u))
}

fn occupied(c: &str) -> PresenceEvent {
    ev(EventKind::ChannelOccupied, c, None)
}

fn vacated(c: &str) -> PresenceEvent {
    ev(EventKind::ChannelVacated, c, None)
}

#[test]
fn one_join_and_one_leave_per_user_however_many_connections() {
    let t0 = Instant::now();
    let mut r = router(Duration::ZERO, &[]);
    r.handle_join("room", conn(0, 1), Some(7), None).unwrap();
    r.handle_join("room", conn(1, 2), Some(7), None).unwrap();
    r.handle_join("room", conn(0, 3), Some(8), None).unwrap();
    // A connection without a user is nobody's membership.
    r.handle_join("room", conn(0, 4), None, None).unwrap();
    assert_eq!(
        r.take_presence_events(),
        [occupied("room"), added("room", 7), added("room", 8)]
    );
    assert!(r.handle_leave("room", conn(0, 1), t0));
    assert_eq!(r.take_presence_events(), []);
    r.handle_leave("room", conn(1, 2), t0);
    r.handle_leave("room", conn(0, 3), t0);
    assert_eq!(
        r.take_presence_events(),
        [removed("room", 7), removed("room", 8), vacated("room")]
    );
    // Leaving what is not held announces nothing.
    r.handle_leave("room", conn(0, 3), t0);
    assert_eq!(r.take_presence_events(), []);
}

#[test]
fn a_user_back_within_the_grace_is_never_announced_gone() {
    let t0 = Instant::now();
    let mut r = router(GRACE, &[]);
    r.handle_join("room", conn(0, 1), Some(7), None).unwrap();
    r.take_presence_events();
    r.handle_leave("room", conn(0, 1), t0);
    r.handle_tick(t0 + GRACE / 2);
    assert_eq!(r.take_presence_events(), []);
    r.handle_join("room", conn(1, 9), Some(7), None).unwrap();
    r.handle_tick(t0 + GRACE * 3);
    assert_eq!(r.take_presence_events(), []);
    assert_eq!(r.channels().members("room"), [(7, 1)]);
}

#[test]
fn a_user_gone_past_the_grace_is_announced_once_and_the_channel_vacated() {
    let t0 = Instant::now();
    let mut r = router(GRACE, &[]);
    r.handle_join("room", conn(0, 1), Some(7), None).unwrap();
    r.take_presence_events();
    r.handle_leave("room", conn(0, 1), t0);
    // Still announced: a newcomer does not make the channel occupied again.
    r.handle_join("room", conn(0, 2), Some(8), None).unwrap();
    r.handle_leave("room", conn(0, 2), t0 + GRACE / 2);
    assert_eq!(r.take_presence_events(), [added("room", 8)]);
    r.handle_tick(t0 + GRACE);
    assert_eq!(r.take_presence_events(), [removed("room", 7)]);
    r.handle_tick(t0 + GRACE * 2);
    assert_eq!(
        r.take_presence_events(),
        [removed("room", 8), vacated("room")]
    );
    r.handle_tick(t0 + GRACE * 4);
    assert_eq!(r.take_presence_events(), []);
}

#[test]
fn a_user_who_comes_back_and_leaves_again_is_announced_after_the_last_grace() {
    let t0 = Instant::now();
    let mut r = router(GRACE, &[]);
    r.handle_join("room", conn(0, 1), Some(7), None).unwrap();
    r.handle_leave("room", conn(0, 1), t0);
    r.handle_join("room", conn(0, 2), Some(7), None).unwrap();
    r.handle_leave("room", conn(0, 2), t0 + GRACE / 2);
    r.take_presence_events();
    r.handle_tick(t0 + GRACE);
    assert_eq!(r.take_presence_events(), []);
    r.handle_tick(t0 + GRACE + GRACE / 2);
    assert_eq!(
        r.take_presence_events(),
        [removed("room", 7), vacated("room")]
    );
}

#[test]
fn a_dead_gateway_s_users_are_announced_gone_after_the_grace() {
    let t0 = Instant::now();
    let mut r = router(GRACE, &[]);
    // User 7 on gateway loops 0 and 1, user 8 on loop 0 only.
    r.handle_login(7, conn(0, 1));
    r.handle_login(7, conn(1, 1));
    r.handle_login(8, conn(0, 2));
    r.handle_join("room", conn(0, 1), Some(7), None).unwrap();
    r.handle_join("room", conn(1, 1), Some(7), None).unwrap();
    r.handle_join("room", conn(0, 2), Some(8), None).unwrap();
    r.take_presence_events();
    r.logout_where(|c| c.loop_id == 0, t0);
    assert_eq!(r.take_presence_events(), []);
    r.handle_tick(t0 + GRACE);
    assert_eq!(r.take_presence_events(), [removed("room", 8)]);
    assert_eq!(r.channels().members("room"), [(7, 1)]);
}

#[test]
fn the_channel_outlives_the_grace_of_its_last_user_then_expires() {
    let t0 = Instant::now();
    let config = RouterConfig {
        history_ttl: Duration::from_secs(1),
        presence: PresenceConfig {
            enabled: true,
            grace: GRACE,
            off_prefixes: Vec::new(),
        },
        ..RouterConfig::default()
    };
    let mut r = Router::new(config, SubscriptionIndex::default());
    r.handle_join("room", conn(0, 1), Some(7), None).unwrap();
    r.handle_leave("room", conn(0, 1), t0);
    r.handle_tick(t0 + Duration::from_secs(2));
    assert_eq!(r.channels().len(), 1, "kept while its user is in grace");
    r.handle_tick(t0 + GRACE);
    assert_eq!(r.channels().len(), 1, "its idle ttl starts after the grace");
    r.handle_tick(t0 + GRACE + Duration::from_secs(1));
    assert_eq!(r.channels().len(), 0);
}

#[test]
fn off_prefixes_companions_and_a_disabled_router_announce_nothing() {
    let t0 = Instant::now();
    let mut r = router(Duration::ZERO, &["big:"]);
    r.handle_join("big:stadium", conn(0, 1), Some(7), None)
        .unwrap();
    let companion = wire::channel::presence_channel("room");
    r.handle_join(companion.as_str(), conn(0, 1), Some(7), None)
        .unwrap();
    r.handle_leave("big:stadium", conn(0, 1), t0);
    assert_eq!(r.take_presence_events(), []);
    let mut off = Router::new(RouterConfig::default(), SubscriptionIndex::default());
    off.handle_join("room", conn(0, 1), Some(7), None).unwrap();
    assert_eq!(off.take_presence_events(), []);
}

#[test]
fn member_events_reach_the_companion_s_subscribers_only() {
    let t0 = Instant::now();
    let mut r = router(Duration::ZERO, &[]);
    let watcher = conn(0, 1);
    let companion = wire::channel::presence_channel("room");
    r.handle_join(companion.as_str(), watcher, Some(1), None)
        .unwrap();
    r.handle_join("room", conn(0, 2), Some(42), None).unwrap();
    r.handle_leave("room", conn(0, 2), t0);
    let mut got = Vec::new();
    for event in r.take_presence_events() {
        let mut to = Vec::new();
        if let Some(msg) = r.push_presence(&event, t0, &mut |d| to.push((d.conn, d.seq))) {
            got.push((msg.payload.clone(), to));
        }
    }
    assert_eq!(
        got,
        [
            (bytes::Bytes::from("+42"), vec![(watcher, 1)]),
            (bytes::Bytes::from("-42"), vec![(watcher, 2)]),
        ]
    );
    // Nobody watching: nothing is published, no history made.
    let mut quiet = router(Duration::ZERO, &[]);
    quiet
        .handle_join("room", conn(0, 2), Some(42), None)
        .unwrap();
    for event in quiet.take_presence_events() {
        assert!(quiet.push_presence(&event, t0, &mut |_| {}).is_none());
    }
    assert_eq!(quiet.channels().position(&companion), None);
}

#[test]
fn a_leave_after_the_grace_still_names_the_user_s_info() {
    // A Pusher user id that is not a number rides in the info: `member_removed`
    // needs it after the grace as much as `member_added` did.
    let t0 = Instant::now();
    let grace = Duration::from_secs(5);
    let mut r = router(grace, &[]);
    let watcher = conn(0, 1);
    let companion = wire::channel::presence_channel("room");
    r.handle_join(companion.as_str(), watcher, Some(1), None)
        .unwrap();
    r.set_presence_info(42, "{\"n\":1}".into());
    r.handle_join("room", conn(0, 2), Some(42), None).unwrap();
    r.handle_leave("room", conn(0, 2), t0);
    r.handle_tick(t0 + Duration::from_secs(1));
    r.handle_tick(t0 + grace + Duration::from_secs(1));
    let payloads: Vec<bytes::Bytes> = r
        .take_presence_events()
        .iter()
        .filter_map(|e| r.push_presence(e, t0, &mut |_| {}))
        .map(|m| m.payload.clone())
        .collect();
    assert_eq!(
        payloads,
        [
            bytes::Bytes::from("+42 {\"n\":1}"),
            bytes::Bytes::from("-42 {\"n\":1}")
        ]
    );
}
