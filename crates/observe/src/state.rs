//! What the sampler thread, the admin thread and the `Monitor` share: the latest
//! samples and what a server adds to them. Its own file so the admin listener and
//! the monitor that starts it both read it without importing each other.

use crate::metrics::ProcessMetrics;
use crate::sample::Sample;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

/// Server-specific figures (router counts and the like) merged into `/stats` and `/metrics`.
pub type ExtraStats = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// A query the admin listener hands to the server (`GET /presence/…`): the path,
/// the `Authorization` header, and whether the peer is on loopback.
pub struct Query<'a> {
    pub path: &'a str,
    pub authorization: Option<&'a str>,
    pub loopback: bool,
}

/// The server's answer to a [`Query`]: status, and a JSON body (or a text one
/// for an error).
pub struct QueryAnswer {
    pub status: u16,
    pub json: bool,
    pub body: Vec<u8>,
}

impl QueryAnswer {
    /// The answer in `raw`, a whole `Connection: close` answer of an admin
    /// listener (a supervisor reads its router's): httparse reads the head; the
    /// rest is the body (asked with `Connection: close`, tiny_http sends it whole
    /// with a `Content-Length`). `None`: not an HTTP answer's head.
    pub fn read(raw: &[u8]) -> Option<QueryAnswer> {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut head = httparse::Response::new(&mut headers);
        let httparse::Status::Complete(end) = head.parse(raw).ok()? else {
            return None;
        };
        let json = head.headers.iter().any(|h| {
            h.name.eq_ignore_ascii_case("content-type")
                && String::from_utf8_lossy(h.value).contains("application/json")
        });
        Some(QueryAnswer {
            status: head.code?,
            json,
            body: raw[end..].to_vec(),
        })
    }
}

/// The server's query hook on the admin listener: `None` for a path it does not
/// answer.
pub type QueryFn = Arc<dyn Fn(&Query<'_>) -> Option<QueryAnswer> + Send + Sync>;

/// Samples of other processes of the same server (e.g. gateway processes under a
/// supervisor), listed after this one in `/stats` `processes` so `myriad top` shows them all.
pub type ChildSamples = Arc<dyn Fn() -> Vec<Sample> + Send + Sync>;

/// State shared by the sampler thread, the admin thread and `Monitor`.
pub(crate) struct MonitorState {
    pub(crate) metrics: Arc<ProcessMetrics>,
    pub(crate) extra: ExtraStats,
    pub(crate) children: Mutex<Option<ChildSamples>>,
    /// The latest samples, newest last; never empty.
    pub(crate) history: Mutex<VecDeque<Sample>>,
    pub(crate) stop: Mutex<bool>,
    pub(crate) wake: Condvar,
}

impl MonitorState {
    /// The newest sample.
    pub(crate) fn latest(&self) -> Sample {
        let h = self.history.lock().unwrap_or_else(|p| p.into_inner());
        // The history is filled with one sample before any thread starts.
        h.back().cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_read_back_keeps_its_status_type_and_body() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"n\":1}\n";
        let a = QueryAnswer::read(raw).unwrap();
        assert_eq!((a.status, a.json), (200, true));
        assert_eq!(a.body, b"{\"n\":1}\n");
        let raw = b"HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\n\r\nno";
        let a = QueryAnswer::read(raw).unwrap();
        assert_eq!((a.status, a.json, &a.body[..]), (404, false, &b"no"[..]));
        assert!(QueryAnswer::read(b"HTTP/1.1 200 OK\r\n").is_none());
    }
}
