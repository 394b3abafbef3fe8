//! Back-ends' queries ahead of the crowd. A keep-alive connection that asked the
//! router something a back-end asks (`GET /presence/…`, `/online/…`, `/stats`) is
//! remembered as an *asker*. As the loop works ([`EventLoop::worked`]: every
//! 32 events or calls, every 64 connections written from the mailbox, whichever
//! phase of the round they fall in) and after an accept batch, it reads the
//! askers' sockets, sends their calls ahead of the round's others and
//! writes what they have queued (a long member list does not fit the socket's
//! buffer in one write), instead of serving them in their turn: under a connect
//! storm a round ran for hundreds of ms of accepts, closes and join pushes, and
//! the query waited behind them all (issue 42: a 10,000-member list p99 of
//! 168–869 ms on the API port, 5–9 ms on the admin listener's own thread). A read
//! that finds nothing costs one `recv` returning `EAGAIN`.

use super::EventLoop;
use bus::Request;

/// Askers a loop remembers at most: back-ends keep a few connections each; past
/// this, the newest wait their turn like any client.
pub(super) const MAX_ASKERS: usize = 16;
/// Work between two reads of the askers' sockets, in connections written: 64
/// writes, well under a millisecond.
pub(super) const ASK_EVERY_WRITES: usize = 64;
/// What an event handled or a call sent counts in that: 32 of them.
pub(super) const EVENT: usize = 2;

/// The askers of one loop.
#[derive(Default)]
pub(super) struct Askers {
    tokens: Vec<u32>,
    /// Work done since they were last read (see [`EventLoop::worked`]).
    done: usize,
    /// Serving them now: the calls they make are sent from here, not again from
    /// within.
    busy: bool,
    /// Another loop's thread runs this loop's mail (`handoff`): it only writes,
    /// and the askers wait for their own thread.
    pub(super) held: bool,
}

/// Whether `request` is a back-end's query that should not wait behind the loop's
/// other work.
pub(super) fn is_query(request: &Request) -> bool {
    matches!(
        request,
        Request::Presence { .. } | Request::Online { .. } | Request::Stats
    )
}

impl EventLoop {
    /// Whether this loop has askers to read between its writes.
    pub(super) fn has_askers(&self) -> bool {
        !self.askers.tokens.is_empty()
    }

    /// `units` of work done (an [`EVENT`], or a connection written); the askers
    /// are read once [`ASK_EVERY_WRITES`] are done since they last were.
    pub(super) fn worked(&mut self, units: usize) {
        if self.askers.tokens.is_empty() {
            return;
        }
        self.askers.done += units;
        if self.askers.done >= ASK_EVERY_WRITES {
            self.serve_askers();
        }
    }

    /// Connection `token` made a back-end query: read it early from now on.
    pub(super) fn note_asker(&mut self, token: u32) {
        let askers = &mut self.askers.tokens;
        if askers.contains(&token) {
            return;
        }
        askers.retain(|&t| self.conns.live(t).is_some());
        if askers.len() < MAX_ASKERS {
            askers.push(token);
        }
    }

    /// Reads the askers' sockets, sends what they asked (ahead of the round's other
    /// calls: a connection's own calls keep their order, and no other's depend on
    /// them) and writes what they have queued. Closed askers are forgotten.
    pub(super) fn serve_askers(&mut self) {
        if self.askers.tokens.is_empty() || self.askers.busy || self.askers.held {
            return;
        }
        self.askers.busy = true;
        self.askers.done = 0;
        let mut i = 0;
        while let Some(&token) = self.askers.tokens.get(i) {
            match self.conns.live(token) {
                Some(index) => {
                    self.on_readable(index);
                    i += 1;
                }
                None => {
                    self.askers.tokens.swap_remove(i);
                }
            }
        }
        // Their calls first: the round's others (hundreds of joins and leaves
        // under a storm) keep their order and go after.
        let mut rest = std::mem::take(&mut self.calls);
        let tokens = &self.askers.tokens;
        self.calls
            .extend(rest.extract_if(.., |call| tokens.contains(&call.token)));
        if !self.calls.is_empty() {
            self.send_calls();
        }
        self.calls.append(&mut rest);
        for i in 0..self.askers.tokens.len() {
            if let Some(index) = self.conns.live(self.askers.tokens[i]) {
                self.flush(index);
            }
        }
        self.askers.busy = false;
    }
}
