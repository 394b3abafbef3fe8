//! How a connection of the engine ends: the peer closed or broke it (open or not yet),
//! its response head is overdue, the run ends while it waits, or the run closes it.
//! With `--reconnect` an open connection the peer ended is scheduled again.

use super::{Engine, HANDSHAKE, OPEN};
use mio::unix::SourceFd;
use std::collections::VecDeque;
use std::io;
use std::os::fd::AsRawFd;
use std::time::Instant;

impl Engine<'_> {
    /// The TLS session refused the peer's bytes (the alert is sent): a handshake
    /// failure before the connection opened, a close after.
    pub(super) fn tls_failed(&mut self, slot: usize) {
        if !self.close_if_open(slot) {
            self.give_up(slot, |f| f.handshake += 1);
        }
    }

    /// The peer ended an open connection (or it broke): counts it closed, removes it
    /// and, with `--reconnect`, schedules it again; false if it never opened.
    pub(super) fn close_if_open(&mut self, slot: usize) -> bool {
        let Some(conn) = self.slab[slot].as_ref() else {
            return false;
        };
        if conn.phase != OPEN {
            return false;
        }
        let local = conn.local;
        self.remove(slot);
        self.tally.closed();
        if let Some(t) = self.tracks.get_mut(local as usize) {
            (t.retry, t.attempt) = (true, 0);
            self.schedule(local);
        }
        true
    }

    /// The peer ended the connection (or it broke).
    pub(super) fn end(&mut self, slot: usize, err: Option<io::Error>) {
        let handshaking = matches!(&self.slab[slot], Some(c) if c.phase == HANDSHAKE);
        if !self.close_if_open(slot) {
            if handshaking
                && err
                    .as_ref()
                    .is_none_or(|e| e.raw_os_error() == Some(libc::ECONNRESET))
            {
                // The server closed (or reset) in the middle of the TLS handshake.
                return self.give_up(slot, |f| f.handshake += 1);
            }
            match err {
                Some(e) => self.fail(slot, Some(e)),
                None => self.give_up(slot, |f| f.closed_early += 1),
            }
        }
    }

    pub(super) fn fail_status(&mut self, slot: usize) {
        // Bad framing after a good head: the connection was open, now closed.
        if !self.close_if_open(slot) {
            self.give_up(slot, |f| f.bad_status += 1);
        }
    }

    /// A connection that never opened failed.
    pub(super) fn fail(&mut self, slot: usize, err: Option<io::Error>) {
        self.give_up(slot, |f| match err {
            Some(e) => f.count_io(&e),
            None => f.timeout += 1,
        });
    }

    pub(super) fn remove_pending(&mut self, slot: usize) {
        self.tally.inflight -= 1;
        self.remove(slot);
    }

    pub(super) fn remove(&mut self, slot: usize) {
        if let Some(conn) = self.slab[slot].take() {
            let _ = self
                .poll
                .registry()
                .deregister(&mut SourceFd(&conn.sock.as_raw_fd()));
            self.free.push(slot as u32);
        }
    }

    /// Fail connections whose response head did not come in time.
    pub(super) fn expire(&mut self, now: Instant) {
        while let Some(&(slot, local, deadline)) = self.pending.front() {
            if deadline > now {
                break;
            }
            self.pending.pop_front();
            if self.pending.is_empty() && self.pending.capacity() > 4096 {
                // The ramp is over: give the queue's memory back so RSS shows connections.
                self.pending = VecDeque::new();
            }
            let waiting =
                matches!(&self.slab[slot as usize], Some(c) if c.local == local && c.phase != OPEN);
            if waiting {
                self.fail(slot as usize, None);
            }
        }
    }

    /// The run is ending: connections still waiting for a response head are cancelled.
    pub(super) fn drop_pending(&mut self) {
        while let Some((slot, local, _)) = self.pending.pop_front() {
            let waiting =
                matches!(&self.slab[slot as usize], Some(c) if c.local == local && c.phase != OPEN);
            if waiting {
                // Not the server's fault: the run ended while this one was in flight
                // (a reconnect attempt then is not a failure at all).
                let retry = self.tracks.get(local as usize).is_some_and(|t| t.retry);
                if !retry {
                    self.tally.counts.fail.cancelled += 1;
                }
                self.remove_pending(slot as usize);
            }
        }
    }

    /// Close up to `n` open connections scanning from `cursor`; returns the new cursor.
    pub(super) fn close_some(&mut self, n: u64, mut cursor: usize) -> usize {
        let mut done = 0;
        while done < n && cursor < self.slab.len() {
            if matches!(&self.slab[cursor], Some(c) if c.phase == OPEN) {
                self.remove(cursor);
                self.tally.closed();
                done += 1;
            }
            cursor += 1;
        }
        cursor
    }
}
