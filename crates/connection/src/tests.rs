//! The connection core, one connection at a time through [`Harness`]: heads,
//! streams, long-polls, SSE resume, API replies, slow output and malformed input.

use super::harness::{history, Harness};
use super::*;

const STREAM_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n\
Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n\
Access-Control-Allow-Origin: *\r\n\r\n";

#[test]
fn a_peer_phase_moves_the_heartbeat_to_its_tick_of_the_grid() {
    for phase in [0u8, 3, 9, 13] {
        let mut h = Harness::new();
        h.conn.set_beat_phase(phase);
        h.bytes(b"GET /sub/7 HTTP/1.1\r\nHost: t\r\n\r\n");
        let step = h.reply(Reply::History(history(0, &[], false)));
        let due = step.timer.expect("a heartbeat timer");
        let beat = due - h.now;
        assert!((360..=449).contains(&beat), "heartbeat ±10 %: {beat}");
        let grid = h.config.heartbeat_grid;
        assert_eq!(due % grid, u32::from(phase) % grid, "phase {phase}: {due}");
        let next = h.fire_timer().timer.expect("the next heartbeat");
        assert_eq!(
            next % grid,
            u32::from(phase) % grid,
            "next beat, phase {phase}"
        );
    }
}

#[test]
fn a_stream_logs_in_before_its_head_then_gets_messages_and_heartbeats() {
    let mut h = Harness::new();
    let step = h.bytes(b"GET /sub/7 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(matches!(
        step.requests[..],
        [Request::Login {
            user: 7,
            since: None,
            ..
        }]
    ));
    let step = h.reply(Reply::History(history(0, &[], false)));
    assert_eq!(step.text(), format!("{STREAM_HEAD}a\r\nwelcome 7\n\r\n"));
    let due = step.timer.expect("a heartbeat timer");
    let beat = due - h.now;
    // ±10 %, then rounded up to the heartbeat grid (less than one grid later).
    assert!((360..=449).contains(&beat), "heartbeat ±10 %: {beat}");
    assert_eq!(due % h.config.heartbeat_grid, 0, "on the grid: {due}");
    let (outcome, step) = h.deliver(1, b"hi");
    assert_eq!(
        (outcome, step.text().as_str()),
        (Outcome::Sent, "3\r\nhi\n\r\n")
    );
    assert_eq!(h.fire_timer().text(), "1\r\n\n\r\n");
    // Input from a subscriber is ignored; closing logs out.
    assert!(h.bytes(b"junk").bytes.is_empty());
    let step = h.step(|c, cx| c.handle_close(cx));
    assert!(matches!(step.requests[..], [Request::Logout { user: 7 }]));
}

#[test]
fn a_slow_head_gets_408_then_the_connection_lingers_and_closes() {
    let mut h = Harness::new();
    assert!(h.bytes(b"GET /sub/1 HT").bytes.is_empty());
    h.now += 150;
    assert!(h.bytes(b"TP/1.1\r\n").bytes.is_empty());
    let step = h.fire_timer();
    assert_eq!(h.now, 1200, "the head clock started at accept");
    assert_eq!(
        step.text(),
        "HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\n\
Content-Length: 16\r\nConnection: close\r\n\r\nrequest timeout\n"
    );
    assert!(h.conn.is_closing() && !step.close);
    assert_eq!(step.timer, Some(1200 + 40), "linger");
    assert!(h.fire_timer().close);
}

#[test]
fn an_idle_keep_alive_connection_closes_after_its_timeout_and_a_new_head_restarts_the_clock() {
    let mut h = Harness::new();
    let step = h.bytes(b"GET /healthz HTTP/1.1\r\n\r\n");
    assert_eq!(
        step.text(),
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 3\r\n\
Keep-Alive: timeout=1\r\n\r\nok\n"
    );
    assert_eq!(
        step.timer,
        Some(1100),
        "keep-alive idle timeout from the response"
    );
    h.now = 1050;
    let step = h.bytes(b"GET /heal");
    assert_eq!(
        step.timer,
        Some(1250),
        "the first byte of a head starts the head clock"
    );
    let step = h.bytes(b"thz HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert!(step.text().contains("Connection: close\r\n"));
    assert!(h.conn.is_closing());

    let mut h = Harness::new();
    h.bytes(b"GET /healthz HTTP/1.1\r\n\r\n");
    let step = h.fire_timer();
    assert!(step.close && step.bytes.is_empty());
}

#[test]
fn a_long_poll_waits_then_answers_from_the_delivery_or_its_timeout() {
    let mut h = Harness::new();
    let step = h.bytes(b"GET /poll/7?since=3 HTTP/1.1\r\n\r\n");
    assert!(matches!(
        step.requests[..],
        [Request::Login {
            user: 7,
            since: Some(3),
            ..
        }]
    ));
    let step = h.reply(Reply::History(history(3, &[], false)));
    assert!(step.bytes.is_empty());
    assert_eq!(step.timer, Some(1000 + 600));
    assert_eq!(h.conn.state(), State::PollWaiting);
    let (outcome, step) = h.deliver(4, b"x");
    assert_eq!(outcome, Outcome::Sent);
    let body =
        r#"{"messages":[{"seq":4,"data":"x"}],"last":4,"gap":false,"epoch":7,"since":"7-4"}"#;
    assert_eq!(
        step.text(),
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
Cache-Control: no-cache\r\nAccess-Control-Allow-Origin: *\r\nKeep-Alive: timeout=1\r\n\r\n{body}",
            body.len()
        )
    );
    // Between polls deliveries are skipped: history keeps them.
    assert_eq!(h.deliver(5, b"y").0, Outcome::Skipped);

    // Without `since` the poll waits for the next message; its timeout answers empty.
    let step = h.bytes(b"GET /poll/7 HTTP/1.1\r\n\r\n");
    assert!(matches!(
        step.requests[..],
        [Request::Login {
            user: 7,
            since: None,
            ..
        }]
    ));
    h.reply(Reply::History(history(5, &[], false)));
    let step = h.fire_timer();
    assert!(step
        .text()
        .ends_with(r#"{"messages":[],"last":5,"gap":false,"since":"5"}"#));
    assert_eq!(h.conn.state(), State::Idle);
}

#[test]
fn a_long_poll_with_news_answers_at_once_and_reports_a_gap() {
    let mut h = Harness::new();
    h.bytes(b"GET /poll/2?since=1 HTTP/1.1\r\n\r\n");
    let step = h.reply(Reply::History(history(9, &[(8, "h"), (9, "i")], true)));
    assert!(step.text().ends_with(
        r#"{"messages":[{"seq":8,"data":"h"},{"seq":9,"data":"i"}],"last":9,"gap":true,"since":"9"}"#
    ));
    // A poll as another user logs the first one out.
    let step = h.bytes(b"GET /poll/3 HTTP/1.1\r\n\r\n");
    assert!(matches!(
        step.requests[..],
        [Request::Logout { user: 2 }, Request::Login { user: 3, .. }]
    ));
}

#[test]
fn pipelined_requests_are_answered_in_order_after_each_reply() {
    let mut h = Harness::new();
    let input = b"POST /pub/1 HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET /healthz HTTP/1.1\r\n\r\n";
    let step = h.bytes(input);
    assert!(
        step.bytes.is_empty(),
        "the health check waits behind the publish"
    );
    let [Request::Publish {
        subject: 1,
        payload,
    }] = &step.requests[..]
    else {
        panic!("one publish: {:?}", step.requests)
    };
    assert_eq!(&payload[..], b"hi");
    let step = h.reply(Reply::Published {
        messages: 1,
        connections: 3,
        users: 2,
    });
    assert_eq!(
        step.text(),
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 28\r\n\
Keep-Alive: timeout=1\r\n\r\n{\"connections\":3,\"users\":2}\n"
    );
    assert!(
        step.resume,
        "held input is to be read again after the reply"
    );
    let step = h.bytes(b"");
    assert!(step.text().ends_with("\r\n\r\nok\n"));
}

#[test]
fn api_replies_and_bad_bodies() {
    let mut h = Harness::new();
    let step = h.bytes(b"PUT /subscriptions/4/5 HTTP/1.1\r\n\r\n");
    assert!(
        matches!(&step.requests[..], [Request::ChangeSubscriptions { edges, add: true }] if edges == &[(4, 5)])
    );
    assert!(h
        .reply(Reply::Changed {
            edges: 1,
            changed: 1
        })
        .text()
        .ends_with("{\"edges\":1,\"added\":1}\n"));
    h.bytes(b"GET /subscribers/5 HTTP/1.1\r\n\r\n");
    assert!(h
        .reply(Reply::Ids(vec![4, 6]))
        .text()
        .ends_with("\r\n\r\n[4,6]\n"));
    h.bytes(b"GET /stats HTTP/1.1\r\n\r\n");
    let doc = serde_json::json!({"connections": 1});
    assert!(h
        .reply(Reply::Stats(doc))
        .text()
        .ends_with("{\"connections\":1}\n"));
    h.bytes(b"DELETE /subscriptions/4/5 HTTP/1.1\r\n\r\n");
    let step = h.reply(Reply::Unavailable("store: disk full".into()));
    assert!(step.text().starts_with("HTTP/1.1 503"));
    assert!(step.text().contains("Retry-After: 1\r\n"));
    assert!(!h.conn.is_closing(), "a 503 keeps the connection");
    // Partly done: 504 and no invitation to repeat it.
    h.bytes(b"PUT /subscriptions/4/6 HTTP/1.1\r\n\r\n");
    let step = h.reply(Reply::TimedOut(
        "shard 1 did not answer; shard 0 added 1".into(),
    ));
    assert!(
        step.text().starts_with("HTTP/1.1 504 Gateway Timeout\r\n"),
        "{}",
        step.text()
    );
    assert!(step
        .text()
        .contains("timed out: shard 1 did not answer; shard 0 added 1"));
    assert!(!step.text().contains("Retry-After"), "{}", step.text());
    assert!(!h.conn.is_closing(), "a 504 keeps the connection");
    let step = h.bytes(b"POST /pub HTTP/1.1\r\nContent-Length: 5\r\n\r\nnope\n");
    assert!(step.requests.is_empty());
    assert!(step.text().starts_with("HTTP/1.1 400"));
    let step = h.bytes(b"POST /pub/1 HTTP/1.1\r\nContent-Length: 2000\r\n\r\n");
    assert!(step.text().starts_with("HTTP/1.1 413"));
    assert!(h.conn.is_closing());
}

#[test]
fn sse_resumes_from_last_event_id_with_history_and_gap() {
    let request = "GET /sse/7 HTTP/1.1\r\nLast-Event-ID: 2\r\n\r\n";
    let mut h = Harness::new();
    let step = h.bytes(request.as_bytes());
    assert!(matches!(
        step.requests[..],
        [Request::Login {
            user: 7,
            since: Some(2),
            ..
        }]
    ));
    let step = h.reply(Reply::History(history(4, &[(4, "d")], true)));
    assert!(step
        .text()
        .ends_with("\r\n\r\nretry: 2000\n\nevent: gap\ndata: {\"first\":4,\"epoch\":null}\n\nid: 4\ndata: d\n\n"));
    // Deliveries name their epoch (the harness delivers in epoch 7).
    let (_, step) = h.deliver(5, b"a\nb");
    assert_eq!(step.text(), "id: 7-5\ndata: a\ndata: b\n\n");
    assert_eq!(h.fire_timer().text(), ": hb\n\n");
}

/// Deliveries lost before they reached the gateway: a subscription is told to
/// reconnect as in a drain and takes no later delivery (its client resumes from
/// the last id it got); a waiting long-poll is left to its own gap check.
#[test]
fn a_subscription_that_lost_deliveries_is_told_to_resume() {
    let (mut h, _) = Harness::subscribed("GET /sse/7 HTTP/1.1\r\n\r\n", history(4, &[], false));
    let step = h.step(|c, cx| c.handle_lost(cx));
    assert!(
        step.text().starts_with("event: reconnect\n"),
        "{}",
        step.text()
    );
    let (outcome, step) = h.deliver(9, b"after the loss");
    assert_eq!(outcome, Outcome::Skipped);
    assert!(step.bytes.is_empty());

    let mut h = Harness::new();
    h.bytes(b"GET /poll/7?since=3 HTTP/1.1\r\n\r\n");
    h.reply(Reply::History(history(3, &[], false)));
    // A waiting long-poll is answered at once, empty, at its place: the client
    // polls again from 3 and reads what was lost from history.
    let step = h.step(|c, cx| c.handle_lost(cx));
    let text = step.text();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.contains(r#""messages":[]"#) && text.contains(r#""last":3"#),
        "{text}"
    );
    assert!(!text.contains(r#""gap":true"#), "{text}");
    let (outcome, _) = h.deliver(9, b"x");
    assert_eq!(outcome, Outcome::Skipped);
}

#[test]
fn a_delivery_to_blocked_output_follows_the_slow_policy() {
    let (mut h, _) = Harness::subscribed("GET /sub/1 HTTP/1.1\r\n\r\n", history(0, &[], false));
    // Something waits, but there is room: queued behind it.
    h.queued = 100;
    let (outcome, step) = h.deliver(1, b"m");
    assert_eq!(
        (outcome, step.text().as_str()),
        (Outcome::Sent, "2\r\nm\n\r\n")
    );
    // The heartbeat is skipped while output waits.
    assert!(h.fire_timer().bytes.is_empty());
    // Over the limit: disconnect (default) …
    h.queued = 990;
    let (outcome, step) = h.deliver(2, b"m");
    assert_eq!(outcome, Outcome::SlowDrop);
    assert!(step.close && step.bytes.is_empty());
    // … or drop and keep the connection.
    let (mut h, _) = Harness::subscribed("GET /sub/1 HTTP/1.1\r\n\r\n", history(0, &[], false));
    h.config.slow_policy = SlowPolicy::Drop;
    h.queued = 990;
    let (outcome, step) = h.deliver(2, b"m");
    assert_eq!(outcome, Outcome::SlowDrop);
    assert!(!step.close && step.bytes.is_empty());
}

#[test]
fn a_router_that_does_not_answer_gets_a_503_and_an_unanswered_publish_a_504() {
    let mut h = Harness::new();
    h.bytes(b"GET /sub/1 HTTP/1.1\r\n\r\n");
    let step = h.fire_timer();
    assert!(step
        .text()
        .starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
    assert!(step.text().contains("Retry-After: 1\r\n"));
    let (mut h, step) = Harness::subscribed("GET /sub/1 HTTP/1.1\r\n\r\n", history(0, &[], false));
    assert!(!step.bytes.is_empty());
    // A late reply for a connection that moved on is ignored.
    assert!(h.reply(Reply::Done).bytes.is_empty());
    // A read (a subscriber list) may be asked again; a publish or an edge change
    // may have been done: a 504 without Retry-After.
    let mut h = Harness::new();
    h.bytes(b"GET /subscribers/1 HTTP/1.1\r\n\r\n");
    let text = h.fire_timer().text();
    assert!(text.starts_with("HTTP/1.1 503 ") && text.contains("Retry-After: 1\r\n"));
    for request in [
        "POST /pub/1 HTTP/1.1\r\nContent-Length: 1\r\n\r\nm",
        "POST /pub HTTP/1.1\r\nContent-Length: 25\r\n\r\n{\"subject\":1,\"data\":\"m\"}\n",
        "PUT /subscriptions/2/1 HTTP/1.1\r\n\r\n",
        "DELETE /subscriptions/2/1 HTTP/1.1\r\n\r\n",
    ] {
        let mut h = Harness::new();
        h.bytes(request.as_bytes());
        let text = h.fire_timer().text();
        assert!(
            text.starts_with("HTTP/1.1 504 Gateway Timeout\r\n")
                && text.contains("may or may not have been done")
                && !text.contains("Retry-After"),
            "{request}: {text}"
        );
    }
}

#[test]
fn pipelined_input_behind_a_waiting_call_is_bounded() {
    let mut h = Harness::new();
    h.bytes(b"GET /poll/1?since=0 HTTP/1.1\r\n\r\n");
    h.reply(Reply::History(history(0, &[], false)));
    let flood = vec![b'G'; MAX_HELD_INPUT + 1];
    let step = h.bytes(&flood);
    assert!(step.text().starts_with("HTTP/1.1 431"));
    assert!(h.conn.is_closing());
}

#[test]
fn malformed_heads_and_unknown_paths() {
    let mut h = Harness::new();
    let step = h.bytes(b"GET /nope HTTP/1.1\r\n\r\n");
    assert!(step.text().starts_with("HTTP/1.1 404"));
    assert!(!h.conn.is_closing(), "no body: keep-alive goes on");
    let step = h.bytes(b"GET /ws/1 HTTP/1.1\r\n\r\n");
    assert!(step.text().starts_with("HTTP/1.1 426"));
    assert!(step.text().contains("Upgrade: websocket\r\n"));
    let step = h.bytes(b"BAD\x00 / HTTP/1.1\r\n\r\n");
    assert!(step.text().starts_with("HTTP/1.1 400"));
    assert!(h.conn.is_closing());
    assert!(
        h.bytes(b"more").bytes.is_empty(),
        "a closing connection says nothing more"
    );
}
