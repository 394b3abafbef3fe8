//! `--latency-at socket`: a message's latency ends when its bytes reached this client's
//! socket (the kernel's receive stamp, `SO_TIMESTAMPNS`), not when flood got around
//! to reading them. On a box that runs the load beside the server, the read time adds
//! the client's own wait for a CPU; the socket stamp leaves it out and keeps everything
//! on the server's side of the wire (on loopback the stamp is taken when the server's
//! send reaches the loopback device, see `loopback_xmit`).
//!
//! A TCP read that spans several segments carries the stamp of the last one read, so an
//! earlier message in the same read is stamped a little late: the figure can only err
//! long, never short. The kernel turns stamping on a moment after the first socket asks
//! (a deferred static key); a read that comes back without a stamp is timed at the read.

use std::io;
use std::os::fd::RawFd;

/// Where flood takes a message's receive time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LatencyAt {
    /// When flood reads the message (includes this client's wait for a CPU).
    #[default]
    Read,
    /// When the bytes reached this client's socket (kernel receive stamp).
    Socket,
}

/// Asks the kernel to stamp every segment this socket receives (wall clock, ns).
pub fn enable(fd: RawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads an int we own for the length we pass.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &one as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    zero_or_errno(r)
}

/// One `recvmsg` into `buf`: the bytes read and, when the kernel stamped them, the
/// receive time in µs since the Unix epoch.
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    // Room for one SCM_TIMESTAMPNS control message (a struct timespec), u64-aligned.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at `buf` and `control`, both live and writable for their lengths.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* walk stays within `msg_controllen`, which the kernel set.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::timespec);
                stamp = Some(ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n as usize, stamp))
}

/// `--nice N`: this process at niceness `n`, so that on a shared box the server's
/// processes are scheduled first. Raising it needs no privilege; lowering it below the
/// current value needs root.
pub fn set_nice(n: i32) -> io::Result<()> {
    // SAFETY: setpriority on this process only.
    zero_or_errno(unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, n) })
}

/// A libc call's 0 as `Ok`, anything else as the `errno` it left.
fn zero_or_errno(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    /// The stamp is when the bytes arrived, not when they were read: read 300 ms after
    /// the write, it is at least that much older than the read (a lower bound a slow
    /// machine can only widen).
    #[test]
    fn the_stamp_is_the_arrival_not_the_read() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        enable(client.as_raw_fd()).unwrap();
        // The kernel turns stamping on for the machine a moment later (a deferred static
        // key in `net_enable_timestamp`); until then reads carry no stamp.
        let mut buf = [0u8; 64];
        let warm = (0..200).any(|_| {
            server.write_all(b"w").unwrap();
            let (_, stamp) = recv(client.as_raw_fd(), &mut buf).unwrap();
            stamp.is_some() || {
                std::thread::sleep(Duration::from_millis(10));
                false
            }
        });
        assert!(warm, "the kernel never stamped a read");
        let before = host::sys::unix_micros();
        server.write_all(b"hello").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let (n, stamp) = recv(client.as_raw_fd(), &mut buf).unwrap();
        let read_at = host::sys::unix_micros();
        assert_eq!(&buf[..n], b"hello");
        let stamp = stamp.expect("a stamped read");
        assert!(stamp + 300_000 <= read_at, "stamp {stamp}, read {read_at}");
        assert!(
            stamp + 1_000 >= before,
            "stamp {stamp} before the write at {before}"
        );
    }

    /// Without `enable`, reads carry no stamp (and still read).
    #[test]
    fn an_unstamped_socket_reads_plainly() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        server.write_all(b"x").unwrap();
        let mut buf = [0u8; 8];
        let (n, stamp) = recv(client.as_raw_fd(), &mut buf).unwrap();
        assert_eq!((n, stamp), (1, None));
    }
}
