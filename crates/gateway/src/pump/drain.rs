//! The loop's side of a graceful drain (see `connection::drain` for what each client is
//! told): the listener leaves the SO_REUSEPORT group at once, then the loop's
//! connections are told to reconnect a share at a time, in proportion to the drain
//! period that has passed, so reconnects arrive spread rather than as one storm.

use super::EventLoop;
use std::time::{Duration, Instant};

/// How long connections told to go may take to read their goodbye after the drain
/// period, before the loop closes what is left and ends.
const GRACE: Duration = Duration::from_secs(2);

/// Where a loop's drain stands.
pub(super) struct Progress {
    last: Instant,
}

impl EventLoop {
    /// One drain step; true when the loop is done and should end.
    pub(super) fn drain_step(&mut self) -> bool {
        let Some(until) = *self.gateway.drain_until.lock() else {
            return false;
        };
        let now = Instant::now();
        let last = match &self.drain {
            Some(p) => p.last,
            None => {
                self.stop_listening();
                now
            }
        };
        if now >= until + GRACE || self.conns.is_empty() {
            self.close_all();
            return true;
        }
        let open: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, s)| !s.conn.is_closing())
            .map(|(i, _)| i)
            .collect();
        let share = if now >= until {
            open.len()
        } else {
            let passed = now.duration_since(last).as_secs_f64();
            let left = until.duration_since(last).as_secs_f64().max(1e-3);
            ((open.len() as f64) * passed / left).ceil() as usize
        };
        self.drain = Some(Progress { last: now });
        for index in open.into_iter().take(share) {
            self.with_core(index, |conn, cx| {
                conn.handle_drain(cx);
            });
        }
        self.run_resumes();
        false
    }

    /// Leaves the accept group: no new connection comes to this loop (the kernel
    /// sends them to servers still listening, or refuses them).
    fn stop_listening(&mut self) {
        // Closing the socket takes it out of the SO_REUSEPORT group.
        self.listener.leave(&self.registry);
        self.drain = Some(Progress {
            last: Instant::now(),
        });
    }
}
