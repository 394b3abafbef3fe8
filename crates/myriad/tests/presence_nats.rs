//! Presence events across processes (docs/protocol.md "Presence events"): the
//! router role publishes every membership change on `myriad.presence.<channel>`,
//! and a gateway killed with -9 has its users announced gone, on NATS and to a
//! watcher on another gateway.

mod common;

use common::channels::open_when_up;
use common::cluster::*;
use common::*;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A plain NATS client subscribed to `myriad.presence.>` (subscribed once this
/// returns: the server answered a PING after the SUB).
struct Events {
    reader: BufReader<TcpStream>,
    conn: TcpStream,
}

impl Events {
    fn subscribe(nats: &Nats) -> Events {
        let mut conn = TcpStream::connect(nats.url.trim_start_matches("nats://")).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        conn.write_all(b"CONNECT {\"verbose\":false}\r\nSUB myriad.presence.> 1\r\nPING\r\n")
            .unwrap();
        let mut events = Events {
            reader: BufReader::new(conn.try_clone().unwrap()),
            conn,
        };
        while !events.line().starts_with("PONG") {}
        events
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        line
    }

    /// The next event: its subject and JSON.
    fn next(&mut self) -> (String, serde_json::Value) {
        loop {
            let line = self.line();
            if line.starts_with("PING") {
                self.conn.write_all(b"PONG\r\n").unwrap();
            } else if let Some(rest) = line.strip_prefix("MSG ") {
                let subject = rest.split(' ').next().unwrap().to_string();
                let body = self.line();
                return (subject, serde_json::from_str(body.trim_end()).unwrap());
            }
        }
    }

    /// `(event, channel, user)` of the next `n` events.
    fn take(&mut self, n: usize) -> Vec<(String, String, Option<u64>)> {
        (0..n)
            .map(|_| {
                let (subject, e) = self.next();
                let channel = e["channel"].as_str().unwrap().to_string();
                assert_eq!(subject, format!("myriad.presence.{channel}"));
                assert!(e["time_ms"].as_u64().unwrap() > 0);
                (
                    e["event"].as_str().unwrap().to_string(),
                    channel,
                    e["user"].as_u64(),
                )
            })
            .collect()
    }
}

fn ev(kind: &str, channel: &str, user: Option<u64>) -> (String, String, Option<u64>) {
    (kind.to_string(), channel.to_string(), user)
}

#[test]
fn the_router_publishes_events_on_nats_and_a_killed_gateway_s_users_are_announced_gone() {
    let nats = Nats::start();
    let mut events = Events::subscribe(&nats);
    let _router = Router::start_with(&nats, "memory", &["--presence-grace", "0"]).0;
    let gw_a = gateway(&nats);
    let gw_b = gateway(&nats);
    let (mut watcher, mut wbuf) =
        open_when_up(&gw_b, "/sse?channel=room.1&presence=1", "", "retry:");
    let (_a1, _) = open_when_up(&gw_a, "/sse/42?channel=room.1", "", "retry:");
    let (_a2, _) = open_when_up(&gw_a, "/sse/42?channel=room.1", "", "retry:");
    assert_eq!(
        events.take(2),
        [
            ev("channel_occupied", "room.1", None),
            ev("member_added", "room.1", Some(42))
        ]
    );
    read_until(
        &mut watcher,
        &mut wbuf,
        r#"{"channel":"room.1","joined":42}"#,
    );
    // User 43 on the surviving gateway: joins, stays.
    let (_b1, _) = open_when_up(&gw_b, "/sse/43?channel=room.1", "", "retry:");
    assert_eq!(events.take(1), [ev("member_added", "room.1", Some(43))]);
    // Gateway A dies: its connections are dropped by the router once it is silent,
    // and user 42 announced gone once, to back-ends and to the watcher.
    let mut gw_a = gw_a;
    gw_a.child.kill().unwrap();
    gw_a.child.wait().unwrap();
    assert_eq!(events.take(1), [ev("member_removed", "room.1", Some(42))]);
    read_until(&mut watcher, &mut wbuf, r#"{"channel":"room.1","left":42}"#);
    let text = String::from_utf8_lossy(&wbuf);
    assert_eq!(text.matches(r#""joined":42"#).count(), 1, "{text}");
    assert_eq!(text.matches(r#""left":42"#).count(), 1, "{text}");
}
