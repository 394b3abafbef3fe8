//! Resume replay counts against `--max-queued`: clients that resume against a full
//! history and never read make the server hold at most their budget each (the
//! newest messages that fit are sent, the older ones reported as a gap), and a
//! client that reads gets the kept messages in order after a documented gap — over
//! HTTP/1.1 and on an SSE stream over HTTP/2 (curl).

mod common;
mod tls_common;

use common::resume::poll;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const MAX_QUEUED: usize = 64 * 1024;
const MESSAGES: u64 = 64;
const SIZE: usize = 4000;

/// The payload of message `i`: its number, padded to [`SIZE`].
fn payload(i: u64) -> String {
    format!("m{i:03}-{}", "x".repeat(SIZE - 5))
}

/// A connection whose receive buffer is small, so the kernel takes little of what
/// the server sends a client that never reads.
fn tight(server: &Server) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&server.addr.into()).unwrap();
    let s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Reads until `needle` is in `buf` (bounded), returning what came.
fn read_to(s: &mut TcpStream, buf: &mut Vec<u8>, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut chunk = [0u8; 16384];
    while !String::from_utf8_lossy(buf).contains(needle) {
        assert!(Instant::now() < deadline, "no {needle:?}");
        match s.read(&mut chunk) {
            Ok(0) => panic!("closed before {needle:?}"),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// The message numbers in the order they appear in `text`.
fn numbers(text: &str) -> Vec<u64> {
    text.match_indices('m')
        .filter_map(|(at, _)| {
            let digits = text.get(at + 1..at + 4)?;
            (text.get(at + 4..at + 5) == Some("-")).then(|| digits.parse().ok())?
        })
        .collect()
}

#[test]
fn replay_stays_within_max_queued_and_a_reader_gets_the_newest_after_a_gap() {
    let server = Server::start(&["--max-queued", &MAX_QUEUED.to_string(), "--loops", "1"]);
    // User 60 has a history: a message while online starts it, 63 more while
    // offline fill it (64 messages of 4 KB, 256 KB).
    let (mut s, mut buf) = subscribe_stream(&server, 60);
    server.publish(60, &payload(1));
    read_until(&mut s, &mut buf, "m001-");
    drop(s);
    server.wait_stats("logout", |s| s["connections_logged_in"] == 0);
    for i in 2..=MESSAGES {
        server.publish(60, &payload(i));
    }
    let epoch = poll(&server, 60, "0")["epoch"].as_u64().expect("an epoch");

    let before = server.stats()["bytes_out"].as_u64().unwrap();
    // Clients that resume from the start and never read: a stream, a WebSocket and
    // an SSE stream, two of each.
    let mut idle = Vec::new();
    for _ in 0..2 {
        for request in [
            format!("GET /sub/60?since={epoch}-0 HTTP/1.1\r\nHost: t\r\n\r\n"),
            format!(
                "GET /ws/60?since={epoch}-0 HTTP/1.1\r\nHost: t\r\n{}\r\n",
                common::resume::WS_UPGRADE
            ),
            format!("GET /sse/60 HTTP/1.1\r\nHost: t\r\nLast-Event-ID: {epoch}-0\r\n\r\n"),
        ] {
            let mut s = tight(&server);
            s.write_all(request.as_bytes()).unwrap();
            idle.push(s);
        }
    }

    // A reader resumes after them on the same loop: once it has its replay, theirs
    // were written too.
    let mut reader = server.connect();
    write!(
        reader,
        "GET /sub/60?since={epoch}-0 HTTP/1.1\r\nHost: t\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    read_to(&mut reader, &mut buf, &format!("m{MESSAGES:03}-"));
    let text = String::from_utf8_lossy(&buf).into_owned();
    // The position says where the kept messages start, with the gap.
    let at = text.find("position ").expect("a position line");
    let line = text[at..].lines().next().unwrap();
    let got = numbers(&text);
    let first = *got.first().unwrap();

    // What the server took on for the six that never read (written to their
    // sockets, which take a good part of it, or queued): their replay, at most the
    // budget each. The gauge of queued bytes is refreshed every 10 ms tick: wait
    // until written and queued account for six replays like the reader's.
    let kept = (MESSAGES - first + 1) as usize;
    let stats = server.wait_stats("the idle clients' replays accounted", |s| {
        let out = s["bytes_out"].as_u64().unwrap() - before;
        out as usize + s["queued_bytes"].as_u64().unwrap() as usize >= 6 * (kept - 1) * SIZE
    });
    let queued = stats["queued_bytes"].as_u64().unwrap() as usize;
    assert!(
        queued <= idle.len() * MAX_QUEUED,
        "{queued} bytes queued for {} clients of {MAX_QUEUED} each",
        idle.len()
    );
    // Everything, the reader's replay and the /stats answers included.
    let taken = (stats["bytes_out"].as_u64().unwrap() - before) as usize + queued;
    assert!(
        taken <= (idle.len() + 1) * MAX_QUEUED + 64 * 1024,
        "{taken} bytes written or queued for {} resumers of {MAX_QUEUED} each",
        idle.len() + 1
    );
    drop(idle);
    // The reader: the newest that fit, after a gap, in order.
    assert!(first > 1, "the oldest were cut: {got:?}");
    assert_eq!(line, format!("position {epoch}-{} gap", first - 1));
    assert_eq!(
        got,
        (first..=MESSAGES).collect::<Vec<_>>(),
        "in order, none missing"
    );
    let replayed = (MESSAGES - first + 1) as usize * SIZE;
    assert!(replayed <= MAX_QUEUED, "{replayed}");

    // SSE and WebSocket readers get the same: the gap first, then the kept in order.
    let mut sse = server.connect();
    write!(
        sse,
        "GET /sse/60 HTTP/1.1\r\nHost: t\r\nLast-Event-ID: {epoch}-0\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    read_to(&mut sse, &mut buf, &format!("id: {epoch}-{MESSAGES}\n"));
    let text = String::from_utf8_lossy(&buf).into_owned();
    let gap = format!("event: gap\ndata: {{\"first\":{first},\"epoch\":{epoch}}}\n");
    assert!(text.contains(&gap), "{}", &text[..text.len().min(400)]);
    assert_eq!(numbers(&text), (first..=MESSAGES).collect::<Vec<_>>());

    let mut ws = server.connect();
    write!(
        ws,
        "GET /ws/60?since={epoch}-0 HTTP/1.1\r\nHost: t\r\n{}\r\n",
        common::resume::WS_UPGRADE
    )
    .unwrap();
    let mut buf = Vec::new();
    read_to(&mut ws, &mut buf, &format!("m{MESSAGES:03}-"));
    let text = String::from_utf8_lossy(&buf).into_owned();
    let position = format!(r#"{{"position":"{epoch}-{}","gap":true}}"#, first - 1);
    assert!(text.contains(&position), "{}", &text[..text.len().min(400)]);
    assert_eq!(numbers(&text), (first..=MESSAGES).collect::<Vec<_>>());
}

#[test]
fn an_sse_resume_over_http2_gets_the_newest_that_fit_after_a_gap() {
    let pki = tls_common::Pki::new();
    let server = pki.serve(&["--max-queued", &MAX_QUEUED.to_string()]);
    let client = pki.client();
    let ca = pki.ca_file.to_str().unwrap();
    let url = |path: &str| format!("https://localhost:{}{path}", server.addr.port());
    // User 61's history: one message while online, 63 while offline.
    let online = Curl::start(&["--http2", "--cacert", ca, &url("/sse/61")]);
    online.until("retry:");
    tls_common::wait_stats(&server, &client, "login", |s| {
        s["connections_logged_in"] == 1
    });
    tls_common::publish(&server, &client, 61, &payload(1));
    online.until("m001-");
    drop(online);
    tls_common::wait_stats(&server, &client, "logout", |s| {
        s["connections_logged_in"] == 0
    });
    for i in 2..=MESSAGES {
        tls_common::publish(&server, &client, 61, &payload(i));
    }
    let (_, body) = tls_common::request(&server, &client, "GET", "/poll/61?since=0", b"");
    let answer: serde_json::Value = serde_json::from_str(body.trim()).unwrap();
    let epoch = answer["epoch"].as_u64().expect("an epoch");

    let last_event = format!("Last-Event-ID: {epoch}-0");
    let sse = Curl::start(&[
        "--http2",
        "--cacert",
        ca,
        "-H",
        &last_event,
        &url("/sse/61"),
    ]);
    let mut lines = sse.until(&format!("id: {epoch}-{MESSAGES}"));
    lines.extend(sse.until(&format!("m{MESSAGES:03}-")));
    let text = lines.join("\n");
    let gap = text.find("event: gap").expect("a gap event");
    let got = numbers(&text[gap..]);
    let first = *got.first().expect("messages after the gap");
    assert!(first > 1, "the oldest were cut: {got:?}");
    assert!(
        text[gap..].contains(&format!("data: {{\"first\":{first},\"epoch\":{epoch}}}")),
        "{}",
        &text[gap..gap + 200]
    );
    assert_eq!(got, (first..=MESSAGES).collect::<Vec<_>>());
    assert!((MESSAGES - first + 1) as usize * SIZE <= MAX_QUEUED);
}
