//! What an established session keeps on the heap, counted by a counting allocator (a
//! test binary of its own, so no other test allocates meanwhile).

mod common;

use common::{client, client_config, opts, pki, server_config, Pair};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use tls::{Alpn, Phase, ServerSession};

/// Live heap bytes of this test binary, to see what sessions keep.
struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
// SAFETY: forwards to the system allocator; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as isize - l.size() as isize, Relaxed);
        System.realloc(p, l, n)
    }
}
#[global_allocator]
static ALLOC: Counting = Counting;

/// What an idle established session holds: its inline size and no heap at all; the
/// rustls phase of a TLS 1.2 session for comparison.
#[test]
fn an_idle_lean_session_holds_no_heap() {
    let pki = pki();
    let sc = server_config(&pki, &opts(&[Alpn::H2, Alpn::Http11]));
    let n = 200;
    let cc = client_config(&pki, &[b"http/1.1"], false, None);
    let mut sessions = Vec::with_capacity(n);
    // Warm up lazily initialised globals (ring CPU features, thread-locals).
    {
        let mut p = Pair::new(client(cc.clone()), ServerSession::new(sc.clone()).unwrap());
        p.handshake();
    }
    let mut held = 0isize;
    for _ in 0..n {
        let before = LIVE.load(Relaxed);
        let mut p = Pair::new(client(cc.clone()), ServerSession::new(sc.clone()).unwrap());
        p.handshake();
        p.client_writes(b"GET / HTTP/1.1\r\n\r\n");
        p.send_to_server(&mut |n| n).unwrap();
        let Pair {
            client,
            server,
            got,
            ..
        } = p;
        drop((client, got));
        // What remains allocated after everything but the server session is gone.
        held += LIVE.load(Relaxed) - before;
        sessions.push(server);
    }
    assert!(sessions.iter().all(|s| matches!(s.phase(), Phase::Lean(_))));
    // The Vec of sessions was allocated up front, so only sessions' own heap counts.
    assert!(
        held <= 0,
        "lean sessions hold {:.1} heap bytes each",
        held as f64 / n as f64
    );
    assert!(std::mem::size_of::<ServerSession>() <= 232);
}
