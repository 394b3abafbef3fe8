//! A loop accepts a bounded number of sockets a round (`gateway::pump::accept`),
//! so a connect storm's backlog does not hold its keep-alive requests for hundreds
//! of ms. What it leaves in the listener must still be accepted when no further
//! connection comes to raise another event on the edge-triggered listener.

mod common;

use common::*;
use std::io::{Read, Write};

/// More than three rounds' worth of accepts (256 a round).
const BACKLOG: usize = 1000;

#[test]
fn a_backlog_longer_than_a_rounds_accepts_is_all_answered() {
    let server = Server::start(&["--loops", "1"]);
    // Stopped, the server accepts nothing: the kernel queues every connection.
    assert_eq!(unsafe { libc::kill(server.pid() as i32, libc::SIGSTOP) }, 0);
    let mut clients: Vec<_> = (0..BACKLOG)
        .map(|_| {
            let mut s = server.connect();
            write!(
                s,
                "GET /stats HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            s
        })
        .collect();
    assert_eq!(unsafe { libc::kill(server.pid() as i32, libc::SIGCONT) }, 0);
    // Nothing else connects: the last rounds' accepts have no event of their own.
    for (i, s) in clients.iter_mut().enumerate() {
        let mut out = Vec::new();
        let read = s.read_to_end(&mut out);
        assert!(
            read.is_ok() && out.starts_with(b"HTTP/1.1 200"),
            "client {i} of {BACKLOG} not answered: {read:?} {:?}",
            String::from_utf8_lossy(&out[..out.len().min(80)])
        );
    }
}
