//! Unit tests of the router role's pure parts: the silence rule and splitting deliveries.

use super::owed::split_targets;
use super::*;

#[test]
fn a_gateway_is_silent_behind_the_others_or_after_the_long_timeout() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    // Heard 1 s before the newest: alive; 3 s before it: gone.
    assert!(!silent(t0, Some(t0 + s(1)), t0 + s(10)));
    assert!(silent(t0, Some(t0 + s(3)), t0 + s(3)));
    // Every gateway equally stale (the router was behind): nobody is forgotten...
    assert!(!silent(t0, Some(t0), t0 + s(29)));
    // ...until the long timeout.
    assert!(silent(t0, Some(t0), t0 + s(30)));
}

#[test]
fn a_check_more_than_two_seconds_after_the_last_is_a_stall() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    assert!(!gateways::stalled(None, t0));
    assert!(!gateways::stalled(Some(t0), t0 + s(1)));
    assert!(!gateways::stalled(Some(t0), t0 + s(2)));
    assert!(gateways::stalled(Some(t0), t0 + s(10)));
}

/// Every recipient once, in order, in messages of at most `max`.
#[test]
fn split_targets_keeps_every_recipient_in_order_within_the_bound() {
    let target = |token, seq| bus::Target {
        token,
        epoch: 9,
        seq,
    };
    let loops: Vec<LoopTargets> = vec![
        (0, (0..7).map(|t| target(t, 1)).collect()),
        (1, (100..103).map(|t| target(t, 2)).collect()),
        (2, (200..210).map(|t| target(t, 3)).collect()),
    ];
    assert_eq!(split_targets(loops.clone(), 100), vec![loops.clone()]);
    let parts = split_targets(loops.clone(), 4);
    assert!(parts
        .iter()
        .all(|p| p.iter().map(|(_, t)| t.len()).sum::<usize>() <= 4));
    let flat = |ls: &[LoopTargets]| -> Vec<(u16, u32, u64)> {
        ls.iter()
            .flat_map(|(l, ts)| ts.iter().map(move |t| (*l, t.token, t.seq)))
            .collect()
    };
    let joined: Vec<_> = parts.iter().flat_map(|p| flat(p)).collect();
    assert_eq!(joined, flat(&loops));
    assert_eq!(parts.len(), 5); // 20 recipients, 4 per message
}
