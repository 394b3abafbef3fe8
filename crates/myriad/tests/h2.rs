//! HTTP/2 (ALPN `h2`) on the TLS listener, issue 13, with real clients: the `h2` crate
//! (SSE, chunked streaming, long-poll and publishing multiplexed on one connection;
//! a stream that stops reading), curl `--http2`, and a raw frame client for streams
//! beyond `--max-streams-per-connection` and malformed frames.

mod common;
mod h2_common;
mod tls_common;

use common::Curl;
use h2_common::*;
use std::process::Command;
use tls_common::*;

/// Frame types and codes as RFC 9113 numbers them (independent of the server's).
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const GOAWAY: u8 = 7;
const END_HEADERS: u8 = 4;
const END_STREAM: u8 = 1;

fn rst_code(f: &RawFrame) -> u32 {
    u32::from_be_bytes([f.payload[0], f.payload[1], f.payload[2], f.payload[3]])
}

#[test]
fn one_h2_connection_carries_sse_streams_a_poll_and_publishes() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let tls_client = pki.client();
    let logged_in = || {
        stats(&server, &tls_client)["connections_logged_in"]
            .as_u64()
            .unwrap()
    };
    let rt = runtime();
    rt.block_on(async {
        let client = h2_connect(&server, &pki.ca_file, 1 << 20).await;
        let sse = Some("text/event-stream");
        let mut sse1 = h2_request(&client, "GET", "/sse/1", sse, b"")
            .await
            .unwrap();
        let mut sse3 = h2_request(&client, "GET", "/sub/3", sse, b"")
            .await
            .unwrap();
        let mut chunked = h2_request(&client, "GET", "/sub/2", None, b"")
            .await
            .unwrap();
        assert_eq!(sse1.status(), 200);
        assert_eq!(sse1.headers()["content-type"], "text/event-stream");
        assert!(sse1.headers().get("connection").is_none());
        let (mut t1, mut t2, mut t3) = (String::new(), String::new(), String::new());
        body_until(sse1.body_mut(), &mut t1, "retry:").await;
        body_until(sse3.body_mut(), &mut t3, "retry:").await;
        body_until(chunked.body_mut(), &mut t2, "welcome 2").await;
        // A long-poll waits on the same connection; a publish answers it.
        let poll = tokio::spawn({
            let client = client.clone();
            async move {
                let mut r = h2_request(&client, "GET", "/poll/4", None, b"")
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                read_to_end(r.body_mut()).await
            }
        });
        let wait = std::time::Instant::now();
        while logged_in() != 4 {
            assert!(wait.elapsed() < TIMEOUT, "{}", logged_in());
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        // Publishing over the same connection: POST bodies in DATA frames.
        for (user, text) in [(1, "one"), (2, "two"), (3, "three"), (4, "four")] {
            let mut r = h2_request(
                &client,
                "POST",
                &format!("/pub/{user}"),
                None,
                text.as_bytes(),
            )
            .await
            .unwrap();
            assert_eq!(r.status(), 200);
            let reply = read_to_end(r.body_mut()).await;
            assert_eq!(reply.trim(), r#"{"connections":1,"users":1}"#);
        }
        body_until(sse1.body_mut(), &mut t1, "data: one").await;
        body_until(chunked.body_mut(), &mut t2, "two").await;
        body_until(sse3.body_mut(), &mut t3, "data: three").await;
        let answered = tokio::time::timeout(TIMEOUT, poll).await.unwrap().unwrap();
        assert!(answered.contains("four"), "{answered}");
        // One TCP connection for the three subscriptions (the other one is this
        // `/stats` request's own).
        let stats = stats(&server, &tls_client);
        assert_eq!(stats["connections_logged_in"], 3, "{stats}");
        assert_eq!(stats["connections"], 2, "{stats}");
        // A stream the client resets logs out; the others go on.
        drop(sse3);
        let wait = std::time::Instant::now();
        while logged_in() != 2 {
            assert!(wait.elapsed() < TIMEOUT, "{}", logged_in());
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let mut r = h2_request(&client, "POST", "/pub/1", None, b"again")
            .await
            .unwrap();
        read_to_end(r.body_mut()).await;
        body_until(sse1.body_mut(), &mut t1, "data: again").await;
    });
}

fn curl(args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--http2", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl must be installed");
    assert!(out.status.success(), "curl {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn curl_http2_streams_sse_polls_and_publishes() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let ca = pki.ca_file.to_str().unwrap();
    let url = |path: &str| format!("https://localhost:{}{path}", server.addr.port());
    let version = curl(&[
        "--cacert",
        ca,
        "-o",
        "/dev/null",
        "-w",
        "%{http_version}",
        &url("/stats"),
    ]);
    assert_eq!(version, "2");
    let sse = Curl::start(&[
        "--http2",
        "--cacert",
        ca,
        "-H",
        "Accept: text/event-stream",
        &url("/sse/9"),
    ]);
    sse.until("retry:");
    let stream = Curl::start(&["--http2", "--cacert", ca, &url("/sub/9")]);
    stream.until("welcome 9");
    let client = pki.client();
    wait_stats(&server, &client, "two logins", |s| {
        s["connections_logged_in"] == 2
    });
    let reply = curl(&["--cacert", ca, "-d", "over h2", &url("/pub/9")]);
    assert_eq!(reply.trim(), r#"{"connections":2,"users":1}"#);
    sse.until("data: over h2");
    stream.until("over h2");
    let polled = curl(&["--cacert", ca, &url("/poll/9?since=0")]);
    assert!(polled.contains("over h2"), "{polled}");
    // Errors keep their status over HTTP/2.
    let status = curl(&[
        "--cacert",
        ca,
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &url("/nowhere"),
    ]);
    assert_eq!(status, "404");
}

#[test]
fn streams_beyond_the_limit_are_refused() {
    let pki = Pki::new();
    let server = pki.serve(&["--max-streams-per-connection", "2"]);
    let mut raw = RawH2::start(&server, &pki.ca_file, &[]);
    let settings = raw.until("server SETTINGS", |f| f.kind == SETTINGS && f.flags == 0);
    let advertised: Vec<(u16, u32)> = settings
        .payload
        .chunks(6)
        .map(|e| {
            (
                u16::from_be_bytes([e[0], e[1]]),
                u32::from_be_bytes([e[2], e[3], e[4], e[5]]),
            )
        })
        .collect();
    assert!(
        advertised.contains(&(3, 2)),
        "MAX_CONCURRENT_STREAMS: {advertised:?}"
    );
    assert!(
        advertised.contains(&(1, 0)),
        "HEADER_TABLE_SIZE: {advertised:?}"
    );
    let mut three = Vec::new();
    for id in [1u32, 3, 5] {
        let block = get_block(&format!("/sse/{id}"), "text/event-stream");
        three.extend(frame(HEADERS, END_HEADERS | END_STREAM, id, &block));
    }
    raw.send(&three);
    let refused = raw.until("RST_STREAM", |f| f.kind == RST_STREAM);
    assert_eq!(
        (refused.stream, rst_code(&refused)),
        (5, 7),
        "REFUSED_STREAM on stream 5"
    );
    for id in [1u32, 3] {
        raw.until("HEADERS", |f| f.kind == HEADERS && f.stream == id);
    }
    // Once a stream ends, a new one fits.
    raw.send(&frame(RST_STREAM, 0, 1, &8u32.to_be_bytes()));
    raw.send(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        7,
        &get_block("/sse/7", "text/event-stream"),
    ));
    let ok = raw.until("HEADERS or RST_STREAM on 7", |f| f.stream == 7);
    assert_eq!(ok.kind, HEADERS, "{ok:?}");
}

#[test]
fn malformed_frames_get_goaway_with_their_code_and_the_server_goes_on() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let cases: Vec<(&str, Vec<u8>, u32)> = vec![
        ("PING of 7 bytes", frame(6, 0, 0, &[0; 7]), 0x6),
        ("DATA on stream 0", frame(0, 0, 0, b"x"), 0x1),
        (
            "frame over 16,384 bytes",
            frame(0, 0, 1, &vec![0; 20_000]),
            0x6,
        ),
        (
            "HPACK index out of range",
            frame(HEADERS, END_HEADERS, 1, &[0xfe]),
            0x9,
        ),
        (
            "even stream id",
            frame(HEADERS, END_HEADERS, 2, &get_block("/sse/1", "*/*")),
            0x1,
        ),
        (
            "CONTINUATION without HEADERS",
            frame(9, END_HEADERS, 1, &[]),
            0x1,
        ),
        ("SETTINGS on a stream", frame(SETTINGS, 0, 1, &[]), 0x1),
        (
            "window over 2^31-1",
            frame(8, 0, 0, &0x7fff_ffffu32.to_be_bytes()),
            0x3,
        ),
    ];
    for (what, bytes, code) in cases {
        let mut raw = RawH2::start(&server, &pki.ca_file, &[]);
        raw.send(&bytes);
        assert_eq!(raw.goaway_code(), code, "{what}");
        // The connection ends after the GOAWAY.
        while raw.read_frame().is_some() {}
    }
    let mut bad = RawH2::connect(&server, &pki.ca_file);
    bad.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(bad.goaway_code(), 0x1, "not the preface");
    // Still serving.
    let mut raw = RawH2::start(&server, &pki.ca_file, &[]);
    raw.send(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &get_block("/sse/1", "text/event-stream"),
    ));
    let ok = raw.until("HEADERS", |f| f.stream == 1);
    assert_eq!(ok.kind, HEADERS);
    assert_eq!(ok.payload[0], 0x88, ":status 200 from the static table");
    let _ = GOAWAY;
}

#[test]
fn a_stream_that_stops_reading_is_reset_and_the_others_go_on() {
    let pki = Pki::new();
    let server = pki.serve(&["--max-queued", "16384"]);
    let tls_client = pki.client();
    let rt = runtime();
    rt.block_on(async {
        // A large connection window: the client stops reading one stream, not the
        // connection (RFC 9113 flow control is per stream and per connection).
        let client = h2_connect(&server, &pki.ca_file, 8 << 20).await;
        let other = h2_connect(&server, &pki.ca_file, 8 << 20).await;
        let sse = Some("text/event-stream");
        let mut stalled = h2_request(&client, "GET", "/sse/1", sse, b"")
            .await
            .unwrap();
        let mut reading = h2_request(&client, "GET", "/sse/2", sse, b"")
            .await
            .unwrap();
        let mut elsewhere = h2_request(&other, "GET", "/sse/2", sse, b"").await.unwrap();
        let (mut a, mut b) = (String::new(), String::new());
        body_until(reading.body_mut(), &mut a, "retry:").await;
        body_until(elsewhere.body_mut(), &mut b, "retry:").await;
        let payload = "x".repeat(4000);
        for i in 0..40 {
            for user in [1, 2] {
                let body = format!("{i} {payload}");
                let mut r = h2_request(
                    &client,
                    "POST",
                    &format!("/pub/{user}"),
                    None,
                    body.as_bytes(),
                )
                .await
                .unwrap();
                read_to_end(r.body_mut()).await;
            }
            body_until(reading.body_mut(), &mut a, &format!("data: {i} ")).await;
            body_until(elsewhere.body_mut(), &mut b, &format!("data: {i} ")).await;
        }
        // The stalled stream got what its window allowed, then a reset (CANCEL): the
        // 64 KB window plus the 16 KB queue hold ~20 of the 40 messages.
        let mut got = 0;
        let reset = loop {
            match tokio::time::timeout(TIMEOUT, stalled.body_mut().data())
                .await
                .unwrap()
            {
                Some(Ok(chunk)) => got += chunk.len(),
                Some(Err(e)) => break e,
                None => panic!("stream ended cleanly"),
            }
        };
        assert_eq!(reset.reason(), Some(h2::Reason::CANCEL), "{reset}");
        assert!(
            (65_535..40 * 4000).contains(&got),
            "{got} bytes before the reset"
        );
        let stats = stats(&server, &tls_client);
        assert_eq!(stats["connections_logged_in"], 2, "{stats}");
    });
}

#[test]
fn a_connection_whose_socket_stops_draining_is_closed() {
    let pki = Pki::new();
    let server = pki.serve(&["--max-queued", "65536"]);
    // Windows as large as HTTP/2 allows, then never a read: flow control lets
    // everything through, so the socket (and then the server's queue) fills.
    let mut raw = RawH2::start(&server, &pki.ca_file, &[(4, 0x7fff_ffff)]);
    raw.send(&frame(8, 0, 0, &(0x7fff_ffffu32 - 65_535).to_be_bytes()));
    raw.send(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &get_block("/sse/1", "text/event-stream"),
    ));
    let client = pki.client();
    wait_stats(&server, &client, "the login", |s| {
        s["connections_logged_in"] == 1
    });
    let payload = "y".repeat(60_000);
    let mut sent = 0;
    while stats(&server, &client)["connections_logged_in"] == 1 {
        assert!(
            sent < 2_000,
            "still subscribed after {sent} messages of 60 KB"
        );
        publish(&server, &client, 1, &payload);
        sent += 1;
    }
    let stats = stats(&server, &client);
    assert_eq!(stats["connections_logged_in"], 0, "{stats}");
    drop(raw);
}

/// `bench broadcast --h2 --streams-per-connection 50` once lost most
/// subscriptions at 10 msg/s. The flood client (the `h2` crate) closed its connections
/// with GOAWAY ENHANCE_YOUR_CALM: 50 streams × a few messages of small DATA frames
/// waiting for their stream tasks spent the crate's default budget for small frames.
/// A burst of 60 messages (3,000 small frames per connection at once) must reach
/// every stream of a real `myriad flood --h2` run.
#[test]
fn flood_h2_keeps_every_stream_through_a_burst_of_small_frames() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let client = pki.client();
    let url = format!("https://localhost:{}/sub/%d", server.addr.port());
    let flood = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(["flood", "--url", &url, "-n", "100", "--users", "1-1"])
        .args([
            "--transport",
            "sse",
            "--h2",
            "--streams-per-connection",
            "50",
        ])
        .args(["--rate", "0", "--hold", "6", "--max-time", "30"])
        .arg("--ca")
        .arg(&pki.ca_file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start myriad flood");
    wait_stats(&server, &client, "100 streams", |s| {
        s["connections_logged_in"] == 100
    });
    // Stamped (`ts=`): flood takes a first message without a stamp for a welcome.
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    let burst: String = (0..60)
        .map(|i| format!("{{\"subject\":1,\"data\":\"burst {i} ts={now_us}\"}}\n"))
        .collect();
    let (status, reply) = request(&server, &client, "POST", "/pub", burst.as_bytes());
    assert_eq!(status, 200, "{reply}");
    let out = flood.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(" 6000 messages"),
        "60 messages × 100 streams: {text}"
    );
}
