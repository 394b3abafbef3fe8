//! Hostile input added with issue 10 (strictness, resume and token parameters,
//! bounded batch and edge bodies), one row per attack with the exact status a
//! client gets. The older rows are in `hostile/`; both tables are the contract
//! of D2 and of the failure table in the crate doc.

use wire::{
    parse_batch_with, parse_edges_with, parse_head, route, BatchLimits, Limits, Route, Since,
};

/// The status a head gets: from `parse_head`, then from `route`; 200 if routed.
fn head_status(buf: &[u8]) -> u16 {
    match parse_head(buf, &Limits::default()) {
        Err(e) => e.status(),
        Ok(None) => panic!("incomplete: {:?}", String::from_utf8_lossy(buf)),
        Ok(Some((h, _))) => route(&h).map_or_else(|e| e.status(), |_| 200),
    }
}

#[test]
fn hostile_heads_strict() {
    let cases: Vec<(&str, &[u8], u16)> =
        vec![
        ("sane baseline", b"GET /sub/1 HTTP/1.1\r\nHost: h\r\n\r\n", 200),
        ("bare LF everywhere", b"GET /sub/1 HTTP/1.1\nHost: h\n\n", 400),
        (
            "bare LF after the request line only",
            b"GET /sub/1 HTTP/1.1\nHost: h\r\n\r\n",
            400,
        ),
        (
            "bare LF ending one header",
            b"GET /sub/1 HTTP/1.1\r\nHost: h\n\r\n",
            400,
        ),
        (
            "bare LF ending the head",
            b"GET /sub/1 HTTP/1.1\r\nHost: h\r\n\n",
            400,
        ),
        (
            "bare LF smuggling a second Content-Length",
            b"POST /pub/1 HTTP/1.1\r\nX: a\nContent-Length: 5\r\nContent-Length: 0\r\n\r\nhello",
            400,
        ),
        (
            "bare LF empty line before the request",
            b"\nGET /sub/1 HTTP/1.1\r\n\r\n",
            400,
        ),
        (
            "duplicate Host",
            b"GET /sub/1 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            400,
        ),
        (
            "duplicate Host, same value",
            b"GET /sub/1 HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n",
            400,
        ),
        (
            "duplicate Origin",
            b"GET /ws/1 HTTP/1.1\r\nOrigin: a\r\nOrigin: b\r\n\r\n",
            400,
        ),
        (
            "absolute-form target",
            b"GET http://host/sub/1 HTTP/1.1\r\nHost: host\r\n\r\n",
            200,
        ),
        (
            "absolute-form with userinfo and port",
            b"GET http://u:p@host:80/sub/1?since=3 HTTP/1.1\r\n\r\n",
            200,
        ),
        (
            "absolute-form without a host",
            b"GET http:///sub/1 HTTP/1.1\r\n\r\n",
            400,
        ),
        (
            "absolute-form to an unknown path",
            b"GET http://host/admin HTTP/1.1\r\n\r\n",
            404,
        ),
        (
            "other scheme",
            b"GET ftp://host/sub/1 HTTP/1.1\r\n\r\n",
            404,
        ),
        ("resume with epoch", b"GET /sub/1?since=7-3 HTTP/1.1\r\n\r\n", 200),
        ("since not a number", b"GET /sub/1?since=x HTTP/1.1\r\n\r\n", 400),
        ("since with a sign", b"GET /sse/1?since=-3 HTTP/1.1\r\n\r\n", 400),
        (
            "epoch past u32",
            b"GET /sub/1?since=4294967296-1 HTTP/1.1\r\n\r\n",
            400,
        ),
        ("since twice", b"GET /sub/1?since=1&since=1 HTTP/1.1\r\n\r\n", 400),
        ("token twice", b"GET /poll/1?token=a&token=b HTTP/1.1\r\n\r\n", 400),
        ("token bad escape", b"GET /sse/1?token=%G1 HTTP/1.1\r\n\r\n", 400),
        (
            "token escaping invalid UTF-8",
            b"GET /sse/1?token=%C3%28 HTTP/1.1\r\n\r\n",
            400,
        ),
        (
            "Last-Event-ID with epoch",
            b"GET /sse/1 HTTP/1.1\r\nLast-Event-ID: 9-1\r\n\r\n",
            200,
        ),
        (
            "Last-Event-ID with three parts",
            b"GET /sse/1 HTTP/1.1\r\nLast-Event-ID: 9-1-2\r\n\r\n",
            400,
        ),
        (
            "Last-Event-ID with leading zero",
            b"GET /sse/1 HTTP/1.1\r\nLast-Event-ID: 01\r\n\r\n",
            400,
        ),
    ];
    let mut failures = Vec::new();
    for (name, buf, want) in &cases {
        let got = head_status(buf);
        if got != *want {
            failures.push(format!("{name}: want {want}, got {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn resume_and_token_reach_the_route() {
    let buf = b"GET /ws/9?token=a.b.c&since=12-40 HTTP/1.1\r\nUpgrade: websocket\r\n\
        Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
        Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: https://app\r\n\r\n";
    let (head, _) = parse_head(buf, &Limits::default()).unwrap().unwrap();
    assert_eq!(head.origin.as_deref(), Some("https://app"));
    match route(&head).unwrap() {
        Route::Subscribe { since, token, .. } => {
            assert_eq!(
                since,
                Some(Since {
                    epoch: Some(12),
                    seq: 40
                })
            );
            assert_eq!(token.as_deref(), Some("a.b.c"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn hostile_batches() {
    let limits = BatchLimits {
        max_item: 16,
        max_items: 3,
    };
    let item = |s: &str| format!("{{\"subject\":1,\"data\":\"{s}\"}}\n");
    let big_array = format!("{{\"subject\":1,\"data\":[{}1]}}", "1,".repeat(100_000));
    let cases: Vec<(&str, String, u16)> = vec![
        ("sane", item("hello"), 200),
        ("item at the limit", item(&"a".repeat(16)), 200),
        ("item over the limit", item(&"a".repeat(17)), 413),
        (
            "item over the limit only once unescaped",
            item(&"\\u00e9".repeat(9)),
            413,
        ),
        ("four items", item("a").repeat(4), 413),
        ("array instead of object", "[1,\"x\"]\n".into(), 400),
        ("data as a huge array", big_array, 413),
        (
            "data as a small array",
            "{\"subject\":1,\"data\":[1,1]}".into(),
            400,
        ),
        (
            "duplicate data",
            "{\"subject\":1,\"data\":\"a\",\"data\":\"b\"}".into(),
            400,
        ),
        (
            "unknown field holding an object",
            "{\"subject\":1,\"data\":\"a\",\"x\":{\"y\":[1,{}]}}".into(),
            200,
        ),
        (
            "lone surrogate escape",
            "{\"subject\":1,\"data\":\"\\ud800\"}".into(),
            400,
        ),
        ("NUL byte in a line", "{\"subject\":1,\0}".into(), 400),
    ];
    let mut failures = Vec::new();
    for (name, body, want) in &cases {
        let got = match parse_batch_with(body.as_bytes(), &limits) {
            Ok(_) => 200,
            Err(e) => {
                assert!(e.to_string().len() < 200, "{name}: {e}");
                e.status()
            }
        };
        if got != *want {
            failures.push(format!("{name}: want {want}, got {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn hostile_edge_lists() {
    let blank_lines = "\n".repeat(100_000);
    let cases: Vec<(&str, String, u16)> = vec![
        ("sane", "1 2\n3 4\n".into(), 200),
        ("at the limit", "1 2\n".repeat(5), 200),
        ("one edge over", "1 2\n".repeat(6), 413),
        (
            "blank lines do not count",
            format!("{blank_lines}1 2\n"),
            200,
        ),
        ("comment lines do not count", "#\n".repeat(10) + "1 2", 200),
        ("three ids", "1 2 3".into(), 400),
    ];
    for (name, body, want) in &cases {
        let got = parse_edges_with(body.as_bytes(), 5).map_or_else(|e| e.status(), |_| 200);
        assert_eq!(got, *want, "{name}");
    }
}
