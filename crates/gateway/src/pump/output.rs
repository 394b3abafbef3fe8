//! Output waiting on a socket that could not take it all: shared, reference-counted
//! frames (`Bytes`) in order, written with one `writev` as soon as the socket drains.
//! This is also where coalescing happens: several pending messages leave in one write.

use bytes::{Buf, Bytes};
use connection::Outbox;
use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};

/// At most this many frames go into one `writev` (Linux allows 1024; 64 is plenty).
pub(super) const MAX_IOVECS: usize = 64;

#[derive(Default)]
pub struct OutQueue {
    parts: VecDeque<Bytes>,
    bytes: usize,
}

impl OutQueue {
    /// Queues the outbox's bytes after the first `skip` (already written).
    pub fn push_outbox(&mut self, outbox: &Outbox, mut skip: usize) {
        for piece in outbox.pieces() {
            let len = outbox.slice(piece).len();
            if skip >= len {
                skip -= len;
                continue;
            }
            self.push(outbox.tail(piece, skip));
            skip = 0;
        }
    }

    pub fn push(&mut self, part: Bytes) {
        if !part.is_empty() {
            self.bytes += part.len();
            self.parts.push_back(part);
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The queued parts, in order.
    pub(super) fn parts(&self) -> impl Iterator<Item = &Bytes> {
        self.parts.iter()
    }

    /// Writes as much as the socket takes. Ok(bytes written); WouldBlock is not an error.
    pub fn flush(&mut self, sink: &mut impl Write) -> io::Result<usize> {
        let mut total = 0;
        while !self.parts.is_empty() {
            // On the stack: no allocation per write.
            let mut slices = [IoSlice::new(&[]); MAX_IOVECS];
            let mut count = 0;
            for (slot, part) in slices.iter_mut().zip(self.parts.iter()) {
                *slot = IoSlice::new(part);
                count += 1;
            }
            match sink.write_vectored(&slices[..count]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    total += n;
                    self.consume(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }

    /// Forgets the first `n` bytes (written).
    pub(super) fn consume(&mut self, mut n: usize) {
        self.bytes -= n;
        while n > 0 {
            // Invariant: n never exceeds the queued bytes, so a front part exists.
            let front = self.parts.front_mut().expect("consumed more than queued");
            if front.len() <= n {
                n -= front.len();
                self.parts.pop_front();
            } else {
                front.advance(n);
                n = 0;
            }
        }
    }
}

/// Writes the outbox's bytes straight to the socket (the idle-connection fast path:
/// no allocation when the socket takes everything), returning how many bytes left
/// and, when the socket filled up, the rest as a new queue.
pub fn write_now(
    sink: &mut impl Write,
    outbox: &Outbox,
) -> io::Result<(usize, Option<Box<OutQueue>>)> {
    let pieces = outbox.pieces();
    let mut written = 0usize;
    loop {
        // On the stack: no allocation per write.
        let mut slices = [IoSlice::new(&[]); MAX_IOVECS];
        let mut count = 0;
        let mut skip = written;
        for piece in pieces {
            let bytes = outbox.slice(piece);
            if skip >= bytes.len() {
                skip -= bytes.len();
                continue;
            }
            if count == MAX_IOVECS {
                break;
            }
            slices[count] = IoSlice::new(&bytes[skip..]);
            count += 1;
            skip = 0;
        }
        if count == 0 {
            return Ok((written, None));
        }
        match sink.write_vectored(&slices[..count]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let mut queue = Box::<OutQueue>::default();
    queue.push_outbox(outbox, written);
    Ok((written, Some(queue)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that takes at most `room` bytes, then says WouldBlock.
    struct Tight {
        got: Vec<u8>,
        room: usize,
    }
    impl Write for Tight {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn outbox(parts: &[&'static [u8]]) -> Outbox {
        let mut out = Outbox::new(1);
        for (i, p) in parts.iter().enumerate() {
            if i % 2 == 0 {
                out.send_static(p);
            } else {
                out.write(|b| b.extend_from_slice(p));
            }
        }
        out
    }

    #[test]
    fn partial_writes_keep_the_rest_in_order() {
        let out = outbox(&[b"hello ", b"world"]);
        let mut sink = Tight {
            got: vec![],
            room: 8,
        };
        let (n, queue) = write_now(&mut sink, &out).unwrap();
        assert_eq!(n, 8);
        let mut queue = queue.expect("3 bytes left");
        assert_eq!(queue.bytes(), 3);
        queue.push(Bytes::from_static(b"!"));
        sink.room = 100;
        assert_eq!(queue.flush(&mut sink).unwrap(), 4);
        assert!(queue.is_empty());
        assert_eq!(sink.got, b"hello world!");
    }

    #[test]
    fn everything_fits_means_no_queue() {
        let out = outbox(&[b"abc"]);
        let mut sink = Tight {
            got: vec![],
            room: 100,
        };
        let (n, queue) = write_now(&mut sink, &out).unwrap();
        assert_eq!((n, queue.is_none()), (3, true));
    }

    #[test]
    fn more_pieces_than_one_writev_takes() {
        let mut out = Outbox::new(1);
        for i in 0..(3 * MAX_IOVECS) {
            out.write(|b| b.push(b'a' + (i % 26) as u8));
            out.send_static(b"-");
        }
        let mut sink = Tight {
            got: vec![],
            room: usize::MAX,
        };
        let (n, queue) = write_now(&mut sink, &out).unwrap();
        assert_eq!(n, 6 * MAX_IOVECS);
        assert!(queue.is_none());
        assert_eq!(sink.got, out.take_all_bytes());
    }
}
