//! Graceful drain (SIGTERM, `--drain`): the server stops accepting, tells each
//! client to reconnect in its protocol's words, and exits 0.

mod common;

use common::*;
use std::io::Write;
use std::net::TcpStream;

fn open(server: &Server, request: &str, until: &str) -> (TcpStream, Vec<u8>) {
    let mut s = server.connect();
    s.write_all(request.as_bytes()).unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, until);
    (s, buf)
}

#[test]
fn sigterm_tells_every_client_to_reconnect_and_exits_0() {
    let mut server = Server::start(&["--drain", "1"]);
    let (mut stream, _) = open(
        &server,
        "GET /sub/1 HTTP/1.1\r\nHost: t\r\n\r\n",
        "welcome 1",
    );
    let (mut sse, _) = open(&server, "GET /sse/2 HTTP/1.1\r\nHost: t\r\n\r\n", "retry:");
    let (mut ws, _) = open(
        &server,
        "GET /ws/3 HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        "\r\n\r\n",
    );
    let mut poll = server.connect();
    poll.write_all(b"GET /poll/4 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    server.wait_stats("four clients", |s| s["connections_logged_in"] == 4);

    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(server.pid() as i32, libc::SIGTERM) }, 0);

    let stream_out = String::from_utf8_lossy(&read_all(&mut stream)).into_owned();
    assert!(
        stream_out.ends_with("0\r\n\r\n"),
        "final chunk: {stream_out:?}"
    );
    let sse_out = String::from_utf8_lossy(&read_all(&mut sse)).into_owned();
    assert!(
        sse_out.contains("event: reconnect\n") && sse_out.ends_with("retry: 2000\n\n"),
        "{sse_out:?}"
    );
    let ws_out = read_all(&mut ws);
    // An unmasked close frame whose code is 1012 (0x03f4), "service restart".
    let close = ws_out
        .windows(4)
        .any(|w| w[0] == 0x88 && w[2] == 0x03 && w[3] == 0xf4);
    assert!(close, "close 1012: {ws_out:?}");
    let poll_out = String::from_utf8_lossy(&read_all(&mut poll)).into_owned();
    assert!(poll_out.starts_with("HTTP/1.1 200"), "{poll_out:?}");
    assert!(poll_out.contains("\"messages\":[]"), "{poll_out:?}");

    let status = server.child.wait().unwrap();
    assert!(status.success(), "exit status after a drain: {status}");
    assert!(
        TcpStream::connect(server.addr).is_err(),
        "nobody listens any more"
    );
}
