//! Output waiting on a socket that could not take it all: shared, reference-counted
//! frames (`Bytes`) in order, written with one `writev` as soon as the socket drains.
//! This is also where coalescing happens: several pending messages leave in one write.

use bytes::{Buf, Bytes};
use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};

/// At most this many frames go into one `writev` (Linux allows 1024; 64 is plenty).
const MAX_IOVECS: usize = 64;

#[derive(Default)]
pub struct OutQueue {
    parts: VecDeque<Bytes>,
    bytes: usize,
}

impl OutQueue {
    pub fn push_part(&mut self, part: Part<'_>) {
        self.push(part.tail(0));
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

    fn consume(&mut self, mut n: usize) {
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

/// A piece of one delivery: shared frame bytes (kept by reference if they must wait) or a
/// small per-recipient piece on the stack (copied only if it must wait).
#[derive(Clone, Copy)]
pub enum Part<'a> {
    Shared(&'a Bytes),
    Copy(&'a [u8]),
}

impl Part<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            Part::Shared(b) => b,
            Part::Copy(s) => s,
        }
    }

    fn tail(&self, from: usize) -> Bytes {
        match self {
            Part::Shared(b) => b.slice(from..),
            Part::Copy(s) => Bytes::copy_from_slice(&s[from..]),
        }
    }

    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }
}

/// Most parts one delivery is made of (an SSE event is an `id:` line plus shared data).
pub const MAX_PARTS: usize = 4;

/// Writes `parts` straight to the socket when nothing is queued (the idle-connection fast
/// path: no allocation), returning what did not fit as a new queue.
pub fn write_now(
    sink: &mut impl Write,
    parts: &[Part<'_>],
) -> io::Result<(usize, Option<Box<OutQueue>>)> {
    assert!(
        parts.len() <= MAX_PARTS,
        "a delivery has at most {MAX_PARTS} parts"
    );
    let mut skip = 0usize;
    loop {
        let mut slices = [IoSlice::new(&[]); MAX_PARTS];
        let mut count = 0;
        let mut left = skip;
        for p in parts {
            if left >= p.len() {
                left -= p.len();
                continue;
            }
            slices[count] = IoSlice::new(&p.as_slice()[left..]);
            count += 1;
            left = 0;
        }
        if count == 0 {
            return Ok((skip, None));
        }
        match sink.write_vectored(&slices[..count]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => skip += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let mut queue = Box::<OutQueue>::default();
    let mut left = skip;
    for p in parts {
        if left >= p.len() {
            left -= p.len();
            continue;
        }
        queue.push(p.tail(left));
        left = 0;
    }
    Ok((skip, Some(queue)))
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

    #[test]
    fn partial_writes_keep_the_rest_in_order() {
        let a = Bytes::from_static(b"hello ");
        let b = Bytes::from_static(b"world");
        let mut sink = Tight {
            got: vec![],
            room: 8,
        };
        let (n, queue) = write_now(&mut sink, &[Part::Shared(&a), Part::Copy(&b)]).unwrap();
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
        let a = Bytes::from_static(b"abc");
        let mut sink = Tight {
            got: vec![],
            room: 100,
        };
        let (n, queue) = write_now(&mut sink, &[Part::Shared(&a)]).unwrap();
        assert_eq!((n, queue.is_none()), (3, true));
    }
}
