//! `--history-store jetstream` against a real nats-server of the test's own
//! (`-js`, a temp store dir, a free port): the history backends' conformance
//! checks (`store::history::conformance`), a large read-back, and a server
//! without JetStream refused with advice.

use cluster::jet_history::JetHistory;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use store::history::{conformance, HistoryChange, HistoryLog};

struct Nats {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Nats {
    fn start(jetstream: bool) -> Nats {
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cmd = Command::new("nats-server");
        cmd.args(["-a", "127.0.0.1", "-p", &port.to_string()]);
        if jetstream {
            cmd.args(["-js", "-sd", &dir.path().display().to_string()]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("this test needs nats-server on the PATH ({e}); apt-get install nats-server")
            });
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Nats {
            child,
            url: format!("nats://127.0.0.1:{port}"),
            _dir: dir,
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test's server, no credentials.
fn at(url: &str) -> cluster::NatsConfig {
    cluster::NatsConfig::resolve(url, &Default::default(), |_| None).unwrap()
}

fn open(url: &str, keep: usize) -> Box<dyn HistoryLog> {
    Box::new(JetHistory::open(&at(url), keep, 1).unwrap())
}

#[test]
fn jetstream_history_conforms() {
    let nats = Nats::start(true);
    conformance::all(&mut || {
        JetHistory::delete(&at(&nats.url)).unwrap();
        let url = nats.url.clone();
        Box::new(move || open(&url, conformance::KEEP))
    });
}

/// 10,000 users × 10 messages, `keep` 8: written in groups of 1,000, read back
/// whole (the start-up path), newest 8 of each in order.
#[test]
fn jetstream_history_reads_back_every_ring() {
    let nats = Nats::start(true);
    let mut log = open(&nats.url, 8);
    let payload: &[u8] = &[7u8; 60];
    let changes: Vec<HistoryChange<'_>> = (1..=10u64)
        .flat_map(|seq| {
            (0..10_000u64).map(move |user| HistoryChange::Kept {
                user,
                epoch: 5,
                seq,
                subject: user,
                payload,
            })
        })
        .collect();
    let started = Instant::now();
    for group in changes.chunks(1000) {
        log.apply(group, 8).unwrap();
    }
    let written = started.elapsed();
    drop(log);
    let started = Instant::now();
    let mut log = open(&nats.url, 8);
    let rings = conformance::rings(&mut *log);
    let read = started.elapsed();
    assert_eq!(rings.len(), 10_000);
    for (epoch, ring) in rings.values() {
        assert_eq!(*epoch, 5);
        assert_eq!(
            ring.iter().map(|r| r.0).collect::<Vec<_>>(),
            (3..=10).collect::<Vec<u64>>()
        );
    }
    eprintln!(
        "jetstream history: 100,000 messages written in groups of 1,000 in {written:?}; \
         80,000 kept, read back in {read:?}"
    );
}

#[test]
fn a_nats_server_without_jetstream_is_refused_with_advice() {
    let nats = Nats::start(false);
    let err = JetHistory::open(&at(&nats.url), 64, 1)
        .err()
        .expect("no JetStream there");
    let text = format!("{err:#}");
    assert!(
        text.contains("does not offer JetStream") && text.contains("nats-server -js"),
        "{text}"
    );
}
