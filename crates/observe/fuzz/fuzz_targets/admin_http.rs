//! The admin listener (`observe::admin`: `/stats`, `/metrics`, `/presence/…` and the
//! rest) and its HTTP server, the dependency tiny_http, on arbitrary client bytes
//! over a real loopback socket: tiny_http offers no parser without a socket. One
//! listener for the run, started as a server starts it (a `Monitor` with `--admin`
//! and a presence hook); each input is one client connection that writes the bytes,
//! closes its sending half and reads until the listener closes. A panic in any of
//! its threads aborts the run (libFuzzer's panic hook): a crash is a panic
//! reachable from the admin port. The other side too: what a supervisor reads back
//! from its router's admin listener (`QueryAnswer::read`, httparse inside), on the
//! listener's real answer and on the raw bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use observe::monitor::{Monitor, MonitorOptions};
use observe::{ProcessMetrics, QueryAnswer};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

fn listener() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let monitor = Monitor::start(
            ProcessMetrics::new(1),
            MonitorOptions {
                csv: None,
                admin: Some("127.0.0.1:0".parse().expect("an address")),
                extra: Arc::new(|| serde_json::json!({"router": {"subjects": 1}})),
                // A presence answer past tiny_http's 32-KiB chunking threshold.
                query: Some(Arc::new(|q| {
                    q.path.starts_with("/presence/").then(|| QueryAnswer {
                        status: 200,
                        json: true,
                        body: vec![b' '; 40 * 1024],
                    })
                })),
                slab: false,
            },
        )
        .expect("the admin listener starts");
        let addr = monitor.admin_addr().expect("bound");
        // Serves for the whole run.
        std::mem::forget(monitor);
        addr
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(mut s) = TcpStream::connect(listener()) else {
        return;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.write_all(data);
    let _ = s.shutdown(Shutdown::Write);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let _ = QueryAnswer::read(&answer);
    let _ = QueryAnswer::read(data);
});
