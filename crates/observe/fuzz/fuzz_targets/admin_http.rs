//! tiny_http, the admin listener's HTTP server (`observe::admin`; also `myriad
//! host`'s), on arbitrary client bytes over a real loopback socket: tiny_http offers
//! no parser without a socket. One server for the run; each input is one client
//! connection that writes the bytes, closes its sending half and reads until the
//! server closes. A panic in any of tiny_http's threads aborts the run (libFuzzer's
//! panic hook), so a crash is a panic reachable from the admin port.
//!
//! The handler reads what the admin listener reads of a request (method, URL, every
//! header, at most 64 KiB of body) and answers as it does, with a small body or, for a
//! URL ending in `/big`, one over tiny_http's 32-KiB chunking threshold.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

fn server() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        no_delay(&listener);
        let srv = tiny_http::Server::from_listener(listener, None).expect("serve it");
        let addr = srv.server_addr().to_ip().expect("an IP listener");
        std::thread::spawn(move || {
            for mut req in srv.incoming_requests() {
                let method = req.method().as_str().len();
                let url = req.url().to_string();
                let headers: usize = req
                    .headers()
                    .iter()
                    .map(|h| h.field.as_str().as_str().len() + h.value.as_str().len())
                    .sum();
                let mut body = Vec::new();
                let _ = req.as_reader().take(64 * 1024).read_to_end(&mut body);
                let answer = match url.ends_with("/big") {
                    true => "x".repeat(40 * 1024),
                    false => format!("{method} {headers} {}", body.len()),
                };
                let _ = req.respond(tiny_http::Response::from_string(answer));
            }
        });
        addr
    })
}

/// TCP_NODELAY as the admin listener sets it (else each answer waits ~40 ms for a
/// delayed ACK).
fn no_delay(listener: &std::net::TcpListener) {
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and a c_int option of the right size.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(listener),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(mut s) = TcpStream::connect(server()) else {
        return;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.write_all(data);
    let _ = s.shutdown(Shutdown::Write);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
});
