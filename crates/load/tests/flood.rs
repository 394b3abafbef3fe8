//! flood against a push server that is not myriad (tests/common): open counts,
//! message counts, stamp latencies, every transport, source binding, child processes,
//! and the failure paths.

mod common;
mod harness;

use common::{Kind, Server};
use harness::start;
use load::flood::{self, FloodArgs, FloodSummary, Transport};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn args(url: String, n: u64, transport: Transport) -> FloodArgs {
    FloodArgs {
        urls: vec![url],
        connections: n,
        rate: 0.0,
        transport,
        quiet: true,
        max_time: 60.0,
        ..Default::default()
    }
}

fn check_transport(kind: Kind, transport: Transport, n: u64) -> (FloodSummary, Server) {
    let server = Server::start(kind);
    let run = start(args(server.url("/sub/%d"), n, transport));
    server.wait_for(n as usize);
    server.heartbeat();
    server.broadcast("first");
    server.heartbeat();
    server.broadcast("second");
    let s = run.finish_after(2 * n);
    assert_eq!(s.opened, n, "{s:?}");
    assert_eq!(s.failed, 0, "{s:?}");
    // Welcome messages and heartbeats are not messages; both broadcasts are.
    assert_eq!(s.messages, 2 * n, "{s:?}");
    assert_eq!(s.closed, n, "closing at the end counts every connection");
    assert!(
        s.lat_p50_us > 0 && s.lat_p99_us >= s.lat_p50_us && s.lat_max_us >= s.lat_p99_us,
        "{s:?}"
    );
    // Stamps were taken on this machine moments earlier: far below a minute.
    assert!(s.lat_max_us < 60_000_000, "{s:?}");
    (s, server)
}

#[test]
fn stream_counts_opens_messages_and_latency() {
    let (s, server) = check_transport(Kind::Stream, Transport::Stream, 40);
    assert_eq!(s.peak_open, 40);
    let mut paths = server.paths.lock().unwrap().clone();
    paths.sort();
    let mut want: Vec<String> = (1..=40).map(|u| format!("/sub/{u}")).collect();
    want.sort();
    assert_eq!(paths, want, "the URL template gives users 1..=40");
}

#[test]
fn sse_counts_events() {
    check_transport(Kind::Sse, Transport::Sse, 10);
}

#[test]
fn websocket_counts_frames_and_answers_pings_masked() {
    let (_, server) = check_transport(Kind::Ws, Transport::Ws, 10);
    let end = Instant::now() + Duration::from_secs(10);
    while server.pongs.load(Ordering::Relaxed) < 20 {
        assert!(
            Instant::now() < end,
            "pongs: {}",
            server.pongs.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn long_poll_follows_since() {
    let server = Server::start(Kind::Poll);
    let run = start(args(server.url("/poll/%d"), 5, Transport::Poll));
    server.wait_for(5);
    server.broadcast("a");
    server.broadcast("b");
    let s = run.finish_after(10);
    assert_eq!((s.opened, s.messages, s.failed), (5, 10, 0), "{s:?}");
    // Later polls asked for messages after the ones already received.
    assert!(server
        .paths
        .lock()
        .unwrap()
        .iter()
        .any(|p| p.ends_with("since=2")));
}

#[test]
fn binds_each_connection_to_the_next_source_address() {
    let server = Server::start(Kind::Stream);
    let mut a = args(server.url("/sub/%d"), 30, Transport::Stream);
    a.sources = vec!["127.0.0.2-127.0.0.4".into()];
    a.users = Some("100-109".into());
    let run = start(a);
    server.wait_for(30);
    server.broadcast("x");
    let s = run.finish_after(30);
    assert_eq!(s.opened, 30);
    let mut by_ip: BTreeMap<String, usize> = BTreeMap::new();
    for ip in server.peers.lock().unwrap().iter() {
        *by_ip.entry(ip.to_string()).or_default() += 1;
    }
    let want: BTreeMap<String, usize> = [("127.0.0.2", 10), ("127.0.0.3", 10), ("127.0.0.4", 10)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    assert_eq!(by_ip, want);
    let paths = server.paths.lock().unwrap().clone();
    assert_eq!(
        paths.iter().filter(|p| *p == "/sub/100").count(),
        3,
        "users cycle through 100-109"
    );
}

#[test]
fn spreads_over_child_processes_past_the_per_process_limit() {
    let server = Server::start(Kind::Stream);
    let mut a = args(server.url("/sub/%d"), 1200, Transport::Stream);
    a.per_process = Some(500);
    a.rate = 3000.0;
    a.child_exe = Some(env!("CARGO_BIN_EXE_myriad-flood").into());
    let csv = tempfile::NamedTempFile::new().unwrap();
    a.csv = Some(csv.path().to_path_buf());
    let run = start(a);
    server.wait_for(1200);
    server.broadcast("all");
    let s = run.finish_after(1200);
    assert_eq!(s.processes, 3);
    assert_eq!(
        s.peak_open, 1200,
        "the largest per-second sum over the children"
    );
    assert_eq!((s.opened, s.failed, s.messages), (1200, 0, 1200), "{s:?}");
    assert!(s.lat_p99_us > 0);
    let text = std::fs::read_to_string(csv.path()).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(flood::CSV_HEADER));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 12));
    assert!(
        rows.iter().any(|r| r[1] == "1200"),
        "some second saw all 1200 open (summed over children)"
    );
    let users: std::collections::HashSet<String> =
        server.paths.lock().unwrap().iter().cloned().collect();
    assert_eq!(
        users.len(),
        1200,
        "each child took a distinct share of users"
    );
}

#[test]
fn unreachable_target_is_a_clear_error() {
    // Bind then drop a listener: the port is (almost certainly) closed now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = flood::run_with(
        args(
            format!("http://127.0.0.1:{port}/sub/%d"),
            5,
            Transport::Stream,
        ),
        &mut |_| {},
    )
    .expect_err("nothing listens there");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("is the server running") && msg.contains(&port.to_string()),
        "{msg}"
    );
}

#[test]
fn bad_status_counts_as_failure() {
    let server = Server::start(Kind::Forbidden);
    let mut a = args(server.url("/sub/%d"), 8, Transport::Stream);
    a.hold = Some(0.0);
    let s = flood::run_with(a, &mut |_| {}).unwrap();
    assert_eq!(
        (s.opened, s.failed, s.failures.bad_status),
        (0, 8, 8),
        "{s:?}"
    );
}

#[test]
fn gradual_close_after_hold_and_ticks_report_open() {
    let server = Server::start(Kind::Stream);
    let mut a = args(server.url("/sub/%d"), 20, Transport::Stream);
    a.hold = Some(1.5);
    a.close = flood::CloseMode::Gradual;
    a.close_secs = 0.5;
    let run = start(a);
    let s = run.handle.join().unwrap().unwrap();
    assert_eq!((s.opened, s.closed, s.failed), (20, 20, 0), "{s:?}");
    assert!(run.open.load(Ordering::Relaxed) <= 20);
    assert!(
        !run.stop.load(Ordering::Relaxed),
        "ended by itself after the hold"
    );
    assert!(run.messages.load(Ordering::Relaxed) == 0);
}

#[test]
fn explicit_process_count_always_uses_children() {
    let server = Server::start(Kind::Sse);
    let mut a = args(server.url("/sse/%d"), 10, Transport::Sse);
    a.procs = "2".into();
    a.child_exe = Some(env!("CARGO_BIN_EXE_myriad-flood").into());
    let run = start(a);
    server.wait_for(10);
    server.broadcast("m");
    let s = run.finish_after(10);
    assert_eq!((s.processes, s.opened, s.messages), (2, 10, 10), "{s:?}");
}

#[test]
fn attempts_in_flight_at_the_end_are_cancelled_not_timed_out() {
    // A listener that never accepts: connects complete in its backlog, no response comes.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut a = args(
        format!("http://{}/sub/%d", silent.local_addr().unwrap()),
        5,
        Transport::Stream,
    );
    a.max_time = 1.0;
    let s = flood::run_with(a, &mut |_| {}).unwrap();
    assert_eq!(
        (s.opened, s.failures.cancelled, s.failures.timeout),
        (0, 5, 0),
        "{s:?}"
    );
}

/// `--latency-at socket` with `--nice`: a child flood runs at the niceness asked, and a
/// message that waits in its socket while the client is stopped is timed at its arrival,
/// not at the late read (with `read` the same run would report ≥ the 2-s stop).
#[test]
fn socket_latency_leaves_out_the_clients_own_delay() {
    let server = Server::start(Kind::Stream);
    let mut a = args(server.url("/sub/%d"), 10, Transport::Stream);
    a.procs = "1".into();
    a.child_exe = Some(env!("CARGO_BIN_EXE_myriad-flood").into());
    a.latency_at = flood::LatencyAt::Socket;
    a.nice = Some(7);
    let own_nice = nice_of(std::process::id());
    let run = start(a);
    server.wait_for(10);
    server.broadcast("warm");
    let end = Instant::now() + Duration::from_secs(10);
    while run.messages.load(Ordering::Relaxed) < 10 {
        assert!(Instant::now() < end, "the first broadcast never arrived");
        std::thread::sleep(Duration::from_millis(10));
    }
    let child = child_of(std::process::id()).expect("the flood child");
    assert_eq!(nice_of(child), 7, "the child holding the connections");
    assert_eq!(
        nice_of(std::process::id()),
        own_nice,
        "the embedding process stays as it is"
    );
    // SAFETY: signals to the child this test started.
    unsafe { libc::kill(child as i32, libc::SIGSTOP) };
    server.broadcast("late");
    std::thread::sleep(Duration::from_secs(2));
    unsafe { libc::kill(child as i32, libc::SIGCONT) };
    let s = run.finish_after(20);
    assert_eq!((s.opened, s.messages, s.failed), (10, 20, 0), "{s:?}");
    assert!(
        s.lat_max_us < 1_500_000,
        "timed at the read after the stop, not at the arrival: {s:?}"
    );
}

/// A process's niceness (observe's `/proc/<pid>/stat` reader).
fn nice_of(pid: u32) -> i32 {
    observe::procfs::read_proc_stat(pid).unwrap().nice
}

/// The pid of a child process of `parent` (from /proc).
fn child_of(parent: u32) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = observe::procfs::read_proc_stat(pid).ok()?;
        (stat.ppid == parent).then_some(pid)
    })
}

/// A server's goodbye and its FIN arriving together (myriad's drain: `event:
/// reconnect`, then the close) still ends the connection, and `--reconnect`
/// opens it again. Flood used to skip the read that would see the EOF after a
/// short read, and with edge triggering no event came for it: the connection
/// looked open for ever.
#[test]
fn a_goodbye_with_its_fin_is_seen_and_reconnected() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicU64::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut s = stream.unwrap();
                let mut head = [0u8; 1024];
                let n = s.read(&mut head).unwrap_or(0);
                if !head[..n].starts_with(b"GET /sse/") {
                    return;
                }
                counter.fetch_add(1, Ordering::Relaxed);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n");
                std::thread::sleep(Duration::from_millis(300));
                // The goodbye and the FIN in one go, as the client sleeps in epoll.
                let _ = s.write_all(b"event: reconnect\ndata: {}\n\nretry: 100\n\n");
                let _ = s.shutdown(std::net::Shutdown::Write);
                std::thread::sleep(Duration::from_millis(300));
            });
        }
    });
    let run = start(FloodArgs {
        reconnect: true,
        hold: Some(30.0),
        ..args(format!("http://{addr}/sse/%d"), 1, Transport::Sse)
    });
    let end = Instant::now() + Duration::from_secs(10);
    // The first request, and the one after the goodbye.
    while accepted.load(Ordering::Relaxed) < 2 {
        assert!(
            Instant::now() < end,
            "flood did not reconnect after the server's goodbye and FIN"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    run.stop.store(true, Ordering::Relaxed);
    run.handle.join().unwrap().unwrap();
}
