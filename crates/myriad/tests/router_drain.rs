//! The router role drains on SIGTERM as a gateway does: new publishes are refused
//! clearly (503 + `Retry-After` on its publish port and through a gateway, an error
//! to a back-end's NATS request), what it had taken is finished, and it exits 0.
//! Real nats-server, real router and gateway processes.

mod common;

use common::cluster::{backend_request, gateway, publish_port_of, Nats};
use common::{read_until, spawn_logging};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

struct Router {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Router {
    /// The next log line containing `needle` (within 30 s), and every line before it.
    fn wait_line(&self, needle: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => {
                    seen.push(line);
                    return seen;
                }
                Ok(line) => seen.push(line),
                Err(_) => panic!("no {needle:?} from the router; it logged {seen:#?}"),
            }
        }
    }
}

fn router(nats: &Nats) -> (Router, SocketAddr) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_myriad"));
    cmd.args(["serve", "--role", "router", "--nats", &nats.url])
        .args(["--store", "memory", "--publish-listen", "127.0.0.1:0"])
        // Long: the router must end because it is done, not because time is up.
        .args(["--drain", "60"]);
    let mut child = spawn_logging(&mut cmd);
    let stderr = child.stderr.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let router = Router { child, lines };
    let start = router.wait_line("myriad router serving").pop().unwrap();
    (router, publish_port_of(&start))
}

fn response(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn sigterm_refuses_new_publishes_finishes_and_exits_0() {
    let nats = Nats::start();
    let (mut router, port) = router(&nats);
    let gw = gateway(&nats);
    let (mut sub, mut buf) = common::subscribe_stream(&gw, 7);
    // Serving as usual: a publish through the port reaches the subscriber.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reply = common::cluster::publish_at(port, 7, "before");
        if reply["connections"] == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the router never saw the login: {reply}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    read_until(&mut sub, &mut buf, "before");

    // A back-end that has sent half a request when the drain begins: its connection
    // is in flight and keeps the router from ending until it is answered.
    let mut half = TcpStream::connect(port).unwrap();
    half.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    half.write_all(b"POST /pub/7 HTTP/1.1\r\nHost: t\r\n")
        .unwrap();
    // The port accepts in arrival order: a publish on a connection opened after it
    // answered means the half request's connection was accepted, before the drain.
    common::cluster::publish_at(port, 7, "probe");

    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(router.child.id() as i32, libc::SIGTERM) },
        0
    );
    router.wait_line("draining");

    // A new connection to the port: 503 + Retry-After, not a refused connect.
    let mut late = TcpStream::connect(port).expect("the port still listens while draining");
    late.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    late.write_all(b"POST /pub/7 HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx")
        .unwrap();
    let text = response(&mut late);
    assert!(text.starts_with("HTTP/1.1 503 "), "{text}");
    assert!(
        text.contains("Retry-After: 1") && text.contains("draining"),
        "{text}"
    );

    // A publish through the gateway: the router refuses it, the gateway says 503.
    let (status, body) = gw.request("POST", "/pub/7", b"via-gateway");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("draining"), "{body}");

    // A back-end's NATS request gets the error as its answer.
    let replies = backend_request(&nats, 7, "via-nats");
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert!(replies[0].contains("draining"), "{replies:?}");

    // The half-sent request, finished now: refused too, and its connection closed.
    half.write_all(b"Content-Length: 8\r\n\r\nvia-half")
        .unwrap();
    let text = response(&mut half);
    assert!(text.starts_with("HTTP/1.1 503 "), "{text}");
    assert!(text.contains("Retry-After: 1"), "{text}");

    // Nothing left in flight: NATS flushed, exit 0, long before --drain's 60 s.
    let lines = router.wait_line("drained: NATS flushed");
    assert!(
        !lines.iter().any(|l| l.contains("drain time is up")),
        "{lines:#?}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = router.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the router did not exit after its drain"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status after a drain: {status}");
    // None of the refused publishes went out (the stream ends with the gateway's
    // link to a router that is gone, or stays silent).
    sub.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut rest = [0u8; 4096];
    let n = sub.read(&mut rest).unwrap_or(0);
    let rest = String::from_utf8_lossy(&rest[..n]);
    assert!(!rest.contains("via-"), "{rest:?}");
}
