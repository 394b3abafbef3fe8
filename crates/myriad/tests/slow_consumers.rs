//! Slow consumers (SPEC D4): a subscriber that stops reading has bounded output; the
//! policy disconnects it or drops deliveries, and either way it is counted.

mod common;

use common::*;

/// Publishes 16 KiB messages to `user` until `/stats` shows a slow drop.
fn publish_until_dropped(server: &Server, user: u64) -> serde_json::Value {
    let payload = "x".repeat(16 * 1024);
    for _ in 0..2000 {
        server.publish(user, &payload);
        let stats = server.stats();
        if stats["slow_drops"].as_u64().unwrap_or(0) > 0 {
            return stats;
        }
    }
    panic!("no slow drop after 32 MiB: {}", server.stats());
}

#[test]
fn a_reader_that_stops_is_disconnected_by_default() {
    let server = Server::start(&["--max-queued", "65536"]);
    let (_silent, _) = subscribe_stream(&server, 70);
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    publish_until_dropped(&server, 70);
    server.wait_stats("disconnect", |s| s["connections_logged_in"] == 0);
}

#[test]
fn with_the_drop_policy_it_stays_and_loses_only_what_did_not_fit() {
    let server = Server::start(&["--max-queued", "65536", "--slow-policy", "drop"]);
    let (_silent, _) = subscribe_stream(&server, 71);
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    let stats = publish_until_dropped(&server, 71);
    assert_eq!(
        stats["connections_logged_in"], 1,
        "still connected: {stats}"
    );
    let queued = stats["queued_bytes"].as_u64().unwrap_or(0);
    assert!(queued <= 65536 + 17 * 1024, "output stays bounded: {stats}");
}
