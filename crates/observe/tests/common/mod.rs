//! Helpers shared by the integration tests: a raw HTTP/1.0 GET over a real TCP socket and
//! a monitor fed by real `LoopMetrics` increments.

#![allow(dead_code)] // each test binary uses a subset

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use observe::{Monitor, MonitorOptions, ProcessMetrics};

/// GET `path` with HTTP/1.0 (so the server closes); returns (status, headers, body).
pub fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).expect("connect to admin");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read response");
    let text = String::from_utf8(raw).expect("utf-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("response has a head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status code");
    (status, head.to_string(), body.to_string())
}

/// A monitor with an admin port on 127.0.0.1:0 and two loops whose counters a
/// background thread keeps moving (until [`Fed::stop`], or `secs` seconds at most).
pub struct Fed {
    pub monitor: Monitor,
    pub metrics: Arc<ProcessMetrics>,
    stop: Arc<AtomicBool>,
    feeder: Option<std::thread::JoinHandle<()>>,
}

impl Fed {
    /// Stop the feeder thread and wait for it.
    pub fn stop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.feeder.take() {
            t.join().expect("feeder thread panicked");
        }
    }
}

impl Drop for Fed {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}

pub fn fed_monitor(secs: u64) -> Fed {
    let metrics = ProcessMetrics::new(2);
    // Like the server's /stats: counters, among them a pid of five digits.
    let extra = Arc::new(
        || serde_json::json!({"pid": 18342, "loops": 2, "router": {"subjects": 12, "subscriptions": 34}}),
    );
    let monitor = Monitor::start(
        metrics.clone(),
        MonitorOptions {
            csv: None,
            admin: Some("127.0.0.1:0".parse().unwrap()),
            extra,
            query: None,
            slab: true,
        },
    )
    .expect("monitor starts");
    let m = metrics.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let halt = stop.clone();
    let feeder = std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(secs);
        let mut i = 0u64;
        while Instant::now() < end && !halt.load(Relaxed) {
            let l = &m.loops[(i % 2) as usize];
            l.connects.fetch_add(10, Relaxed);
            l.connections.fetch_add(10, Relaxed);
            l.messages_out.fetch_add(500, Relaxed);
            l.messages_in.fetch_add(1, Relaxed);
            l.bytes_out.fetch_add(500 * 60, Relaxed);
            l.record_lag(Duration::from_micros(200 + (i % 10) * 100));
            l.record_delivery_latency(Duration::from_micros(300 + (i % 7) * 50));
            i += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    Fed {
        monitor,
        metrics,
        stop,
        feeder: Some(feeder),
    }
}

/// Wait (bounded) until the monitor has a sample with deliveries in it.
pub fn wait_for_traffic(m: &Monitor) {
    let end = Instant::now() + Duration::from_secs(15);
    while Instant::now() < end {
        if m.latest().messages_out_per_s > 0.0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no sample with deliveries after 15 s");
}
