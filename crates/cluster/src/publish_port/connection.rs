//! One connection to the publish port: keep-alive HTTP/1.1 requests, read with the
//! gateways' parsers (`wire`), each publish answered before the next is read.

use super::{PortCall, PortConfig, Publisher, IDLE};
use bus::{PublishAnswer, Reply, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};
use wire::{BodyKind, Route};

/// Bytes read per call.
const READ_CHUNK: usize = 16 << 10;

/// What the port serves, for a 404's text.
const SERVED: &str = "the router's publish port serves POST /pub/<subject>, POST /pub and \
     GET /healthz; subscriptions and the rest of the API are on the gateways' port";

/// Answers a connection over [`super::MAX_CONNECTIONS`] and closes it.
pub(super) async fn refuse_busy(mut stream: TcpStream) {
    let mut out = Vec::new();
    let why = "too many connections to the publish port; retry";
    wire::write_error_response(&mut out, 503, why, false, &[("Retry-After", "1")]);
    let _ = stream.write_all(&out).await;
}

/// Why a draining router refuses a publish (with `Retry-After`: another router, or
/// this one restarted, takes it).
pub(super) const DRAINING: &str = "the router is draining (SIGTERM); retry";

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
pub(super) async fn serve(
    mut stream: TcpStream,
    loopback: bool,
    config: &PortConfig,
    publisher: &Publisher,
    mut draining: watch::Receiver<bool>,
) {
    let mut buf = Vec::with_capacity(READ_CHUNK);
    let mut out = Vec::new();
    let limits = wire::Limits::default();
    loop {
        out.clear();
        // The head.
        let (head, used) = loop {
            match wire::parse_head(&buf, &limits) {
                Ok(Some(parsed)) => break parsed,
                Ok(None) => {}
                Err(e) => {
                    wire::write_error_response(&mut out, e.status(), &e.to_string(), false, &[]);
                    let _ = stream.write_all(&out).await;
                    return;
                }
            }
            if buf.is_empty() {
                // Between requests: a drain closes the idle connection at once.
                tokio::select! {
                    more = read_more(&mut stream, &mut buf) => if !more { return },
                    _ = draining.wait_for(|d| *d) => return,
                }
            } else if !read_more(&mut stream, &mut buf).await {
                return;
            }
        };
        buf.drain(..used);
        if *draining.borrow() {
            wire::write_error_response(&mut out, 503, DRAINING, false, &[("Retry-After", "1")]);
            let _ = stream.write_all(&out).await;
            return;
        }
        let keep = match handle(
            &mut stream,
            &mut buf,
            &mut out,
            &head,
            loopback,
            config,
            publisher,
        )
        .await
        {
            Some(keep) => keep && head.keep_alive,
            None => return,
        };
        if stream.write_all(&out).await.is_err() || !keep {
            return;
        }
    }
}

/// One request whose head was read: its body, its publish, its answer in `out`.
/// `Some(keep)`: whether the connection may serve another request; `None`: the
/// peer went away.
async fn handle(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    out: &mut Vec<u8>,
    head: &wire::RequestHead,
    loopback: bool,
    config: &PortConfig,
    publisher: &Publisher,
) -> Option<bool> {
    let route = match wire::route(head) {
        Ok(route) => route,
        Err(wire::RouteError::NotFound) => return refuse(out, head, 404, SERVED, &[]),
        Err(e) => return refuse(out, head, e.status(), &e.to_string(), e.headers()),
    };
    let (limit, batch) = match route {
        Route::Health => {
            let keep = head.keep_alive && head.body == BodyKind::None;
            wire::write_response(out, 200, "text/plain; charset=utf-8", b"ok\n", keep, &[]);
            return Some(keep);
        }
        Route::Publish { .. } => (config.max_message, false),
        Route::PublishBatch { .. } => (config.max_batch, true),
        _ => return refuse(out, head, 404, SERVED, &[]),
    };
    if head.origin.is_some() {
        return refuse(
            out,
            head,
            403,
            "the publish port takes no browser requests (Origin)",
            &[],
        );
    }
    if config.api_keys.is_empty() {
        if !loopback {
            let why = "the publish port answers loopback peers only (the server has no --api-key)";
            return refuse(out, head, 403, why, &[]);
        }
    } else if let Err(e) = config.api_keys.check(head.authorization.as_deref()) {
        let headers: &[(&str, &str)] = match e.challenge() {
            Some(c) => &[("WWW-Authenticate", c)],
            None => &[],
        };
        return refuse(out, head, e.status(), &e.to_string(), headers);
    }
    if let BodyKind::Length(n) = head.body {
        if n > limit as u64 {
            return refuse(
                out,
                head,
                413,
                &format!("body larger than {limit} bytes"),
                &[],
            );
        }
    }
    let continues = head.expect_continue && head.body != BodyKind::None;
    if continues && stream.write_all(wire::CONTINUE_100).await.is_err() {
        return None;
    }
    let body = match read_body(stream, buf, head.body, limit).await? {
        Ok(body) => body,
        Err(e) => {
            wire::write_error_response(out, e.status(), &e.to_string(), false, &[]);
            return Some(false);
        }
    };
    let request = match bus::http::publish_request(route, body) {
        Some(Ok(request)) => request,
        Some(Err(e)) => {
            wire::write_error_response(out, e.status(), &e.to_string(), head.keep_alive, &[]);
            return Some(true);
        }
        None => unreachable!("only publishes get here"),
    };
    let reply = publish(publisher, request).await;
    let answer = PublishAnswer::of(batch, reply).unwrap_or_else(|| PublishAnswer {
        status: 500,
        json: false,
        body: "internal error: unexpected reply".into(),
        retry_after: false,
    });
    let (status, json, retry) = (answer.status, answer.json, answer.retry_after);
    wire::write_api_answer(out, status, json, &answer.body, head.keep_alive, retry);
    Some(true)
}

/// Answers a refused request. Its body is not read, so the connection closes after
/// the answer unless there was none; `Some(keep)` as [`handle`] returns it.
fn refuse(
    out: &mut Vec<u8>,
    head: &wire::RequestHead,
    status: u16,
    why: &str,
    headers: &[(&str, &str)],
) -> Option<bool> {
    let keep = head.keep_alive && head.body == BodyKind::None;
    wire::write_error_response(out, status, why, keep, headers);
    Some(keep)
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

/// Decodes a body framed as `kind` from `buf` (bytes already read) and the stream;
/// bytes after it stay in `buf`. `None`: the peer went away.
async fn read_body(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    kind: BodyKind,
    limit: usize,
) -> Option<Result<Vec<u8>, wire::BodyError>> {
    let mut decoder = wire::BodyDecoder::new(kind, limit);
    let mut body = Vec::new();
    while !decoder.is_done() {
        match decoder.handle_bytes(buf, &mut body) {
            Ok((n, done)) => {
                buf.drain(..n);
                if done {
                    break;
                }
            }
            Err(e) => return Some(Err(e)),
        }
        if !read_more(stream, buf).await {
            return None;
        }
    }
    Some(Ok(body))
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
