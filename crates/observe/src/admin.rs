//! The admin listener: a tiny_http server on its own thread serving
//!
//! | path | answer |
//! |---|---|
//! | `/metrics` | Prometheus text format 0.0.4 |
//! | `/healthz` | `200 ok` while the process runs |
//! | `/stats` | JSON: `{"sample": Sample, "extra": {...}, "processes": [Sample, ...]}` (this process first, then `Monitor::set_children`'s) |
//! | `/history` | JSON array of the recent samples, oldest first |
//! | `/sample` | JSON: the last sample alone, with the live connection count and connect, close and delivery totals (what a supervisor reads of each child every second, without `extra`'s cost) |
//! | `/` | the live dashboard (self-contained HTML + JS polling `/stats`) |
//! | `/example/` | the channels example page and the JavaScript client it loads (`example`) |
//! | `/presence/<channel>`, `/presence/<channel>/stats`, `/presence/<id>` | the server's answer ([`QueryFn`]), as on the API port, with the same credentials (an API key, or a loopback peer without keys) |
//!
//! The presence queries are here so a back-end's list does not wait behind the
//! event loops' work: under a connect storm a loop can be hundreds of ms late
//! (its tick lag), and an API request on its port waits that long before it is
//! even read. This thread sleeps until asked.
//! It is not on the hot path: one thread, requests answered in turn. It does not
//! sample anything itself; it reads what the sampler left in [`MonitorState`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use tiny_http::{Header, Method, Response, Server};

use crate::prometheus;
use crate::state::{MonitorState, Query, QueryFn};

/// The dashboard page, embedded so the binary needs no files and no network.
const DASHBOARD_HTML: &str = include_str!("dashboard.html");

/// A running admin listener; dropping it stops and joins its thread.
pub(crate) struct Admin {
    pub(crate) addr: SocketAddr,
    server: Arc<Server>,
    thread: Option<JoinHandle<()>>,
}

impl Admin {
    pub(crate) fn start(
        addr: SocketAddr,
        shared: Arc<MonitorState>,
        query: Option<QueryFn>,
    ) -> anyhow::Result<Admin> {
        let listener = std::net::TcpListener::bind(addr)
            .with_context(|| format!("cannot bind the admin address {addr}"))?;
        no_delay(&listener);
        let server = Server::from_listener(listener, None)
            .map_err(|e| anyhow::anyhow!("cannot serve the admin address {addr}: {e}"))?;
        let server = Arc::new(server);
        let bound = server
            .server_addr()
            .to_ip()
            .context("admin listener is not on an IP address")?;
        tracing::info!(
            "admin listening on http://{bound}/ (dashboard), /metrics (Prometheus), /healthz, /stats, /history"
        );
        let srv = server.clone();
        let thread = std::thread::Builder::new()
            .name("observe-admin".into())
            .spawn(move || {
                // Ends when Admin::drop calls unblock().
                for req in srv.incoming_requests() {
                    let path = req.url().split('?').next().unwrap_or("/").to_string();
                    let res = if *req.method() != Method::Get && *req.method() != Method::Head {
                        text(405, "method not allowed\n").with_header(header("Allow", "GET, HEAD"))
                    } else if let Some(res) = ask(&req, &path, query.as_ref()) {
                        res
                    } else {
                        route(&path, &shared)
                    };
                    // Every answer is built in memory: always a Content-Length, never
                    // chunked (tiny_http chunks HTTP/1.1 answers over 32 KiB, and a
                    // supervisor's /stats of 50 gateways is ~90 KB; readers that split
                    // head from body got a chunked body that was not JSON).
                    let res = res.with_chunked_threshold(usize::MAX);
                    if let Err(e) = req.respond(res) {
                        tracing::debug!(error = %e, "admin response not delivered");
                    }
                }
            })
            .context("cannot spawn the admin thread")?;
        Ok(Admin {
            addr: bound,
            server,
            thread: Some(thread),
        })
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// TCP_NODELAY on the listener, which its accepted sockets inherit (Linux).
/// tiny_http writes a head and then its body: with Nagle, a body under one
/// segment waited for the head's ACK, which the client delays (~40 ms): a
/// 1,000-member presence list took 44 ms at p50 before this.
fn no_delay(listener: &std::net::TcpListener) {
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and a c_int option of the right size.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(listener),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "admin: TCP_NODELAY refused");
    }
}

fn header(name: &str, value: &str) -> Header {
    // Both are fixed ASCII strings from this file, so the header is always valid.
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("static header is valid")
}

fn text(status: u16, body: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    Response::from_string(body)
        .with_status_code(status)
        .with_header(header("Content-Type", "text/plain; charset=utf-8"))
}

fn json(v: &serde_json::Value) -> Response<std::io::Cursor<Vec<u8>>> {
    Response::from_string(v.to_string())
        .with_header(header("Content-Type", "application/json"))
        .with_header(header("Cache-Control", "no-store"))
}

/// A query the server answers (`/presence/…`), if it has a hook and answers it.
fn ask(
    req: &tiny_http::Request,
    path: &str,
    query: Option<&QueryFn>,
) -> Option<Response<std::io::Cursor<Vec<u8>>>> {
    let query = query.filter(|_| path.starts_with("/presence/"))?;
    let authorization = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .map(|h| h.value.as_str());
    let answer = query(&Query {
        path,
        authorization,
        loopback: req.remote_addr().is_some_and(|a| a.ip().is_loopback()),
    })?;
    let content_type = match answer.json {
        true => "application/json",
        false => "text/plain; charset=utf-8",
    };
    Some(
        Response::from_data(answer.body)
            .with_status_code(answer.status)
            .with_header(header("Content-Type", content_type))
            .with_header(header("Cache-Control", "no-store")),
    )
}

/// The `/stats` document.
pub(crate) fn stats_json(shared: &MonitorState) -> serde_json::Value {
    let sample = shared.latest();
    // A sample always serialises: it has only numbers and options of numbers.
    let s = serde_json::to_value(&sample).expect("Sample serialises");
    let processes: Vec<serde_json::Value> = processes(shared, sample)
        .iter()
        .map(|c| serde_json::to_value(c).expect("Sample serialises"))
        .collect();
    serde_json::json!({
        "sample": s,
        "extra": (shared.extra)(),
        "processes": processes,
    })
}

/// This process's sample, then those of the other processes of the server.
fn processes(shared: &MonitorState, own: crate::Sample) -> Vec<crate::Sample> {
    let children = shared
        .children
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let mut all = vec![own];
    if let Some(children) = children {
        all.extend(children());
    }
    all
}

fn route(path: &str, shared: &MonitorState) -> Response<std::io::Cursor<Vec<u8>>> {
    match path {
        "/" | "/index.html" => Response::from_string(DASHBOARD_HTML)
            .with_header(header("Content-Type", "text/html; charset=utf-8"))
            .with_header(header("Cache-Control", "no-store")),
        "/metrics" => {
            let latest = shared.latest();
            let mut body = prometheus::render(&latest, &shared.metrics, &(shared.extra)());
            body.push_str(&crate::per_process::render(&processes(shared, latest)));
            Response::from_string(body)
                .with_header(header("Content-Type", prometheus::CONTENT_TYPE))
        }
        "/healthz" => text(200, "ok\n"),
        "/stats" => json(&stats_json(shared)),
        "/history" => {
            let h = shared.history.lock().unwrap_or_else(|p| p.into_inner());
            let v: Vec<&crate::Sample> = h.iter().collect();
            // Samples always serialise (numbers only).
            json(&serde_json::to_value(v).expect("Sample serialises"))
        }
        "/sample" => {
            let mut sample = shared.latest();
            sample.connections = shared.metrics.sum(|l| &l.connections);
            // Live totals too: a reader differencing two asks (a bench's connects over
            // a run) must not be up to a sample period behind at either end.
            sample.connects_total = shared.metrics.sum(|l| &l.connects);
            sample.closes_total = shared.metrics.sum(|l| &l.closes);
            sample.messages_out_total = shared.metrics.sum(|l| &l.messages_out);
            // Samples always serialise (numbers only).
            json(&serde_json::to_value(sample).expect("Sample serialises"))
        }
        "/favicon.ico" => Response::from_string("").with_status_code(204),
        path => match crate::example::asset(path) {
            Some((content_type, body)) => Response::from_string(body)
                .with_header(header("Content-Type", content_type))
                .with_header(header("Cache-Control", "no-store")),
            None => text(
                404,
                "not found: try /, /metrics, /healthz, /stats, /history, /sample, /example/\n",
            ),
        },
    }
}
