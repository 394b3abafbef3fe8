//! One connection to the publish port, pumped: bytes read from the socket go to its
//! [`Exchange`] (keep-alive HTTP/1.1 requests read with the gateways' parsers), its
//! publishes to the router, its answers back to the socket, each publish answered
//! before the next request is read.

use super::exchange::{Exchange, Step, DRAINING};
use super::{PortCall, PortConfig, Publisher, IDLE};
use bus::{Reply, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};

/// Bytes read per call.
const READ_CHUNK: usize = 16 << 10;

/// Answers a connection over [`super::MAX_CONNECTIONS`] and closes it.
pub(super) async fn refuse_busy(mut stream: TcpStream) {
    let mut out = Vec::new();
    let why = "too many connections to the publish port; retry";
    wire::write_error_response(&mut out, 503, why, false, &[("Retry-After", "1")]);
    let _ = stream.write_all(&out).await;
}

/// Answers a connection that arrives while the router drains, and closes it.
pub(super) async fn refuse_draining(mut stream: TcpStream) {
    let mut out = Vec::new();
    wire::write_error_response(&mut out, 503, DRAINING, false, &[("Retry-After", "1")]);
    let _ = stream.write_all(&out).await;
}

/// Serves requests until the peer closes, stays silent for [`IDLE`], sends
/// something that ends the connection (a malformed head, a refused body), or the
/// router drains: then a connection between requests is closed, and a request
/// whose head arrives is answered 503 + `Retry-After` and the connection closed.
/// What a request means and how it is answered is the [`Exchange`]'s; this is
/// only its pump.
pub(super) async fn serve(
    mut stream: TcpStream,
    loopback: bool,
    config: &PortConfig,
    publisher: &Publisher,
    mut draining: watch::Receiver<bool>,
) {
    let mut buf = Vec::with_capacity(READ_CHUNK);
    let mut exchange = Exchange::new(config, loopback);
    loop {
        let (used, mut step) = exchange.handle_bytes(&buf, *draining.borrow());
        buf.drain(..used);
        if let Step::Publish(request) = step {
            step = exchange.handle_reply(publish(publisher, request).await);
        }
        let out = exchange.take_output();
        if !out.is_empty() && stream.write_all(&out).await.is_err() {
            return;
        }
        match step {
            Step::Close => return,
            // Answered: what is buffered may hold the next request already.
            Step::Read if used > 0 && !buf.is_empty() => continue,
            _ => {}
        }
        if exchange.between_requests(&buf) {
            // A drain closes an idle connection at once.
            tokio::select! {
                more = read_more(&mut stream, &mut buf) => if !more { return },
                _ = draining.wait_for(|d| *d) => return,
            }
        } else if !read_more(&mut stream, &mut buf).await {
            return;
        }
    }
}

/// Reads more bytes into `buf`; false when the peer closed, failed or was idle too long.
async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let start = buf.len();
    buf.resize(start + READ_CHUNK, 0);
    let read = tokio::time::timeout(IDLE, stream.read(&mut buf[start..])).await;
    let n = match read {
        Ok(Ok(n)) => n,
        _ => 0,
    };
    buf.truncate(start + n);
    n > 0
}

/// Publishes `request` and waits for its reply.
async fn publish(publisher: &Publisher, request: Request) -> Reply {
    match publisher {
        Publisher::Router(calls) => {
            let (reply, rx) = oneshot::channel();
            if calls.send(PortCall { request, reply }).is_err() {
                return Reply::Unavailable("the router task has stopped".into());
            }
            rx.await
                .unwrap_or_else(|_| Reply::Unavailable("the router dropped the publish".into()))
        }
        Publisher::Nats(client) => super::over_nats::publish(client, request).await,
    }
}
