//! What an idle HTTP/2 server connection holds with the `h2` crate, for the gateway
//! design note (crates/tls/README.md): `cargo run --release -p tls --example h2_idle`.
//!
//! Two ways to run `h2::server::Connection`, each with 1 and 50 idle streams (response
//! head and one DATA frame sent, then nothing):
//! - pump: polled by hand with a no-op waker over in-memory `AsyncRead`/`AsyncWrite`
//!   that a mio pump would fill from its per-loop scratch buffer and drain into the
//!   socket — no runtime, no task, no socket buffer of its own;
//! - tokio: the usual way, a current-thread runtime, a task per connection over a
//!   loopback `TcpStream`.
//!
//! - HPACK alone (`wire::h2::hpack`), what the hand-written frame layer keeps per
//!   connection: a decoder after a browser-like first request that fills the dynamic
//!   table (4 KB allowed), then after the client obeys SETTINGS_HEADER_TABLE_SIZE = 0.
//!
//! A counting allocator measures live heap bytes of the server side only: in the pump
//! variant after the client side is dropped; in the tokio variant the server runs on
//! its own thread and only that thread's allocations count (its task, socket
//! registration, connection and streams). Allocations are listed by size.

use bytes::Bytes;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

mod counting;
use counting::{count_this_thread, describe, diff, live, snapshot};

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

/// One direction of an in-memory connection: what a pump would have read from the
/// socket (for the reader) or must write to it (from the writer).
type Buf = Rc<RefCell<Vec<u8>>>;

/// In-memory IO: reads drain `input`, writes append to `output`. Pending on empty
/// input: the caller polls again after feeding more (a no-op waker is enough).
struct PumpIo {
    input: Buf,
    output: Buf,
}

impl AsyncRead for PumpIo {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let mut input = self.input.borrow_mut();
        if input.is_empty() {
            return Poll::Pending;
        }
        let n = input.len().min(buf.remaining());
        buf.put_slice(&input[..n]);
        input.drain(..n);
        if input.is_empty() {
            *input = Vec::new(); // an idle connection keeps no buffer
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for PumpIo {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.output.borrow_mut().extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn poll<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
}

/// Server side of the pump variant: the connection and the streams it answered.
struct PumpServer {
    conn: h2::server::Connection<PumpIo, Bytes>,
    streams: Vec<h2::SendStream<Bytes>>,
}

fn pump(streams: usize) -> (isize, Vec<isize>) {
    let c2s: Buf = Rc::default();
    let s2c: Buf = Rc::default();
    let before = snapshot();
    let base = live();
    let mut server_hs = Box::pin(h2::server::handshake(PumpIo {
        input: c2s.clone(),
        output: s2c.clone(),
    }));
    let mut client_hs = Box::pin(h2::client::handshake(PumpIo {
        input: s2c.clone(),
        output: c2s.clone(),
    }));
    let (mut server, mut client) = (None, None);
    while server.is_none() || client.is_none() {
        if server.is_none() {
            if let Poll::Ready(r) = poll(&mut server_hs) {
                server = Some(PumpServer {
                    conn: r.unwrap(),
                    streams: Vec::new(),
                });
            }
        }
        if client.is_none() {
            if let Poll::Ready(r) = poll(&mut client_hs) {
                client = Some(r.unwrap());
            }
        }
    }
    drop((server_hs, client_hs));
    let mut server = server.unwrap();
    let (send, mut client_conn) = client.unwrap();
    let mut responses = Vec::new();
    let mut send = send;
    for i in 0..streams {
        while poll(&mut std::future::poll_fn(|cx| send.poll_ready(cx))).is_pending() {
            let _ = poll(&mut client_conn);
        }
        let req = http::Request::get(format!("http://localhost/sse/{i}"))
            .body(())
            .unwrap();
        responses.push(send.send_request(req, true).unwrap().0);
    }
    // Run both ends until every stream has its head and a welcome DATA frame.
    let mut bodies = Vec::new();
    for _ in 0..100 {
        let _ = poll(&mut client_conn);
        while let Poll::Ready(Some(Ok((_req, mut respond)))) =
            poll(&mut std::future::poll_fn(|cx| server.conn.poll_accept(cx)))
        {
            let resp = http::Response::builder().status(200).body(()).unwrap();
            let mut s = respond.send_response(resp, false).unwrap();
            s.send_data(Bytes::from_static(b"retry: 2000\n\n"), false)
                .unwrap();
            server.streams.push(s);
        }
        responses.retain_mut(|r| match poll(r) {
            Poll::Ready(resp) => {
                bodies.push(resp.unwrap().into_body());
                false
            }
            Poll::Pending => true,
        });
        for b in bodies.iter_mut() {
            while let Poll::Ready(Some(Ok(d))) =
                poll(&mut std::future::poll_fn(|cx| b.poll_data(cx)))
            {
                let _ = b.flow_control().release_capacity(d.len());
            }
        }
        if bodies.len() == streams && c2s.borrow().is_empty() && s2c.borrow().is_empty() {
            break;
        }
    }
    assert_eq!(bodies.len(), streams, "every stream answered");
    assert_eq!(server.streams.len(), streams);
    // The client goes; the server connection idles with its streams.
    drop((bodies, responses, send, client_conn));
    let _ = poll(&mut std::future::poll_fn(|cx| server.conn.poll_accept(cx)));
    *c2s.borrow_mut() = Vec::new();
    *s2c.borrow_mut() = Vec::new();
    let held = live() - base;
    let sizes = diff(&before);
    drop(server);
    (held, sizes)
}

fn tokio_runtime(streams: usize) -> (isize, Vec<isize>) {
    use std::sync::mpsc;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let (served_tx, served_rx) = mpsc::channel::<()>();
    let (measure_tx, measure_rx) = mpsc::channel::<()>();
    let (result_tx, result_rx) = mpsc::channel();
    // The server: its own thread, the only one whose allocations count.
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let before = snapshot();
            let base = live();
            let task = tokio::spawn(async move {
                let (sock, _) = listener.accept().await.unwrap();
                let mut conn = h2::server::handshake(sock).await.unwrap();
                let mut held = Vec::new();
                while held.len() < streams {
                    let Some(Ok((_req, mut respond))) = conn.accept().await else {
                        break;
                    };
                    let resp = http::Response::builder().status(200).body(()).unwrap();
                    let mut s = respond.send_response(resp, false).unwrap();
                    s.send_data(Bytes::from_static(b"retry: 2000\n\n"), false)
                        .unwrap();
                    held.push(s);
                }
                served_tx.send(()).unwrap();
                // Keep driving the connection (flushes, window updates) while idle.
                let _ = conn.accept().await;
                drop(held);
            });
            // Idle until the client is done, then measure.
            while measure_rx.try_recv().is_err() {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            result_tx.send((live() - base, diff(&before))).unwrap();
            task.abort();
        });
    });
    count_this_thread(false);
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    client
        .block_on(async move {
            let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (send, conn) = h2::client::handshake(sock).await.unwrap();
            let driver = tokio::spawn(async move {
                let _ = conn.await;
            });
            let mut bodies = Vec::new();
            for i in 0..streams {
                let mut s = send.clone().ready().await.unwrap();
                let req = http::Request::get(format!("http://localhost/sse/{i}"))
                    .body(())
                    .unwrap();
                let resp = s.send_request(req, true).unwrap().0.await.unwrap();
                let mut body = resp.into_body();
                let d = body.data().await.unwrap().unwrap();
                let _ = body.flow_control().release_capacity(d.len());
                bodies.push(body);
            }
            served_rx.recv().unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            measure_tx.send(()).unwrap();
            let r = result_rx.recv().unwrap();
            drop((bodies, send));
            driver.abort();
            r
        })
        .tap(|_| {
            count_this_thread(true);
            server.join().unwrap();
        })
}

trait Tap: Sized {
    fn tap(self, f: impl FnOnce(&Self)) -> Self {
        f(&self);
        self
    }
}
impl<T> Tap for T {}

fn show(label: &str, (held, sizes): (isize, Vec<isize>)) {
    println!(
        "{label}: {held} B\n    by size: {}",
        describe(&sizes, 1, 1.0)
    );
}

/// A header block as a browser sends it: pseudo-headers from the static table, the
/// rest as literals with incremental indexing (they enter the dynamic table).
fn browser_block(size_update_to_zero: bool) -> Vec<u8> {
    let mut b = Vec::new();
    if size_update_to_zero {
        b.push(0x20); // dynamic table size update: 0
    }
    b.extend_from_slice(&[0x82, 0x87]); // :method GET, :scheme https
    let literal = |b: &mut Vec<u8>, name: &[u8], value: &[u8]| {
        b.push(0x40); // literal with incremental indexing, new name
        for s in [name, value] {
            assert!(s.len() < 127);
            b.push(s.len() as u8);
            b.extend_from_slice(s);
        }
    };
    literal(&mut b, b":authority", b"push.example.com");
    literal(&mut b, b":path", b"/sse/12345");
    literal(&mut b, b"accept", b"text/event-stream");
    literal(&mut b, b"user-agent", b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36");
    literal(&mut b, b"accept-language", b"en-US,en;q=0.9");
    literal(
        &mut b,
        b"cookie",
        b"session=0123456789abcdef0123456789abcdef",
    );
    b
}

fn hpack() {
    let base = live();
    let caps = wire::h2::hpack::Caps {
        fields: 100,
        list_size: 32 * 1024,
    };
    let mut d = Box::new(wire::h2::hpack::Decoder::new());
    let inline = live() - base;
    let done = d.decode(&browser_block(false), caps, |_, _| {}).unwrap();
    assert_eq!(done.fields, 8);
    let with_table = live() - base;
    d.set_limit(0); // the client acknowledged our SETTINGS_HEADER_TABLE_SIZE = 0
    d.decode(&browser_block(true), caps, |_, _| {}).unwrap();
    let without = live() - base;
    println!(
        "HPACK decoder (wire::h2::hpack): {inline} B inline, {with_table} B after a browser's first request, {without} B once the table size is 0"
    );
    drop(d);
}

fn main() {
    // Warm up (ring, thread-locals, the allocator's own state).
    let _ = pump(1);
    println!("server-side heap of one idle HTTP/2 connection (h2 0.4)\n");
    let one = pump(1);
    let fifty = pump(50);
    let per_stream = (fifty.0 - one.0) as f64 / 49.0;
    show("pump, 1 stream", one.clone());
    show("pump, 50 streams", fifty.clone());
    println!(
        "pump: {:.0} B per connection + {per_stream:.0} B per stream\n",
        one.0 as f64 - per_stream
    );
    hpack();
    println!();
    let _ = tokio_runtime(1);
    let t1 = tokio_runtime(1);
    let t50 = tokio_runtime(50);
    let per_stream = (t50.0 - t1.0) as f64 / 49.0;
    show("tokio (task + socket + connection), 1 stream", t1.clone());
    show(
        "tokio (task + socket + connection), 50 streams",
        t50.clone(),
    );
    println!(
        "tokio: {:.0} B per connection + {per_stream:.0} B per stream",
        t1.0 as f64 - per_stream
    );
}
