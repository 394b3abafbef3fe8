//! The per-user bound on channel subscriptions: a join past it is refused, and
//! the count goes back down on a leave, on a connection's close and on a gateway's
//! death, to no entry at all once the user holds nothing.

use super::*;
use crate::{Router, RouterConfig, SubscriptionIndex};

/// A router whose users may hold `limit` channel subscriptions.
fn router(limit: u32) -> Router {
    let config = RouterConfig {
        max_subscriptions_per_user: limit,
        ..RouterConfig::default()
    };
    Router::new(config, SubscriptionIndex::default())
}

fn conn(loop_id: u16, token: u32) -> ConnRef {
    ConnRef { loop_id, token }
}

/// Every user's count is the sum of their connections among each channel's members.
fn assert_counts_match_members(r: &Router, names: &[&str], users: &[UserId]) {
    for &u in users {
        let members: u32 = names
            .iter()
            .flat_map(|n| r.channels().members(n))
            .filter(|&(m, _)| m == u)
            .map(|(_, n)| n)
            .sum();
        assert_eq!(r.channels().subscriptions_of(u), members, "user {u}");
    }
}

#[test]
fn a_user_past_the_limit_is_refused_across_connections_and_others_are_not() {
    let mut r = router(3);
    let (a, b) = (conn(0, 1), conn(0, 2));
    for name in ["c1", "c2"] {
        r.handle_join(name, a, Some(5), None).unwrap();
    }
    r.handle_join("c3", b, Some(5), None).unwrap();
    assert_eq!(
        r.handle_join("c4", b, Some(5), None),
        Err(Refusal::UserLimit),
        "the user's two connections hold 3 together"
    );
    assert_eq!(
        r.channels().position("c4"),
        None,
        "a refused join creates nothing"
    );
    assert_eq!(
        r.handle_join("c4", a, Some(5), None),
        Err(Refusal::UserLimit)
    );
    // Joining again what it holds is no new subscription.
    assert!(r.handle_join("c3", b, Some(5), None).is_ok());
    // Another user, and a connection without one, are not this user's count.
    r.handle_join("c4", conn(0, 3), Some(6), None).unwrap();
    for name in ["c1", "c2", "c3", "c4", "c5"] {
        r.handle_join(name, conn(0, 4), None, None).unwrap();
    }
    assert_eq!(r.channels().subscriptions_of(5), 3);
    assert_eq!(r.channels().subscriptions_of(6), 1);
    assert_eq!(r.channels().subscribed_users(), 2);
    assert_counts_match_members(&r, &["c1", "c2", "c3", "c4", "c5"], &[5, 6]);
    assert_eq!(
        Refusal::UserLimit.text(),
        "too many channel subscriptions for this user (--max-subscriptions-per-user)"
    );
}

#[test]
fn a_leave_releases_a_subscription_and_a_user_holding_none_has_no_entry() {
    let mut r = router(2);
    let now = Instant::now();
    let (a, b) = (conn(0, 1), conn(0, 2));
    r.handle_join("x", a, Some(5), None).unwrap();
    r.handle_join("x", b, Some(5), None).unwrap();
    assert!(r.handle_join("y", b, Some(5), None).is_err());
    assert!(r.handle_leave("x", a, now));
    assert!(!r.handle_leave("x", a, now), "left once, counted once");
    r.handle_join("y", b, Some(5), None).unwrap();
    assert_eq!(r.channels().subscriptions_of(5), 2);
    // A connection closing: the gateway leaves its channels, then logs it out.
    for name in ["x", "y"] {
        r.handle_leave(name, b, now);
    }
    r.handle_logout(5, b, now);
    assert_eq!(r.channels().subscriptions_of(5), 0);
    assert_eq!(r.channels().subscribed_users(), 0, "no entry is kept");
    r.handle_join("z", a, Some(5), None).unwrap();
    r.handle_join("y", a, Some(5), None).unwrap();
}

#[test]
fn a_dead_gateway_gives_back_its_connections_subscriptions() {
    let mut r = router(4);
    let now = Instant::now();
    let (a, b) = (conn(1, 1), conn(2, 1));
    r.handle_login(5, a);
    r.handle_login(5, b);
    for name in ["p", "q"] {
        r.handle_join(name, a, Some(5), None).unwrap();
        r.handle_join(name, b, Some(5), None).unwrap();
    }
    assert!(r.handle_join("s", a, Some(5), None).is_err());
    r.logout_where(|c| c.loop_id == 1, now);
    assert_eq!(r.channels().subscriptions_of(5), 2);
    assert_counts_match_members(&r, &["p", "q"], &[5]);
    r.handle_join("r", b, Some(5), None).unwrap();
    r.handle_join("s", b, Some(5), None).unwrap();
    assert!(r.handle_join("t", b, Some(5), None).is_err());
    r.logout_where(|_| true, now);
    assert_eq!(r.channels().subscriptions_of(5), 0);
    assert_eq!(r.channels().subscribed_users(), 0);
}

/// With router shards a channel's shard may not hold its subscriber's login (the
/// user's shard does): a gateway's death then drops that user from the members it
/// rebuilds, and the count follows the members, so it never stays stuck above them.
#[test]
fn a_user_not_logged_in_here_is_counted_as_its_members_are() {
    let mut r = router(8);
    let now = Instant::now();
    let (here, there) = (conn(1, 1), conn(2, 1));
    r.handle_join("k", here, Some(5), None).unwrap();
    r.handle_join("k", there, Some(6), None).unwrap();
    r.handle_join("m", here, Some(5), None).unwrap();
    r.logout_where(|c| c.loop_id == 2, now);
    assert_counts_match_members(&r, &["k", "m"], &[5, 6]);
    for name in ["k", "m"] {
        r.handle_leave(name, here, now);
    }
    assert_eq!(r.channels().subscribed_users(), 0);
}
