//! Friends online: the grace, one coalesced message per recipient per tick, only
//! opted-in followers, the fan-out cap and the per-message cut.

use super::*;
use crate::{ConnRef, PresenceConfig, RouterConfig, SubscriptionIndex};

const GRACE: Duration = Duration::from_secs(5);

fn router(max_fanout: usize) -> Router {
    shard_router(max_fanout, 0, 1)
}

/// Router shard `shard` of `shards`.
fn shard_router(max_fanout: usize, shard: u16, shards: u16) -> Router {
    let config = RouterConfig {
        presence: PresenceConfig {
            enabled: true,
            grace: GRACE,
            off_prefixes: Vec::new(),
        },
        friends: FriendsConfig {
            max_fanout,
            shard,
            shards,
        },
        ..RouterConfig::default()
    };
    Router::new(config, SubscriptionIndex::default())
}

fn conn(loop_id: u16, token: u32) -> ConnRef {
    ConnRef { loop_id, token }
}

/// `user` opts in on connection `c`.
fn watch(r: &mut Router, user: UserId, c: ConnRef) {
    r.handle_login(user, c);
    let name = wire::channel::friends_channel(user);
    r.handle_join(name.as_str(), c, Some(user), None).unwrap();
}

/// What a tick at `at` pushes: (recipient companion, payload, connections).
fn tick(r: &mut Router, at: Instant) -> Vec<(String, String, Vec<ConnRef>)> {
    r.handle_tick(at);
    r.push_friends(at)
        .into_iter()
        .map(|(m, d)| {
            (
                m.channel.as_deref().unwrap_or("").to_string(),
                String::from_utf8(m.payload.to_vec()).unwrap(),
                d.iter().map(|d| d.conn).collect(),
            )
        })
        .collect()
}

#[test]
fn an_opted_in_follower_hears_online_then_offline_after_the_grace() {
    let t0 = Instant::now();
    let mut r = router(1000);
    // 1 and 2 follow 9; only 1 opts in; 3 follows nobody and opts in.
    r.subscribe(1, 9);
    r.subscribe(2, 9);
    watch(&mut r, 1, conn(0, 1));
    r.handle_login(2, conn(0, 2));
    watch(&mut r, 3, conn(0, 3));
    tick(&mut r, t0);
    r.handle_login(9, conn(1, 1));
    r.handle_login(9, conn(1, 2)); // a second connection changes nothing
    assert_eq!(
        tick(&mut r, t0),
        [(
            "1~friends".to_string(),
            r#"{"online":[9],"offline":[]}"#.to_string(),
            vec![conn(0, 1)]
        )]
    );
    r.handle_logout(9, conn(1, 1), t0);
    r.handle_logout(9, conn(1, 2), t0);
    assert_eq!(tick(&mut r, t0 + GRACE / 2), []);
    let pushed = tick(&mut r, t0 + GRACE);
    assert_eq!(pushed.len(), 1);
    assert_eq!(pushed[0].1, r#"{"online":[],"offline":[9]}"#);
    assert_eq!(r.friends_stats().messages, 2);
}

#[test]
fn back_within_the_grace_announces_nothing() {
    let t0 = Instant::now();
    let mut r = router(1000);
    r.subscribe(1, 9);
    watch(&mut r, 1, conn(0, 1));
    r.handle_login(9, conn(1, 1));
    assert_eq!(tick(&mut r, t0).len(), 1);
    r.handle_logout(9, conn(1, 1), t0);
    r.handle_login(9, conn(2, 1)); // through another gateway
    assert_eq!(tick(&mut r, t0 + GRACE * 3), []);
    // Gone for good later: one offline.
    r.handle_logout(9, conn(2, 1), t0 + GRACE * 3);
    let pushed = tick(&mut r, t0 + GRACE * 5);
    assert_eq!(pushed[0].1, r#"{"online":[],"offline":[9]}"#);
}

#[test]
fn a_tick_s_changes_leave_as_one_message_per_recipient_the_last_change_winning() {
    let t0 = Instant::now();
    let mut r = router(1000);
    for followed in [7, 8, 9] {
        r.subscribe(1, followed);
    }
    watch(&mut r, 1, conn(0, 1));
    r.handle_login(7, conn(1, 7));
    r.handle_login(8, conn(1, 8));
    r.handle_login(9, conn(1, 9));
    let pushed = tick(&mut r, t0);
    assert_eq!(pushed.len(), 1);
    assert_eq!(pushed[0].1, r#"{"online":[7,8,9],"offline":[]}"#);
    // 7 leaves (grace over) and comes back within the same tick: online wins.
    r.handle_logout(7, conn(1, 7), t0);
    r.handle_tick(t0 + GRACE);
    r.handle_login(7, conn(1, 17));
    let pushed = tick(&mut r, t0 + GRACE);
    assert_eq!(pushed[0].1, r#"{"online":[7],"offline":[]}"#);
}

#[test]
fn a_change_reaches_at_most_max_fanout_followers_and_a_message_names_at_most_the_cap() {
    let t0 = Instant::now();
    let mut r = router(2);
    for follower in 1..=3 {
        r.subscribe(follower, 9);
        watch(&mut r, follower, conn(0, follower as u32));
    }
    r.handle_login(9, conn(1, 1));
    assert_eq!(tick(&mut r, t0).len(), 2);
    assert_eq!(r.friends_stats().dropped_fanout, 1);

    let mut r = router(1000);
    let n = MAX_CHANGES_PER_MESSAGE as u64 + 3;
    for followed in 100..100 + n {
        r.subscribe(1, followed);
    }
    watch(&mut r, 1, conn(0, 1));
    for followed in 100..100 + n {
        r.handle_login(followed, conn(1, followed as u32));
    }
    let pushed = tick(&mut r, t0);
    let json = &pushed[0].1;
    assert!(json.ends_with(r#"],"offline":[],"cut":true}"#), "{json}");
    // The newest kept: the first three left out.
    let first = 100 + 3;
    assert!(
        json.starts_with(&format!(r#"{{"online":[{first},"#)),
        "{json}"
    );
    assert_eq!(json.matches(',').count(), MAX_CHANGES_PER_MESSAGE + 1);
    assert_eq!(r.friends_stats().dropped_cut, 3);
}

#[test]
fn nothing_is_recorded_while_nobody_watches_or_with_fan_out_zero() {
    let t0 = Instant::now();
    let mut r = router(1000);
    r.subscribe(1, 9);
    r.handle_login(9, conn(1, 1));
    assert_eq!(r.friends_stats().changes, 0);
    let mut off = router(0);
    off.subscribe(1, 9);
    watch(&mut off, 1, conn(0, 1));
    off.handle_login(9, conn(1, 1));
    assert_eq!(tick(&mut off, t0), []);
    assert_eq!(off.friends_stats().changes, 0);
}

#[test]
fn the_watcher_set_follows_the_companion_s_connections() {
    let t0 = Instant::now();
    let mut r = router(1000);
    r.subscribe(1, 9);
    watch(&mut r, 1, conn(0, 1));
    r.handle_leave("1~friends", conn(0, 1), t0);
    assert!(!r.channels().watches_friends(1));
    watch(&mut r, 1, conn(0, 2));
    // A dead gateway takes its companions' connections with it.
    r.logout_where(|c| c.loop_id == 0, t0);
    assert!(!r.channels().watches_friends(1));
    // And a friends companion is no channel whose membership is announced.
    assert!(r
        .take_presence_events()
        .iter()
        .all(|e| !e.channel.ends_with("~friends")));
}

#[test]
fn a_tick_publishes_at_most_its_cap_and_the_rest_wait_for_the_next_in_one_message() {
    let t0 = Instant::now();
    let mut r = router(MAX_MESSAGES_PER_TICK + 10);
    let followers = MAX_MESSAGES_PER_TICK as u64 + 5;
    for f in 1..=followers {
        r.subscribe(f, 1_000_000);
        r.subscribe(f, 1_000_001);
        watch(&mut r, f, conn(0, f as u32));
    }
    r.handle_login(1_000_000, conn(1, 1));
    assert_eq!(tick(&mut r, t0).len(), MAX_MESSAGES_PER_TICK);
    assert_eq!(r.friends_stats().deferred, 5);
    // The five left over get the next tick's change in the same message.
    r.handle_login(1_000_001, conn(1, 2));
    let pushed = tick(&mut r, t0);
    let waited: Vec<&(String, String, Vec<ConnRef>)> = pushed
        .iter()
        .filter(|p| p.1 == r#"{"online":[1000000,1000001],"offline":[]}"#)
        .collect();
    assert_eq!(waited.len(), 5);
    assert_eq!(pushed.len(), MAX_MESSAGES_PER_TICK);
    assert_eq!(tick(&mut r, t0).len(), 5);
    assert_eq!(tick(&mut r, t0), []);
}

#[test]
fn a_follower_another_shard_owns_is_handed_to_that_shard_which_tells_only_a_watcher() {
    let t0 = Instant::now();
    // Two shards: even users are shard 0's, odd users shard 1's. 9 is shard 1's
    // user (its followers are there); 2 (shard 0's) and 3 and 5 (shard 1's) follow it.
    let mut zero = shard_router(1000, 0, 2);
    let mut one = shard_router(1000, 1, 2);
    for follower in [2, 3, 5] {
        one.subscribe(follower, 9);
    }
    watch(&mut zero, 2, conn(0, 2));
    watch(&mut one, 3, conn(1, 3));
    // 9 logs in on its shard, which has no watcher of 2's (it cannot see them).
    one.handle_login(9, conn(1, 9));
    let pushed = tick(&mut one, t0);
    assert_eq!(
        pushed,
        [(
            "3~friends".to_string(),
            r#"{"online":[9],"offline":[]}"#.to_string(),
            vec![conn(1, 3)]
        )],
        "its own watcher is told at once, 5 (its own, not watching) not at all"
    );
    let for_zero = one.take_friends_for_shards();
    assert_eq!(
        for_zero,
        [(2, r#"{"online":[9],"offline":[]}"#.to_string())]
    );
    assert!(one.take_friends_for_shards().is_empty(), "taken once");
    // Shard 0 publishes it to 2's companion; a user of its own not watching gets nothing.
    let (msg, deliveries) = zero
        .push_friends_from_shard(2, for_zero[0].1.clone(), t0)
        .expect("2 watches");
    assert_eq!(msg.channel.as_deref(), Some("2~friends"));
    assert_eq!(
        deliveries.iter().map(|d| d.conn).collect::<Vec<_>>(),
        [conn(0, 2)]
    );
    assert!(zero.push_friends_from_shard(4, "{}".into(), t0).is_none());
    assert_eq!(zero.friends_stats().messages, 1);
    assert_eq!(zero.channels().len(), 1, "no companion made for 4");
}
