//! Resume on every transport (SPEC B6) over real sockets: inside the history window
//! nothing is lost; after a `kill -9` (in-memory history gone) every client is told
//! of the gap through the new epoch — never a silent loss. With a durable history
//! store the history survives the kill and nothing is lost: `durable_history.rs`.

mod common;

use common::resume::*;
use common::*;
use std::io::Write;

#[test]
fn websocket_and_stream_resume_inside_the_window_and_polls_ahead_get_the_position() {
    let server = Server::start(&[]);
    let mut ws = Ws::open(&server, "/ws/40?since=0");
    assert_eq!(ws.text(), r#"{"position":"0","gap":false}"#);
    server.wait_stats("login", |s| s["connections_logged_in"] == 1);
    server.publish(40, "one");
    server.publish(40, "two");
    assert_eq!((ws.text(), ws.text()), ("one".into(), "two".into()));
    drop(ws);
    server.wait_stats("logout", |s| s["connections_logged_in"] == 0);
    server.publish(40, "three");
    server.publish(40, "four");
    // The epoch of user 40's history, from a long-poll answer.
    let answer = poll(&server, 40, "0");
    let epoch = answer["epoch"].as_u64().expect("history has an epoch");
    assert_eq!(answer["since"], format!("{epoch}-4"));

    let mut ws = Ws::open(&server, &format!("/ws/40?since={epoch}-2"));
    let position = format!(r#"{{"position":"{epoch}-2","gap":false}}"#);
    assert_eq!(ws.text(), position);
    assert_eq!((ws.text(), ws.text()), ("three".into(), "four".into()));

    let mut s = server.connect();
    write!(s, "GET /sub/40?since={epoch}-3 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, "four\n");
    let text = String::from_utf8_lossy(&buf);
    assert!(text.contains(&format!("position {epoch}-3\n")), "{text}");
    assert!(
        !text.contains("three"),
        "only what came after the position: {text}"
    );

    // From another epoch (a restarted server): everything kept, with the gap.
    let mut ws = Ws::open(&server, "/ws/40?since=1-2");
    assert_eq!(
        ws.text(),
        format!(r#"{{"position":"{epoch}-0","gap":true}}"#)
    );
    assert_eq!(ws.text(), "one");

    // A poll ahead of the server answers at once with the server's position,
    // and the next poll from there waits normally (the old loop repeated `since`).
    let ahead = poll(&server, 40, &format!("{epoch}-99"));
    assert_eq!(ahead["gap"], true, "{ahead}");
    assert_eq!(ahead["last"], 4, "{ahead}");
    let stale = poll(&server, 40, "99");
    assert_eq!(
        (stale["gap"].clone(), stale["last"].clone()),
        (true.into(), 4.into())
    );
}

#[test]
fn kill_9_mid_publish_every_client_resumes_or_is_told_of_the_gap() {
    let mut first = Server::start(&[]);
    let BeforeKill {
        published,
        sse_got,
        sse_last,
        ws_got,
        poll_got,
        poll_gaps,
        poll_since,
    } = publish_and_kill_9(&mut first);
    let n_sse = contiguous("sse", &sse_got);
    let n_ws = contiguous("ws", &ws_got);
    // A history of 64: a poller slower than the publisher may be told of a gap.
    let n_poll = contiguous_or_told("poll", &poll_got, &poll_gaps);

    // Restart (in-memory history: gone). Every client resumes from where it was.
    let second = Server::start(&[]);
    let mut sse = second.connect();
    write!(
        sse,
        "GET /sse/50 HTTP/1.1\r\nHost: t\r\nLast-Event-ID: {sse_last}\r\n\r\n"
    )
    .unwrap();
    let mut sse_buf = Vec::new();
    read_until(&mut sse, &mut sse_buf, "event: gap\n");
    // It never learned an epoch (history was empty at its start): a bare position.
    let mut ws = Ws::open(&second, &format!("/ws/50?since={n_ws}"));
    assert_eq!(ws.text(), r#"{"position":"0","gap":true}"#);
    let answer = poll(&second, 50, &poll_since);
    assert_eq!(answer["gap"], true, "the poll is told: {answer}");
    assert_eq!(answer["last"], 0, "and moves to the new numbers: {answer}");
    second.wait_stats("sse and ws back", |s| s["connections_logged_in"] == 2);
    for i in 1..=10 {
        second.publish(50, &format!("n{i}"));
    }
    let after = sse_events(&mut sse, &mut sse_buf, 10);
    let datas: Vec<&str> = after.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(datas, (1..=10).map(|i| format!("n{i}")).collect::<Vec<_>>());
    for i in 1..=10 {
        assert_eq!(ws.text(), format!("n{i}"));
    }
    let answer = poll(&second, 50, "0");
    assert_eq!(answer["messages"].as_array().unwrap().len(), 10, "{answer}");
    eprintln!(
        "kill -9 resume: published {published} before the kill; delivered before it: \
         sse {n_sse}, ws {n_ws}, poll {n_poll} (gaps told: {}); after the restart every \
         client got the gap (new epoch) and all 10 new messages",
        poll_gaps.len()
    );
}
