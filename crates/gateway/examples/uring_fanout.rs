//! Issue 11's measured experiment: does batching a fan-out's sends into one
//! `io_uring_enter` make a broadcast cheaper than one `write` per socket?
//!
//! N loopback TCP pairs in this process; a reader thread drains the client ends
//! with edge-triggered epoll (as flood does), so every send pays what a real one
//! pays on loopback (the receiver's TCP input and wake-up run on the sender's
//! CPU). Each round writes one 60-byte message to all N server ends, either with
//! one `write` per socket ("syscall") or as N SQEs submitted `--batch` at a time
//! ("uring"). Rounds alternate between the two (A/B interleaved); each reports
//! the wall time of the fan-out, the sender thread's CPU time (user + sys) and the
//! process's until every byte was read (io-wq workers and the reader included).
//! The reader's count proves every byte arrived before the next round.
//!
//! `cargo run --release -p gateway --example uring_fanout -- [N] [ROUNDS] [BATCH]`
//! (defaults 9000 / 40 / 4096; N ≤ 9,500 under a 20,000-descriptor limit).
//! Prints medians; asserts nothing but delivery.

use io_uring::{opcode, types, IoUring};
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MSG: &[u8; 60] = b"data: ts=0000000000000 0123456789abcdef0123456789abcdef01\n\n\n";

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .map_or(default, |s| s.parse().expect("a number"))
}

/// CPU time (user + sys) of the calling thread.
fn thread_cpu() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process: the reader thread and io_uring's io-wq workers
/// (threads of this process) included, which the sender's clock does not see.
fn process_cpu() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer for clock_gettime.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Reads every client end until told to stop, counting bytes.
fn reader(clients: Vec<TcpStream>, got: Arc<AtomicU64>) {
    // SAFETY: plain epoll calls on descriptors this thread owns.
    unsafe {
        let ep = libc::epoll_create1(0);
        for (i, c) in clients.iter().enumerate() {
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLIN | libc::EPOLLET) as u32,
                u64: i as u64,
            };
            libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, c.as_raw_fd(), &mut ev);
        }
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        let mut buf = [0u8; 4096];
        let mut clients = clients;
        loop {
            let n = libc::epoll_wait(ep, events.as_mut_ptr(), 1024, 100);
            for ev in &events[..n.max(0) as usize] {
                let c = &mut clients[ev.u64 as usize];
                loop {
                    match c.read(&mut buf) {
                        Ok(0) => break,
                        Ok(k) => {
                            got.fetch_add(k as u64, Ordering::Relaxed);
                            if k < buf.len() {
                                break;
                            }
                        }
                        Err(_) => break,
                    }
                }
            }
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> std::io::Result<()> {
    let (n, rounds, batch) = (arg(1, 9000), arg(2, 40), arg(3, 4096));
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let (mut servers, mut clients) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let c = TcpStream::connect(addr)?;
        let (s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        s.set_nonblocking(true)?;
        c.set_nonblocking(true)?;
        servers.push(s);
        clients.push(c);
    }
    let got = Arc::new(AtomicU64::new(0));
    {
        let got = got.clone();
        std::thread::spawn(move || reader(clients, got));
    }
    let fds: Vec<i32> = servers.iter().map(|s| s.as_raw_fd()).collect();
    let mut ring: IoUring = IoUring::builder()
        .setup_single_issuer()
        .setup_coop_taskrun()
        .build(batch.next_power_of_two() as u32)?;
    let mut want = 0u64;
    let (mut wall, mut cpu) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    let mut all_cpu = [Vec::new(), Vec::new()];
    for round in 0..rounds * 2 {
        let uring = round % 2 == 1;
        let (t0, c0, p0) = (Instant::now(), thread_cpu(), process_cpu());
        if uring {
            for chunk in fds.chunks(batch) {
                {
                    let mut sq = ring.submission();
                    for (i, &fd) in chunk.iter().enumerate() {
                        let sqe = opcode::Send::new(types::Fd(fd), MSG.as_ptr(), MSG.len() as u32)
                            .build()
                            .user_data(i as u64);
                        // SAFETY: MSG is static; the queue has room for a chunk.
                        unsafe { sq.push(&sqe).expect("room for a chunk") };
                    }
                }
                ring.submit_and_wait(chunk.len())?;
                for cqe in ring.completion() {
                    assert_eq!(cqe.result(), MSG.len() as i32, "a short or failed send");
                }
            }
        } else {
            for &fd in &fds {
                // SAFETY: a valid descriptor and buffer.
                let r = unsafe { libc::write(fd, MSG.as_ptr().cast(), MSG.len()) };
                assert_eq!(r, MSG.len() as isize, "a short or failed write");
            }
        }
        let (w, c) = (t0.elapsed(), thread_cpu() - c0);
        want += (n * MSG.len()) as u64;
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.load(Ordering::Relaxed) < want {
            assert!(Instant::now() < deadline, "deliveries missing");
            std::thread::sleep(Duration::from_millis(1));
        }
        // Until every byte is read: the receiving side's share of the fan-out.
        let p = process_cpu() - p0;
        // The first round of each kind warms up.
        if round >= 2 {
            wall[usize::from(uring)].push(w.as_secs_f64() * 1e3);
            cpu[usize::from(uring)].push(c.as_secs_f64() * 1e6 / n as f64);
            all_cpu[usize::from(uring)].push(p.as_secs_f64() * 1e6 / n as f64);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for (k, name) in ["syscall", "uring"].iter().enumerate() {
        println!(
            "{name:8} {n} sends: fan-out median {:.2} ms, sender CPU median {:.2} µs per send, \
             process CPU (reader and io-wq included) median {:.2} µs per send ({} rounds)",
            median(&mut wall[k]),
            median(&mut cpu[k]),
            median(&mut all_cpu[k]),
            wall[k].len()
        );
    }
    Ok(())
}
