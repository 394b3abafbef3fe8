//! Sends submitted together through io_uring (`--io-uring`): the bytes of up to a
//! slice of connections are gathered, then one `io_uring_enter` issues every send.
//! Two kinds of batch, never mixed: a fan-out's fresh output to idle connections
//! (the outbox's bytes, kept here) and a slice of connections' queued output (their
//! [`OutQueue`]s, read in place). Measured in isolation
//! (docs/decisions/writes-coalescing-and-io-uring.md): 19–30 % less CPU per send than one `writev` each, the syscall's entry
//! and exit being paid once per batch rather than once per connection.
//!
//! The sends are non-blocking (`MSG_DONTWAIT`), so each one completes while the
//! batch is submitted: a socket that takes less than all keeps the rest queued,
//! exactly as after a short `writev` (its buffer filled, so the edge-triggered
//! writable event comes when it drains). Nothing outlives one `submit`, which keeps
//! the buffers' lifetime simple: they stay untouched until every completion is read.

use super::output::{OutQueue, MAX_IOVECS};
use bytes::Bytes;
use connection::{Outbox, Piece};
use io_uring::{opcode, types, IoUring};
use std::io;
use std::os::fd::RawFd;

/// Submission queue entries: one slice of a fan-out (`inbox::SLICE`) per submit;
/// a longer batch goes in several.
const ENTRIES: u32 = 256;
/// Fewer sends than this go one `writev` each (a unicast's lone delivery, a
/// handful merged): too few syscalls to save. Unicast measured the same either
/// way (docs/decisions/writes-coalescing-and-io-uring.md).
pub const MIN_BATCH: usize = 4;

pub(super) struct SendBatch {
    ring: IoUring,
    /// One per connection, in the order added.
    entries: Vec<Entry>,
    /// Fresh output's pieces, in order; `Inline` spans are in `inline`.
    pieces: Vec<Piece>,
    inline: Vec<u8>,
    /// Every entry's buffers. Those of `Inline` pieces are pointed at `inline` only
    /// at submit time (`inline_at`), when it no longer grows.
    iovecs: Vec<libc::iovec>,
    /// (iovec, offset in `inline`) to point at submit time.
    inline_at: Vec<(u32, u32)>,
    headers: Vec<libc::msghdr>,
    done: Vec<Sent>,
    /// A submit failed: the loop stops using the ring.
    failed: bool,
}

// SAFETY: the raw pointers in `iovecs` and `headers` point into buffers this batch
// owns (or, for queued output, into `Bytes` its caller leaves untouched until
// `submit`); they are read only by the kernel during `submit`. The batch belongs to
// one loop and moves with it (its thread, or another loop's thread under the loop's
// lock), never shared.
unsafe impl Send for SendBatch {}

struct Entry {
    index: usize,
    fd: RawFd,
    /// `iovecs[iov_first..iov_end]`.
    iov_first: u32,
    iov_end: u32,
    /// Fresh output: `pieces[first..end]`; queued output: an empty range.
    first: u32,
    end: u32,
    /// Bytes asked to send.
    len: usize,
    /// The send's result, once completed (bytes, or -errno).
    result: Option<i32>,
}

/// What became of one connection's bytes.
pub(super) struct Sent {
    pub index: usize,
    /// Bytes the socket took, or the error that should close it.
    pub written: io::Result<usize>,
    /// Bytes asked to send: a queue that took all of them may hold more.
    pub asked: usize,
    /// Fresh output the socket did not take, to queue (its writable edge comes).
    pub rest: Option<Box<OutQueue>>,
    /// Nothing was tried (the submit failed or was interrupted), so no writable
    /// edge will come: the caller writes the rest itself.
    pub untried: bool,
}

impl SendBatch {
    pub fn new() -> io::Result<SendBatch> {
        // Not SINGLE_ISSUER: another loop's thread may run this loop's mailbox
        // (`drain_for_another`), under the loop's lock.
        let ring = IoUring::builder().setup_coop_taskrun().build(ENTRIES)?;
        Ok(SendBatch {
            ring,
            entries: Vec::new(),
            pieces: Vec::new(),
            inline: Vec::new(),
            iovecs: Vec::new(),
            inline_at: Vec::new(),
            headers: Vec::new(),
            done: Vec::new(),
            failed: false,
        })
    }

    pub fn failed(&self) -> bool {
        self.failed
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether connection `index` has a send here.
    pub fn holds(&self, index: usize) -> bool {
        self.entries.iter().any(|e| e.index == index)
    }

    /// Takes the outbox's bytes for connection `index` (socket `fd`). A second call
    /// for the connection added last extends its send (one send per connection, so
    /// its bytes cannot be reordered). False, and nothing taken, when that would be
    /// more than [`MAX_IOVECS`] buffers, or when the connection has a send here that
    /// is not the last: submit, then write.
    #[must_use]
    pub fn add(&mut self, index: usize, fd: RawFd, outbox: &Outbox) -> bool {
        let extend = self.entries.last().is_some_and(|e| e.index == index);
        let have = if extend {
            self.entries.last().map_or(0, |e| e.iov_end - e.iov_first) as usize
        } else if self.holds(index) {
            return false;
        } else {
            0
        };
        if have + outbox.pieces().len() > MAX_IOVECS {
            return false;
        }
        let (first, iov_first) = (self.pieces.len() as u32, self.iovecs.len() as u32);
        let mut len = 0;
        for piece in outbox.pieces() {
            let bytes = outbox.slice(piece);
            len += bytes.len();
            let piece = match piece {
                Piece::Shared(b) => {
                    self.iovecs.push(iovec(b));
                    Piece::Shared(b.clone())
                }
                Piece::Inline(..) => {
                    let start = self.inline.len() as u32;
                    self.inline.extend_from_slice(bytes);
                    self.inline_at.push((self.iovecs.len() as u32, start));
                    self.iovecs.push(libc::iovec {
                        iov_base: std::ptr::null_mut(),
                        iov_len: bytes.len(),
                    });
                    Piece::Inline(start, self.inline.len() as u32)
                }
            };
            self.pieces.push(piece);
        }
        let (end, iov_end) = (self.pieces.len() as u32, self.iovecs.len() as u32);
        match self.entries.last_mut() {
            Some(last) if extend => {
                last.end = end;
                last.iov_end = iov_end;
                last.len += len;
            }
            _ => self.entries.push(Entry {
                index,
                fd,
                iov_first,
                iov_end,
                first,
                end,
                len,
                result: None,
            }),
        }
        true
    }

    /// Adds connection `index`'s queued output (its first [`MAX_IOVECS`] parts).
    /// The queue must stay untouched until [`SendBatch::submit`]; the caller then
    /// consumes what each send took. A connection already here is not added twice.
    pub fn add_queue(&mut self, index: usize, fd: RawFd, queue: &OutQueue) {
        if self.holds(index) {
            return;
        }
        let iov_first = self.iovecs.len() as u32;
        let mut len = 0;
        for part in queue.parts().take(MAX_IOVECS) {
            len += part.len();
            self.iovecs.push(iovec(part));
        }
        let (first, iov_end) = (self.pieces.len() as u32, self.iovecs.len() as u32);
        self.entries.push(Entry {
            index,
            fd,
            iov_first,
            iov_end,
            first,
            end: first,
            len,
            result: None,
        });
    }

    /// Sends everything added, waits for every completion and says what became of
    /// each connection's bytes (in the order added). Empties the batch; give the
    /// returned vector back with [`SendBatch::recycle`].
    pub fn submit(&mut self) -> Vec<Sent> {
        let failed = self.send_all().err();
        let mut done = std::mem::take(&mut self.done);
        for entry in &self.entries {
            let (written, untried) = match entry.result {
                Some(n) if n >= 0 => (Ok(n as usize), false),
                // A full socket: its writable edge will come.
                Some(e) if e == -libc::EAGAIN => (Ok(0), false),
                // Interrupted before trying: no edge will come.
                Some(e) if e == -libc::EINTR => (Ok(0), true),
                Some(e) => (Err(io::Error::from_raw_os_error(-e)), false),
                None => (Ok(0), true),
            };
            let pieces = &self.pieces[entry.first as usize..entry.end as usize];
            let taken = *written.as_ref().unwrap_or(&entry.len);
            let rest = (!pieces.is_empty() && taken < entry.len).then(|| self.rest(pieces, taken));
            done.push(Sent {
                index: entry.index,
                written,
                asked: entry.len,
                rest,
                untried,
            });
        }
        if let Some(e) = failed {
            tracing::warn!(error = %e, "io_uring submit failed; this loop sends with writev from now on");
            self.failed = true;
        }
        self.entries.clear();
        self.pieces.clear();
        self.inline.clear();
        self.iovecs.clear();
        self.inline_at.clear();
        done
    }

    pub fn recycle(&mut self, mut done: Vec<Sent>) {
        done.clear();
        self.done = done;
    }

    /// Issues one SQE per entry, `ENTRIES` per `io_uring_enter`, and records each
    /// completion in its entry.
    fn send_all(&mut self) -> io::Result<()> {
        // Every pointer into `inline`, `iovecs` and `headers` is taken after they
        // are complete: no reallocation moves them while the kernel may read them.
        for &(iov, start) in &self.inline_at {
            let iov = &mut self.iovecs[iov as usize];
            iov.iov_base = self.inline[start as usize..].as_ptr() as *mut libc::c_void;
        }
        self.headers.clear();
        for entry in &self.entries {
            // SAFETY: msghdr is plain data; all-zero is its empty value.
            let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
            header.msg_iov = self.iovecs[entry.iov_first as usize..].as_ptr() as *mut libc::iovec;
            header.msg_iovlen = (entry.iov_end - entry.iov_first) as _;
            self.headers.push(header);
        }
        let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        let mut next = 0;
        while next < self.entries.len() {
            let chunk = (self.entries.len() - next).min(ENTRIES as usize);
            {
                let mut sq = self.ring.submission();
                for i in next..next + chunk {
                    let entry = &self.entries[i];
                    let fd = types::Fd(entry.fd);
                    let sqe = if entry.iov_end - entry.iov_first == 1 {
                        let iov = &self.iovecs[entry.iov_first as usize];
                        opcode::Send::new(fd, iov.iov_base as *const u8, iov.iov_len as u32)
                            .flags(flags)
                            .build()
                    } else {
                        opcode::SendMsg::new(fd, &self.headers[i])
                            .flags(flags as u32)
                            .build()
                    };
                    // SAFETY: the buffers, iovecs and headers are neither moved nor
                    // freed until every completion of this chunk is read below; the
                    // queue holds ENTRIES and a chunk is at most that.
                    unsafe { sq.push(&sqe.user_data(i as u64)) }
                        .expect("the submission queue has room for a chunk");
                }
            }
            let mut reaped = 0;
            while reaped < chunk {
                match self.ring.submit_and_wait(chunk - reaped) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
                for cqe in self.ring.completion() {
                    if let Some(entry) = self.entries.get_mut(cqe.user_data() as usize) {
                        entry.result = Some(cqe.result());
                        reaped += 1;
                    }
                }
            }
            next += chunk;
        }
        Ok(())
    }

    fn bytes<'a>(&'a self, piece: &'a Piece) -> &'a [u8] {
        match piece {
            Piece::Shared(b) => b,
            Piece::Inline(start, end) => &self.inline[*start as usize..*end as usize],
        }
    }

    /// `pieces` after their first `skip` bytes, as a queue.
    fn rest(&self, pieces: &[Piece], mut skip: usize) -> Box<OutQueue> {
        let mut queue = Box::<OutQueue>::default();
        for piece in pieces {
            let bytes = self.bytes(piece);
            if skip >= bytes.len() {
                skip -= bytes.len();
                continue;
            }
            queue.push(match piece {
                Piece::Shared(b) => b.slice(skip..),
                Piece::Inline(..) => Bytes::copy_from_slice(&bytes[skip..]),
            });
            skip = 0;
        }
        queue
    }
}

fn iovec(bytes: &[u8]) -> libc::iovec {
    libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    fn outbox(parts: &[&[u8]]) -> Outbox {
        let mut out = Outbox::new(1);
        for (i, p) in parts.iter().enumerate() {
            if i % 2 == 0 {
                out.send(&Bytes::copy_from_slice(p));
            } else {
                out.write(|b| b.extend_from_slice(p));
            }
        }
        out
    }

    fn ring() -> SendBatch {
        SendBatch::new().expect(
            "io_uring: needs Linux ≥ 5.6 with io_uring allowed (sysctl kernel.io_uring_disabled = 0)",
        )
    }

    fn pair() -> (UnixStream, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        (a, b)
    }

    fn read_all(mut s: &UnixStream, n: usize) -> Vec<u8> {
        let mut got = vec![0; n];
        s.read_exact(&mut got).unwrap();
        got
    }

    #[test]
    fn every_connection_gets_its_bytes_and_a_second_add_extends_its_send() {
        let mut batch = ring();
        let socks: Vec<_> = (0..3).map(|_| pair()).collect();
        for (i, (ours, _)) in socks.iter().enumerate() {
            assert!(batch.add(
                i,
                ours.as_raw_fd(),
                &outbox(&[b"data: ", format!("{i}").as_bytes()])
            ));
        }
        // Connection 2 again (its handler wrote twice): one send, in order.
        assert!(batch.add(2, socks[2].0.as_raw_fd(), &outbox(&[b"\n\n"])));
        assert!(batch.holds(2) && !batch.holds(3));
        let done = batch.submit();
        assert_eq!(done.len(), 3, "one send per connection");
        for (i, sent) in done.iter().enumerate() {
            let want = if i == 2 {
                "data: 2\n\n".to_string()
            } else {
                format!("data: {i}")
            };
            assert_eq!(sent.index, i);
            assert_eq!(*sent.written.as_ref().unwrap(), want.len());
            assert!(sent.rest.is_none() && !sent.untried);
            assert_eq!(read_all(&socks[i].1, want.len()), want.as_bytes());
        }
        batch.recycle(done);
        assert!(batch.is_empty() && !batch.failed());
    }

    #[test]
    fn a_socket_that_takes_part_leaves_the_rest_queued_in_order() {
        let mut batch = ring();
        let (ours, theirs) = pair();
        // Far more than a socket buffer: the send takes part of it.
        let big: Vec<u8> = (0..4 << 20).map(|i| (i % 251) as u8).collect();
        assert!(batch.add(0, ours.as_raw_fd(), &outbox(&[&big, b"-tail"])));
        let mut done = batch.submit();
        let sent = done.pop().unwrap();
        let written = sent.written.unwrap();
        assert!(
            written > 0 && written < big.len(),
            "a partial send: {written}"
        );
        assert!(!sent.untried, "a full socket's writable edge will come");
        let mut rest = sent.rest.expect("the rest is queued");
        assert_eq!(rest.bytes(), big.len() + 5 - written);
        // The reader gets the prefix, then the queue's bytes as the socket drains.
        let reader = std::thread::spawn(move || read_all(&theirs, big.len() + 5));
        let mut sink = &ours;
        while !rest.is_empty() {
            rest.flush(&mut sink).unwrap();
            std::thread::yield_now();
        }
        let got = reader.join().unwrap();
        let mut want: Vec<u8> = (0..4 << 20).map(|i| (i % 251) as u8).collect();
        want.extend_from_slice(b"-tail");
        assert!(got == want, "bytes out of order or lost");
    }

    #[test]
    fn a_send_to_a_closed_peer_is_an_error() {
        let mut batch = ring();
        let (ours, theirs) = pair();
        drop(theirs);
        assert!(batch.add(5, ours.as_raw_fd(), &outbox(&[b"x"])));
        let sent = batch.submit().pop().unwrap();
        assert_eq!(sent.index, 5);
        assert_eq!(sent.written.unwrap_err().raw_os_error(), Some(libc::EPIPE));
    }

    #[test]
    fn queued_output_is_sent_in_place_and_the_caller_consumes_what_went() {
        let mut batch = ring();
        let (ours, theirs) = pair();
        let mut queue = OutQueue::default();
        for i in 0..(MAX_IOVECS + 6) {
            queue.push(Bytes::from(format!("<{i}>")));
        }
        let total = queue.bytes();
        batch.add_queue(3, ours.as_raw_fd(), &queue);
        batch.add_queue(3, ours.as_raw_fd(), &queue);
        let done = batch.submit();
        assert_eq!(done.len(), 1, "a connection is added once");
        let sent = &done[0];
        let n = *sent.written.as_ref().unwrap();
        // One send takes the first MAX_IOVECS parts; the caller writes the rest.
        let first: usize = (0..MAX_IOVECS).map(|i| format!("<{i}>").len()).sum();
        assert_eq!((n, sent.asked), (first, first));
        assert!(first < total);
        queue.consume(n);
        let mut sink = &ours;
        queue.flush(&mut sink).unwrap();
        let want: String = (0..(MAX_IOVECS + 6)).map(|i| format!("<{i}>")).collect();
        assert_eq!(read_all(&theirs, want.len()), want.as_bytes());
    }

    #[test]
    fn a_connection_whose_send_is_not_the_last_is_refused() {
        let mut batch = ring();
        let (a, b) = (pair(), pair());
        assert!(batch.add(1, a.0.as_raw_fd(), &outbox(&[b"one"])));
        assert!(batch.add(2, b.0.as_raw_fd(), &outbox(&[b"two"])));
        assert!(!batch.add(1, a.0.as_raw_fd(), &outbox(&[b"three"])));
        assert_eq!(batch.submit().len(), 2);
    }

    #[test]
    fn more_buffers_than_one_send_takes_are_refused() {
        let mut batch = ring();
        let (ours, _theirs) = pair();
        let many: Vec<&[u8]> = (0..MAX_IOVECS).map(|_| &b"ab"[..]).collect();
        assert!(batch.add(1, ours.as_raw_fd(), &outbox(&many)));
        assert!(!batch.add(1, ours.as_raw_fd(), &outbox(&[b"c"])));
        let done = batch.submit();
        assert_eq!(*done[0].written.as_ref().unwrap(), 2 * MAX_IOVECS);
    }
}
