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
/// A closing connection's unread input is read and dropped for at most this long and
/// this many bytes ([`linger_close`]).
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);
const LINGER_BYTES: usize = 64 << 10;

/// Closes after an answer without resetting it away: closing a socket with unread
/// input sends a TCP RST at once, which discards the answer still queued to send (a
/// back-end that had sent part of a request when the drain began would see
/// "connection reset", not the 503). So the write side is shut (a FIN after the
/// answer), and the peer's input read and dropped until it closes too, for at most
/// [`LINGER`] and [`LINGER_BYTES`].
async fn linger_close(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 4096];
    let mut left = LINGER_BYTES;
    let _ = tokio::time::timeout(LINGER, async {
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

/// Answers a connection over [`super::MAX_CONNECTIONS`] and closes it.
pub(super) async fn refuse_busy(mut stream: TcpStream) {
    let mut out = Vec::new();
    let why = "too many connections to the publish port; retry";
    wire::write_error_response(&mut out, 503, why, false, &[("Retry-After", "1")]);
    if stream.write_all(&out).await.is_ok() {
        linger_close(stream).await;
    }
}

/// Answers a connection that arrives while the router drains, and closes it.
pub(super) async fn refuse_draining(mut stream: TcpStream) {
    let mut out = Vec::new();
    wire::write_error_response(&mut out, 503, DRAINING, false, &[("Retry-After", "1")]);
    if stream.write_all(&out).await.is_ok() {
        linger_close(stream).await;
    }
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
            Step::Close => return linger_close(stream).await,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A peer whose input was left unread when the port answered and closed: it can
    /// still send the rest, then reads the whole answer and a clean end, where a
    /// plain close would have reset the connection.
    #[test]
    fn an_answer_with_input_left_unread_ends_cleanly() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        client
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        client
            .write_all(b"POST /pub/7 HTTP/1.1\r\nHost: t\r\n")
            .unwrap();
        let (closed_tx, closed_rx) = std::sync::mpsc::channel();
        let server = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let (stream, _) = listener.accept().unwrap();
                stream.set_nonblocking(true).unwrap();
                let mut stream = TcpStream::from_std(stream).unwrap();
                // The peer's half request is in the socket, unread.
                let mut peek = [0u8; 1];
                stream.peek(&mut peek).await.unwrap();
                stream.write_all(b"answer").await.unwrap();
                let _ = closed_tx.send(());
                linger_close(stream).await;
            })
        });
        closed_rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        client
            .write_all(b"Content-Length: 1\r\n\r\nx")
            .expect("the rest of the request is taken, not reset");
        client.shutdown(std::net::Shutdown::Write).unwrap();
        let mut got = Vec::new();
        client
            .read_to_end(&mut got)
            .expect("the answer, then a clean end");
        assert_eq!(got, b"answer");
        server.join().unwrap();
    }
}
