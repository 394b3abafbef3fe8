//! docs/protocol.md's endpoint tables stay true: every `METHOD /path` they list is
//! served (asked of a real server: the client listener, the admin listener, and a real
//! router's publish port over a nats-server of the test's own, none may answer 404),
//! and every path those listeners serve is listed (the client listener's from the
//! route parser, `crates/wire/src/route.rs`; the admin listener's and the publish
//! port's from the 404 text that names what they serve).

mod common;

use common::cluster::{publish_port_of, Nats, Router};
use common::Server;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

const PROTOCOL: &str = include_str!("../../../docs/protocol.md");
/// The route parser of the client listener.
const ROUTE_RS: &str = include_str!("../../wire/src/route.rs");
const CLIENT: &str = "### Client listener (`--listen`)";
const ADMIN: &str = "### Admin listener (`--admin`)";
const PORT: &str = "### The router's publish port (`--publish-listen`)";

/// One endpoint as documented: method and path (`/sub/<id>`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Endpoint {
    method: String,
    path: String,
}

impl Endpoint {
    /// The path's segments, placeholders as values: `<channel>` as a channel's
    /// name, the others (`<id>`) as `1`.
    fn concrete(&self) -> String {
        self.path
            .split('/')
            .map(|s| match s {
                "<channel>" => "news",
                s if s.starts_with('<') => "1",
                s => s,
            })
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The first segment and the number of segments (`/subscriptions/<a>/<b>`: 3).
    fn shape(&self) -> (String, usize) {
        let segs: Vec<&str> = self.path.trim_start_matches('/').split('/').collect();
        (segs[0].to_string(), segs.len())
    }
}

/// `METHOD /path` items in backticks in the first cell of each row of the first table
/// after `heading`.
fn endpoints_after(heading: &str) -> Vec<Endpoint> {
    let start = PROTOCOL
        .find(heading)
        .unwrap_or_else(|| panic!("docs/protocol.md has no section {heading:?}"));
    let mut out = Vec::new();
    let rows = PROTOCOL[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2);
    for row in rows {
        let first = row
            .trim_matches('|')
            .split(" | ")
            .next()
            .unwrap_or_default();
        for code in first.split('`').skip(1).step_by(2) {
            let mut words = code.split_whitespace();
            let (Some(method), Some(path), None) = (words.next(), words.next(), words.next())
            else {
                continue;
            };
            if method.chars().all(|c| c.is_ascii_uppercase()) && path.starts_with('/') {
                out.push(Endpoint {
                    method: method.into(),
                    path: path.into(),
                });
            }
        }
    }
    assert!(
        !out.is_empty(),
        "docs/protocol.md {heading:?}: no `METHOD /path` rows"
    );
    out
}

/// The status line's code of `method path` on `addr`; the body is not waited for
/// (subscriptions never end).
fn status(addr: SocketAddr, e: &Endpoint) -> u16 {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!(
        "{} {} HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        e.method,
        e.concrete()
    );
    s.write_all(request.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            other => panic!("{e:?} on {addr}: no status line ({other:?}), got {head:?}"),
        }
    }
    let line = String::from_utf8_lossy(&head);
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{e:?}: bad status line {line:?}"))
}

/// The whole answer to `GET path` on `addr`.
fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Every documented endpoint answered by `addr` with something else than 404.
fn all_served(addr: SocketAddr, heading: &str) {
    let unserved: Vec<String> = endpoints_after(heading)
        .iter()
        .filter(|e| status(addr, e) == 404)
        .map(|e| format!("{} {}", e.method, e.path))
        .collect();
    assert!(
        unserved.is_empty(),
        "docs/protocol.md {heading:?} lists {unserved:?}, which the server answers 404: \
         fix the row or the route"
    );
}

/// `(first segment, segment count)` of every arm of `wire::route`'s match, one per name
/// (`("sub" | "test", Some(id), None)` gives `("sub", 2)` and `("test", 2)`).
fn routed_shapes() -> BTreeSet<(String, usize)> {
    let start = ROUTE_RS
        .find("pub fn route(")
        .expect("route.rs has `pub fn route(`");
    let body = &ROUTE_RS[start..];
    let body = &body[..body.find("\n}\n").expect("the end of `route`")];
    let mut shapes = BTreeSet::new();
    for line in body.lines().map(str::trim) {
        let Some(arm) = line
            .strip_prefix('(')
            .filter(|_| line.starts_with("(\""))
            .and_then(|l| l.split_once(") =>"))
            .map(|(arm, _)| arm)
        else {
            continue;
        };
        let parts: Vec<&str> = arm.split(", ").collect();
        assert_eq!(parts.len(), 3, "route.rs arm {line:?}: update this test");
        let count = 1 + parts[1..].iter().filter(|p| p.starts_with("Some")).count();
        for name in parts[0].split('|') {
            shapes.insert((name.trim().trim_matches('"').to_string(), count));
        }
    }
    assert!(shapes.len() >= 8, "read only {shapes:?} from route.rs");
    shapes
}

#[test]
fn every_client_and_admin_endpoint_is_served_and_every_route_listed() {
    // A long-poll with nothing to say answers after `--poll-timeout`.
    let server = Server::start(&["--admin", "127.0.0.1:0", "--poll-timeout", "1"]);
    all_served(server.addr, CLIENT);
    let admin = server.admin.expect("admin= on the start line");
    all_served(admin, ADMIN);

    let documented: BTreeSet<(String, usize)> = endpoints_after(CLIENT)
        .iter()
        .map(Endpoint::shape)
        .collect();
    let missing: Vec<String> = routed_shapes()
        .into_iter()
        .filter(|shape| !documented.contains(shape))
        .map(|(name, count)| format!("/{name} with {count} segment(s)"))
        .collect();
    assert!(
        missing.is_empty(),
        "crates/wire/src/route.rs routes {missing:?}, which docs/protocol.md {CLIENT:?} \
         does not list: add a row"
    );

    // The admin listener's 404 names what it serves: "try /, /metrics, …".
    let listed: Vec<String> = endpoints_after(ADMIN).into_iter().map(|e| e.path).collect();
    let not_found = get(admin, "/no-such-page");
    let served = not_found
        .split("try ")
        .nth(1)
        .unwrap_or_else(|| panic!("the admin 404 no longer names its pages: {not_found}"));
    let missing: Vec<&str> = served
        .split(',')
        .map(str::trim)
        .filter(|p| !listed.iter().any(|l| l == p))
        .collect();
    assert!(
        missing.is_empty(),
        "the admin listener serves {missing:?}, which docs/protocol.md {ADMIN:?} does not list"
    );
}

#[test]
fn every_endpoint_of_the_publish_port_is_served_and_listed() {
    let nats = Nats::start();
    let (_router, line) = Router::start_with(&nats, "memory", &["--publish-listen", "127.0.0.1:0"]);
    let port = publish_port_of(&line);
    all_served(port, PORT);
    // Its 404 names what it serves: "serves POST /pub/<subject>, POST /pub and GET /healthz".
    let not_found = get(port, "/no-such-page");
    let listed = endpoints_after(PORT);
    let words: Vec<&str> = not_found
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .collect();
    let mut named = 0;
    for pair in words.windows(2) {
        if ["GET", "POST", "PUT", "DELETE"].contains(&pair[0]) && pair[1].starts_with('/') {
            named += 1;
            assert!(
                listed
                    .iter()
                    .any(|e| e.method == pair[0] && e.path == pair[1]),
                "the publish port serves {} {}, which docs/protocol.md {PORT:?} does not list",
                pair[0],
                pair[1]
            );
        }
    }
    assert!(
        named >= 2,
        "the publish port's 404 no longer names what it serves: {not_found}"
    );
}
