//! Helpers of the resume tests (`resume.rs`, `durable_history.rs`): raw WebSocket,
//! SSE and long-poll clients, a publisher until the server dies, and the two
//! kill -9 checks run against every durable history store.

use super::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

pub const WS_UPGRADE: &str = "Upgrade: websocket\r\nConnection: Upgrade\r\n\
    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";

/// A raw WebSocket client: reads unmasked server frames.
pub struct Ws {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Ws {
    pub fn open(server: &Server, path: &str) -> Ws {
        let mut s = server.connect();
        write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\n{WS_UPGRADE}\r\n").unwrap();
        let mut buf = Vec::new();
        read_until(&mut s, &mut buf, "\r\n\r\n");
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert!(
            buf.starts_with(b"HTTP/1.1 101"),
            "{:?}",
            String::from_utf8_lossy(&buf)
        );
        Ws {
            s,
            buf: buf[end..].to_vec(),
        }
    }

    /// The next text frame's payload (pings are skipped).
    pub fn text(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.buf.len() >= 2 {
                let len = (self.buf[1] & 0x7f) as usize;
                assert!(len < 126, "test frames are short");
                if self.buf.len() >= 2 + len {
                    let op = self.buf[0] & 0x0f;
                    let payload: Vec<u8> = self.buf.drain(..2 + len).skip(2).collect();
                    if op == 1 {
                        return String::from_utf8(payload).unwrap();
                    }
                    continue;
                }
            }
            assert!(Instant::now() < deadline, "no frame");
            let mut chunk = [0u8; 4096];
            match self.s.read(&mut chunk) {
                Ok(0) => panic!("closed"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(_) => {}
            }
        }
    }
}

/// One long-poll on a fresh connection: the JSON answer.
pub fn poll(server: &Server, user: u64, since: &str) -> serde_json::Value {
    let (status, body) = server.request("GET", &format!("/poll/{user}?since={since}"), b"");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(body.trim()).unwrap()
}

/// SSE events `(id, data)` read from `s` until `n` events with ids arrived.
pub fn sse_events(s: &mut TcpStream, buf: &mut Vec<u8>, n: usize) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = String::from_utf8_lossy(buf).to_string();
        let events: Vec<(String, String)> = text
            .split("\n\n")
            .filter_map(|e| {
                let id = e.lines().find_map(|l| l.strip_prefix("id: "))?;
                let data = e.lines().find_map(|l| l.strip_prefix("data: "))?;
                Some((id.to_string(), data.to_string()))
            })
            .collect();
        if events.len() >= n && text.ends_with("\n\n") {
            return events;
        }
        assert!(Instant::now() < deadline, "{n} events wanted: {text:?}");
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) => panic!("closed: {text:?}"),
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
            Err(_) => {}
        }
    }
}

impl Ws {
    /// Every text frame until the connection ends.
    pub fn texts_until_eof(mut self) -> Vec<String> {
        let mut rest = std::mem::take(&mut self.buf);
        rest.extend(read_all(&mut self.s));
        let mut texts = Vec::new();
        let mut at = 0;
        while at + 2 <= rest.len() {
            let len = (rest[at + 1] & 0x7f) as usize;
            if at + 2 + len > rest.len() {
                break; // cut by the kill
            }
            if rest[at] & 0x0f == 1 {
                texts.push(String::from_utf8_lossy(&rest[at + 2..at + 2 + len]).into_owned());
            }
            at += 2 + len;
        }
        texts
    }
}

/// A long-poll that may find the server gone: `None` then.
pub fn try_poll(addr: SocketAddr, user: u64, since: &str) -> Option<serde_json::Value> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let request =
        format!("GET /poll/{user}?since={since} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let (status, body) = parse_response(&out);
    (status == 200).then(|| serde_json::from_str(body.trim()).ok())?
}

/// Checks that `got` is m1, m2, … in order (nothing silently skipped) and returns
/// how many.
pub fn contiguous(what: &str, got: &[String]) -> usize {
    contiguous_or_told(what, got, &[])
}

/// Checks that `got` is m1, m2, … in order, skipping ahead only at the positions in
/// `gaps`, where the server said the messages between were no longer kept; returns
/// how many.
pub fn contiguous_or_told(what: &str, got: &[String], gaps: &[usize]) -> usize {
    let number = |m: &String| -> u64 {
        m.strip_prefix('m')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{what}: {m} is not one of m1, m2, …"))
    };
    let mut want = 1;
    for (i, m) in got.iter().enumerate() {
        let n = number(m);
        if gaps.contains(&i) {
            assert!(n >= want, "{what}: message {} went back: {got:?}", i + 1);
        } else {
            assert_eq!(
                n,
                want,
                "{what}: message {} of {got:?} (gaps told at {gaps:?})",
                i + 1
            );
        }
        want = n + 1;
    }
    got.len()
}

/// What the clients of user 50 had when the server was killed under a publisher.
pub struct BeforeKill {
    /// Publishes answered 200.
    pub published: u64,
    pub sse_got: Vec<String>,
    /// The SSE client's last `id:` (`<epoch>-<seq>`).
    pub sse_last: String,
    pub ws_got: Vec<String>,
    pub poll_got: Vec<String>,
    /// Where in `poll_got` an answer with `gap: true` began.
    pub poll_gaps: Vec<usize>,
    /// The long-poll client's next `since`.
    pub poll_since: String,
}

/// Connects an SSE, a WebSocket (`?since=0`) and a long-poll client of user 50 to
/// `first`, publishes `m1, m2, …` as fast as it can, kills the server with SIGKILL
/// once the SSE client has 200 messages, and collects what every client got.
pub fn publish_and_kill_9(first: &mut Server) -> BeforeKill {
    let addr = first.addr;
    let mut sse = first.connect();
    sse.write_all(b"GET /sse/50 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut sse_buf = Vec::new();
    read_until(&mut sse, &mut sse_buf, "retry:");
    let mut ws = Ws::open(first, "/ws/50?since=0");
    assert_eq!(ws.text(), r#"{"position":"0","gap":false}"#);
    // The long-poll client: polls from its last position until the server is gone,
    // noting where an answer said messages were no longer kept (a publisher faster
    // than the poller's round trips overruns a small history window).
    let poller = std::thread::spawn(move || {
        let (mut since, mut got, mut gaps) = ("0".to_string(), Vec::new(), Vec::new());
        while let Some(answer) = try_poll(addr, 50, &since) {
            if answer["gap"] == true {
                gaps.push(got.len());
            }
            for m in answer["messages"].as_array().unwrap() {
                got.push(m["data"].as_str().unwrap().to_string());
            }
            if let Some(next) = answer["since"].as_str() {
                since = next.to_string();
            }
        }
        (got, gaps, since)
    });
    first.wait_stats("three clients", |s| s["connections_logged_in"] == 3);
    // The publisher: as fast as it can, until the server dies under it (bounded).
    let publisher =
        std::thread::spawn(move || publish_until_refused(addr, 50, |i| format!("m{i}")));
    let before_kill = sse_events(&mut sse, &mut sse_buf, 200);
    first.child.kill().unwrap(); // SIGKILL, mid-publish
    first.child.wait().unwrap();
    let published = publisher.join().unwrap();
    assert!(published < PUBLISH_AT_MOST, "the kill came mid-publish");
    sse_buf.extend(read_all(&mut sse));
    let text = String::from_utf8_lossy(&sse_buf).to_string();
    let sse_got: Vec<String> = text
        .split("\n\n")
        .filter(|e| e.lines().any(|l| l.starts_with("id: ")))
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(String::from)
        .collect();
    let sse_last = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("id: "))
        .unwrap()
        .to_string();
    assert!(before_kill.len() >= 200);
    let ws_got: Vec<String> = ws.texts_until_eof();
    let (poll_got, poll_gaps, poll_since) = poller.join().unwrap();
    BeforeKill {
        published,
        sse_got,
        sse_last,
        ws_got,
        poll_got,
        poll_gaps,
        poll_since,
    }
}

/// Bound on the publisher of [`publish_and_kill_9`] (the kill comes long before).
pub const PUBLISH_AT_MOST: u64 = 20_000;

/// Reads SSE events from `s` until one carries `data: {last}`; returns `(id, data)`
/// of every event with an id, and whether an `event: gap` came.
pub fn sse_until(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    last: &str,
) -> (Vec<(String, String)>, bool) {
    read_until(s, buf, &format!("data: {last}\n\n"));
    let text = String::from_utf8_lossy(buf).to_string();
    let events = text
        .split("\n\n")
        .filter_map(|e| {
            let id = e.lines().find_map(|l| l.strip_prefix("id: "))?;
            let data = e.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((id.to_string(), data.to_string()))
        })
        .collect();
    (events, text.contains("event: gap"))
}

/// `before` then `after` must be `m1 … mP` then `n1 … n10` with `P ≥ published`:
/// every answered publish, none twice, none skipped. Returns P.
pub fn nothing_lost(what: &str, before: &[String], after: &[String], published: u64) -> u64 {
    let all: Vec<&String> = before.iter().chain(after).collect();
    let p = all.iter().filter(|m| m.starts_with('m')).count();
    for (i, m) in all.iter().enumerate() {
        let want = if i < p {
            format!("m{}", i + 1)
        } else {
            format!("n{}", i - p + 1)
        };
        assert_eq!(**m, want, "{what}: message {} of {all:?}", i + 1);
    }
    assert_eq!(all.len(), p + 10, "{what}: the 10 new messages");
    assert!(
        p as u64 >= published,
        "{what}: {p} messages, {published} publishes answered 200"
    );
    p as u64
}

/// Publishes `body(1)`, `body(2)`, … to `user`, one connection each, each answered 200
/// before the next, until the server stops answering (bounded by PUBLISH_AT_MOST);
/// returns how many were answered 200.
pub fn publish_until_refused(addr: SocketAddr, user: u64, body: impl Fn(u64) -> String) -> u64 {
    let mut answered = 0u64;
    for k in 1..=PUBLISH_AT_MOST {
        let Ok(mut s) = TcpStream::connect(addr) else {
            break;
        };
        let body = body(k);
        let req = format!(
            "POST /pub/{user} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let mut out = Vec::new();
        if s.write_all(req.as_bytes()).is_err() || s.read_to_end(&mut out).is_err() {
            break;
        }
        if parse_response(&out).0 != 200 {
            break;
        }
        answered += 1;
    }
    answered
}
/// kill -9 mid-publish with SSE, long-poll and WebSocket clients of user 50, then a
/// restart with the same `flags` (a durable history store, a window larger than
/// anything published): every client gets the rest with no gap in the same epoch.
pub fn kill_9_with_durable_history_every_client_resumes_with_nothing_lost(flags: &[&str]) {
    let mut first = Server::start(flags);
    let before = publish_and_kill_9(&mut first);
    contiguous("sse", &before.sse_got);
    contiguous("ws", &before.ws_got);
    assert_eq!(
        before.poll_gaps,
        [] as [usize; 0],
        "no gap within the durable window"
    );
    contiguous("poll", &before.poll_got);
    let epoch = before.sse_last.split('-').next().unwrap().to_string();

    // The whole server restarts on the same store: history and its epoch survive.
    let second = Server::start(flags);
    let mut sse = second.connect();
    write!(
        sse,
        "GET /sse/50 HTTP/1.1\r\nHost: t\r\nLast-Event-ID: {}\r\n\r\n",
        before.sse_last
    )
    .unwrap();
    let mut sse_buf = Vec::new();
    read_until(&mut sse, &mut sse_buf, "retry:");
    let n_ws = before.ws_got.len();
    let mut ws = Ws::open(&second, &format!("/ws/50?since={n_ws}"));
    let position: serde_json::Value = serde_json::from_str(&ws.text()).unwrap();
    assert_eq!(position["gap"], false, "ws resumed: {position}");
    second.wait_stats("sse and ws back", |s| s["connections_logged_in"] == 2);
    for i in 1..=10 {
        second.publish(50, &format!("n{i}"));
    }

    let (events, gap) = sse_until(&mut sse, &mut sse_buf, "n10");
    assert!(!gap, "no gap for SSE");
    assert!(
        events
            .iter()
            .all(|(id, _)| id.starts_with(&format!("{epoch}-"))),
        "the epoch stayed {epoch}: {events:?}"
    );
    let sse_after: Vec<String> = events.into_iter().map(|e| e.1).collect();
    let p = nothing_lost("sse", &before.sse_got, &sse_after, before.published);

    let mut ws_after = Vec::new();
    while ws_after.last().is_none_or(|m: &String| m != "n10") {
        ws_after.push(ws.text());
    }
    assert_eq!(
        nothing_lost("ws", &before.ws_got, &ws_after, before.published),
        p
    );

    let (mut since, mut poll_after) = (before.poll_since.clone(), Vec::new());
    assert!(since.starts_with(&format!("{epoch}-")), "{since}");
    while poll_after.last().is_none_or(|m: &String| m != "n10") {
        let answer = poll(&second, 50, &since);
        assert_eq!(answer["gap"], false, "poll resumed: {answer}");
        for m in answer["messages"].as_array().unwrap() {
            poll_after.push(m["data"].as_str().unwrap().to_string());
        }
        since = answer["since"].as_str().unwrap().to_string();
    }
    assert_eq!(
        nothing_lost("poll", &before.poll_got, &poll_after, before.published),
        p
    );
    eprintln!(
        "kill -9 with durable history: {} publishes answered before the kill, {p} stored; \
         before it sse {}, ws {}, poll {}; after the restart every client got the rest and \
         the 10 new messages in epoch {epoch}, no gap",
        before.published,
        before.sse_got.len(),
        n_ws,
        before.poll_got.len()
    );
}

/// Users and publishers of [`concurrent_publishers_keep_order_and_every_answered_message_after_kill_9`].
pub const USERS: [u64; 4] = [60, 61, 62, 63];
pub const PUBLISHERS_PER_USER: usize = 2;

/// 8 publishers on 4 users, kill -9 after ≥ 400 publishes, restart with the same
/// `flags`: per publisher every answered message is kept in order, at most one more.
pub fn concurrent_publishers_keep_order_and_every_answered_message_after_kill_9(flags: &[&str]) {
    let mut first = Server::start(flags);
    let addr = first.addr;
    // One SSE reader per user: a user reached while online gets history.
    let _readers: Vec<TcpStream> = USERS
        .iter()
        .map(|user| {
            let mut s = first.connect();
            write!(s, "GET /sse/{user} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            let mut buf = Vec::new();
            read_until(&mut s, &mut buf, "retry:");
            s
        })
        .collect();
    first.wait_stats("readers", |s| s["connections_logged_in"] == USERS.len());
    // Every publisher posts `p<id>-<k>` to one user, k = 1, 2, … each answered 200
    // before the next, until the server dies (bounded by PUBLISH_AT_MOST).
    let publishers: Vec<_> = (0..USERS.len() * PUBLISHERS_PER_USER)
        .map(|id| {
            let user = USERS[id % USERS.len()];
            std::thread::spawn(move || publish_until_refused(addr, user, |k| format!("p{id}-{k}")))
        })
        .collect();
    // Kill once the server has taken a few hundred publishes (counted by /stats).
    first.wait_stats("publishes under way", |s| {
        s["messages_in"].as_u64().unwrap_or(0) >= 400
    });
    first.child.kill().unwrap(); // SIGKILL, mid-publish
    first.child.wait().unwrap();
    let answered: Vec<u64> = publishers.into_iter().map(|p| p.join().unwrap()).collect();
    assert!(
        answered.iter().all(|&n| n < PUBLISH_AT_MOST),
        "the kill came mid-publish"
    );

    let second = Server::start(flags);
    for &user in &USERS {
        second.publish(user, "end");
        let (mut since, mut got) = ("0".to_string(), Vec::<String>::new());
        while got.last().is_none_or(|m| m != "end") {
            let answer = poll(&second, user, &since);
            assert_eq!(answer["gap"], false, "user {user}: {answer}");
            for m in answer["messages"].as_array().unwrap() {
                got.push(m["data"].as_str().unwrap().to_string());
            }
            since = answer["since"].as_str().unwrap().to_string();
        }
        got.pop();
        // Per publisher: its k = 1, 2, … in order, at least every answered one, at
        // most one more (the publish the kill interrupted before its 200).
        for id in (0..answered.len()).filter(|id| USERS[id % USERS.len()] == user) {
            let prefix = format!("p{id}-");
            let ks: Vec<u64> = got
                .iter()
                .filter_map(|m| m.strip_prefix(&prefix))
                .map(|k| k.parse().unwrap())
                .collect();
            let want: Vec<u64> = (1..=ks.len() as u64).collect();
            assert_eq!(
                ks, want,
                "user {user}, publisher {id}: in order, none missing"
            );
            assert!(
                ks.len() as u64 >= answered[id] && ks.len() as u64 <= answered[id] + 1,
                "user {user}, publisher {id}: {} stored, {} answered 200",
                ks.len(),
                answered[id]
            );
        }
        assert_eq!(
            got.len(),
            got.iter().filter(|m| m.starts_with('p')).count(),
            "user {user}: only the publishers' messages"
        );
    }
    eprintln!("concurrent publishers, kill -9, durable history: answered {answered:?}, all stored in order");
}
