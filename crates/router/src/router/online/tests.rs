use super::*;
use crate::{ConnRef, RouterConfig, SubscriptionIndex};
use std::time::Instant;

fn router(max_presence_members: usize) -> Router {
    let config = RouterConfig {
        max_presence_members,
        ..RouterConfig::default()
    };
    Router::new(config, SubscriptionIndex::default())
}

fn conn(token: u32) -> ConnRef {
    ConnRef { loop_id: 0, token }
}

/// A list as (user, connections).
fn pairs(p: &Presence) -> Vec<(UserId, u32)> {
    p.users.iter().map(|m| (m.user, m.connections)).collect()
}

fn channel(name: &str) -> PresenceOf {
    PresenceOf::Channel(name.to_string())
}

#[test]
fn a_channel_lists_its_users_with_their_connections_and_counts_every_connection() {
    let mut r = router(10);
    for token in 1..=3 {
        r.handle_join("room", conn(token), Some(42), None).unwrap();
    }
    r.handle_join("room", conn(4), Some(7), None).unwrap();
    r.handle_join("room", conn(5), None, None).unwrap();
    r.handle_join("other", conn(6), Some(8), None).unwrap();
    let list = r.presence(&channel("room"), true);
    assert_eq!(
        list,
        Presence {
            users: vec![Member::new(7, 1), Member::new(42, 3)],
            count: 2,
            connections: 5,
            cut: false,
        }
    );
    let stats = r.presence(&channel("room"), false);
    assert_eq!(
        (stats.users.len(), stats.count, stats.connections),
        (0, 2, 5)
    );
    assert!(!stats.cut);
    assert_eq!(r.presence(&channel("nowhere"), true), Presence::default());
}

#[test]
fn a_leave_takes_a_user_out_with_their_last_connection_only() {
    let mut r = router(10);
    let now = Instant::now();
    r.handle_join("room", conn(1), Some(42), None).unwrap();
    r.handle_join("room", conn(2), Some(42), None).unwrap();
    r.handle_leave("room", conn(1), now);
    assert_eq!(pairs(&r.presence(&channel("room"), true)), vec![(42, 1)]);
    r.handle_leave("room", conn(2), now);
    let p = r.presence(&channel("room"), true);
    assert_eq!((p.users.len(), p.count, p.connections), (0, 0, 0));
}

#[test]
fn a_list_past_the_bound_names_the_lowest_ids_and_says_it_is_cut() {
    let mut r = router(3);
    for user in (1..=10u64).rev() {
        r.handle_join("big", conn(user as u32), Some(user * 10), None)
            .unwrap();
    }
    let p = r.presence(&channel("big"), true);
    assert_eq!(pairs(&p), vec![(10, 1), (20, 1), (30, 1)]);
    assert_eq!((p.count, p.connections, p.cut), (10, 10, true));
    assert!(
        !r.presence(&channel("big"), false).cut,
        "stats are never cut"
    );
    let mut none = router(0);
    none.handle_join("big", conn(1), Some(1), None).unwrap();
    let p = none.presence(&channel("big"), true);
    assert_eq!((p.users.len(), p.count, p.cut), (0, 1, true));
}

#[test]
fn a_subject_is_present_while_the_user_has_a_connection() {
    let mut r = router(10);
    let now = Instant::now();
    let of = PresenceOf::Subject(42);
    assert_eq!(r.presence(&of, true), Presence::default());
    r.handle_login(42, conn(1));
    r.handle_login(42, conn(2));
    let p = r.presence(&of, true);
    assert_eq!((pairs(&p), p.count, p.connections), (vec![(42, 2)], 1, 2));
    assert!(r.presence(&of, false).users.is_empty());
    r.handle_logout(42, conn(1), now);
    r.handle_logout(42, conn(2), now);
    assert_eq!(r.presence(&of, true), Presence::default());
}

#[test]
fn online_among_keeps_the_subjects_with_a_connection_in_order() {
    let mut r = router(10);
    let now = Instant::now();
    r.handle_login(3, conn(1));
    r.handle_login(9, conn(2));
    r.handle_login(9, conn(3));
    r.handle_login(5, conn(4));
    r.handle_logout(5, conn(4), now);
    assert_eq!(r.online_among(&[1, 3, 5, 9, 11]), vec![3, 9]);
    assert!(r.online_among(&[]).is_empty());
}

#[test]
fn a_dead_gateways_members_leave_the_answer() {
    let mut r = router(10);
    let now = Instant::now();
    let dead = ConnRef {
        loop_id: 1,
        token: 1,
    };
    r.handle_login(42, conn(1));
    r.handle_login(42, dead);
    r.handle_login(7, conn(9));
    r.handle_join("room", conn(1), Some(42), None).unwrap();
    r.handle_join("room", dead, Some(42), None).unwrap();
    r.handle_join("room", conn(9), Some(7), None).unwrap();
    r.logout_where(|c| c.loop_id == 1, now);
    let p = r.presence(&channel("room"), true);
    assert_eq!((pairs(&p), p.connections), (vec![(7, 1), (42, 1)], 2));
    r.logout_where(|c| c.loop_id == 0, now);
    assert_eq!(r.presence(&channel("room"), true), Presence::default());
    assert!(r.online_among(&[7, 42]).is_empty());
}

/// With router shards a channel's shard holds no login of its members (a user's
/// logins go to the user's shard): a gateway's death still takes exactly its
/// connections' users out, and their counts across channels.
#[test]
fn a_dead_gateways_members_leave_on_a_shard_without_their_logins() {
    let mut r = router(10);
    let now = Instant::now();
    let dead = |token| ConnRef { loop_id: 1, token };
    r.handle_join("room", conn(1), Some(42), None).unwrap();
    r.handle_join("room", dead(1), Some(42), None).unwrap();
    r.handle_join("room", dead(2), Some(5), None).unwrap();
    r.handle_join("hall", dead(2), Some(5), None).unwrap();
    r.handle_join("room", conn(2), Some(7), None).unwrap();
    r.logout_where(|c| c.loop_id == 1, now);
    let p = r.presence(&channel("room"), true);
    assert_eq!((pairs(&p), p.connections), (vec![(7, 1), (42, 1)], 2));
    assert_eq!(r.presence(&channel("hall"), false).count, 0);
    assert_eq!(r.channels().subscriptions_of(42), 1);
    assert_eq!(r.channels().subscriptions_of(5), 0);
    // The survivors leave as usual: nothing of the dead connections is left over.
    r.handle_leave("room", conn(1), now);
    r.handle_leave("room", conn(2), now);
    assert_eq!(r.presence(&channel("room"), true), Presence::default());
    assert_eq!(r.channels().subscribed_users(), 0);
}

#[test]
fn a_users_info_is_kept_once_and_forgotten_when_they_hold_no_channel() {
    let mut r = router(10);
    let now = Instant::now();
    r.handle_join("a", conn(1), Some(5), None).unwrap();
    r.handle_join("b", conn(1), Some(5), None).unwrap();
    r.set_presence_info(5, r#"{"name":"Ada"}"#.into());
    for name in ["a", "b"] {
        let users = r.presence(&channel(name), true).users;
        assert_eq!(
            users[0].info.as_deref(),
            Some(r#"{"name":"Ada"}"#),
            "{name}"
        );
    }
    r.handle_leave("a", conn(1), now);
    r.handle_tick(now);
    assert!(r.presence(&channel("b"), true).users[0].info.is_some());
    r.handle_leave("b", conn(1), now);
    r.handle_tick(now);
    r.handle_join("a", conn(2), Some(5), None).unwrap();
    assert_eq!(r.presence(&channel("a"), true).users, [Member::new(5, 1)]);
}

/// A channel's mirror answers as the router does after every kind of change:
/// joins, a user's second connection, leaves, a gateway's death, a cut.
#[test]
fn a_mirror_follows_every_change_of_its_channel() {
    let mut r = router(2);
    let now = Instant::now();
    assert!(r.presence_mirror("room").is_none(), "no channel, no mirror");
    r.handle_join("room", conn(1), Some(42), None).unwrap();
    let m = r.presence_mirror("room").unwrap();
    let same = |r: &Router, m: &Mirror| {
        for list in [true, false] {
            let mirrored = PresenceCopy::of_mirror(m, list, 2).0.finish();
            assert_eq!(mirrored, r.presence(&channel("room"), list), "list {list}");
        }
    };
    same(&r, &m);
    let v = m.version();
    r.handle_join("room", conn(2), Some(42), None).unwrap();
    assert!(m.version() > v, "a change bumps the version");
    r.handle_join("room", conn(3), Some(7), None).unwrap();
    r.handle_join("room", conn(4), None, None).unwrap();
    let dead = ConnRef {
        loop_id: 1,
        token: 5,
    };
    r.handle_login(9, dead);
    r.handle_join("room", dead, Some(9), None).unwrap();
    same(&r, &m);
    assert!(r.presence(&channel("room"), true).cut);
    r.handle_leave("room", conn(1), now);
    same(&r, &m);
    r.logout_where(|c| c.loop_id == 1, now);
    same(&r, &m);
    r.handle_leave("room", conn(2), now);
    r.handle_leave("room", conn(4), now);
    same(&r, &m);
    assert_eq!(
        pairs(&PresenceCopy::of_mirror(&m, true, 2).0.finish()),
        vec![(7, 1)]
    );
    // The same mirror while the channel lives; unread for a minute, dropped.
    assert!(Arc::ptr_eq(&m, &r.presence_mirror("room").unwrap()));
    drop(m);
    r.handle_tick(now + crate::channels::mirror::UNREAD + std::time::Duration::from_secs(1));
    let again = r.presence_mirror("room").unwrap();
    assert_eq!(
        Arc::strong_count(&again),
        2,
        "a new mirror: the old one was dropped"
    );
}
