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
