//! What crosses NATS from the router (issue 9: "deliveries as one message per
//! gateway per publish carrying the recipients, never one NATS message per
//! recipient"), counted by the router's `batches_to_gateways`: a real router, five
//! gateways and a nats-server of the test's own.

mod common;

use common::cluster::*;
use common::*;

/// Users 1–5 on gateways 1–5 and user 6 on gateway 1 follow subject 100; ten
/// publishes to it (six recipients on five gateways each) and a unicast to user 1
/// cost the router exactly 5 × 10 + 1 messages, and every user gets every
/// message once, in order.
#[test]
fn a_publish_crosses_as_one_message_per_gateway_it_reaches() {
    let nats = Nats::start();
    let (_router, line) = Router::start_with(
        &nats,
        "memory",
        &["--admin", "127.0.0.1:0", "--publish-listen", "127.0.0.1:0"],
    );
    let (admin, port) = (admin_of(&line), publish_port_of(&line));
    let gateways: Vec<Server> = (0..5).map(|_| gateway(&nats)).collect();
    let edges: String = (1..=6).map(|u| format!("{u} 100\n")).collect();
    let (status, body) = gateways[0].request("POST", "/subscriptions", edges.as_bytes());
    assert_eq!(status, 200, "{body}");
    let mut streams: Vec<_> = (1..=6)
        .map(|user| sse(&gateways[(user as usize - 1) % 5], user, None))
        .collect();
    wait_router_connections(&gateways[0], 6);
    let sent = || -> u64 {
        let stats: serde_json::Value = serde_json::from_str(&get(&admin, "/stats")).unwrap();
        stats["extra"]["batches_to_gateways"]
            .as_u64()
            .unwrap_or_else(|| panic!("no batches_to_gateways in {stats}"))
    };
    let before = sent();
    // One at a time (each waits for its answer): one publish per router turn.
    for i in 1..=10 {
        let reply = publish_at(port, 100, &format!("fan-{i}"));
        assert_eq!(reply["connections"], 6, "{reply}");
    }
    assert_eq!(publish_at(port, 1, "unicast-1")["connections"], 1);
    let fanouts: Vec<String> = (1..=10).map(|i| format!("fan-{i}")).collect();
    for (user, (s, buf)) in (1..).zip(&mut streams) {
        let last = if user == 1 { "unicast-1" } else { "fan-10" };
        read_until(s, buf, last);
        let mut want = fanouts.clone();
        if user == 1 {
            want.push("unicast-1".into());
        }
        let got: Vec<String> = sse_events(buf).into_iter().map(|(_, d)| d).collect();
        assert_eq!(got, want, "user {user}");
    }
    assert_eq!(sent() - before, 51, "5 gateways × 10 publishes + 1 unicast");
}
