//! Several `myriad serve` processes on one port (SO_REUSEPORT) with
//! `--leave-when-full`: a full process leaves the listening group, so no client is
//! refused while another process has room, and it rejoins once it has room again.

mod common;

use common::{read_until, Server};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Processes sharing the port, and what each may hold.
const PROCESSES: usize = 3;
const PER_PROCESS: usize = 40;

fn start(listen: &str) -> Server {
    let max = PER_PROCESS.to_string();
    Server::start_args(&[
        "serve",
        "--listen",
        listen,
        "--store",
        "memory",
        "--admin",
        "127.0.0.1:0",
        // One loop: one listener per process, so the process that fills is the one
        // that accepted, and it leaves before it answers.
        "--loops",
        "1",
        "--max-connections",
        &max,
        "--leave-when-full",
    ])
}

fn open_stream(addr: std::net::SocketAddr, user: usize) -> TcpStream {
    let mut s = TcpStream::connect(addr)
        .unwrap_or_else(|e| panic!("connection {user} refused while room remained: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET /sub/{user} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, &format!("welcome {user}"));
    s
}

/// Waits until every process holds `want` connections and has its listener in the
/// group (`listening` 1) or out of it (0).
fn wait_all(servers: &[Server], want: u64, listening: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats: Vec<(u64, u64)> = servers
            .iter()
            .map(|s| {
                let extra = &s.admin_stats()["extra"];
                (
                    extra["connections"].as_u64().unwrap(),
                    extra["listening"].as_u64().unwrap(),
                )
            })
            .collect();
        if stats.iter().all(|&s| s == (want, listening)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "per-process (connections, listening) {stats:?}, want ({want}, {listening}) each"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn full_gateways_leave_the_group_and_nobody_is_refused_while_room_remains() {
    let first = start("127.0.0.1:0");
    let addr = first.addr;
    let mut servers = vec![first];
    for _ in 1..PROCESSES {
        servers.push(start(&addr.to_string()));
    }
    let total = PROCESSES * PER_PROCESS;
    wait_all(&servers, 0, 1);

    for round in 0..2 {
        // Every place taken, one client at a time: the blind hash fills some process
        // first, and from then on only the others get clients.
        let clients: Vec<TcpStream> = (0..total).map(|i| open_stream(addr, i + 1)).collect();
        wait_all(&servers, PER_PROCESS as u64, 0);
        // Every process is full and out of the group: the port has no listener left.
        let refused = TcpStream::connect_timeout(&addr, Duration::from_secs(5));
        assert!(
            refused.is_err(),
            "round {round}: all {total} places are taken, yet a connection was accepted"
        );
        // Everyone leaves; every process rejoins below its low-water mark.
        drop(clients);
        wait_all(&servers, 0, 1);
    }
}
