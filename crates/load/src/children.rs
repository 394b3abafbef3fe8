//! Load child processes that report in JSON lines: when one process may not hold the
//! sockets a run needs (the soft NOFILE limit), a parent starts several children, each
//! told its share on its command line, and reads one JSON record per line from each
//! child's stdout. flood's children (`flood::children`) and the sprites clients'
//! (`sprites_child`) both run on this; what a line holds is theirs.
//!
//! Not an RPC layer: a child stops on SIGINT/SIGTERM, at its own time bound, or when
//! its parent dies; a parent that wants to steer a child while it runs writes lines to
//! the child's stdin (sprites does; flood does not).

use anyhow::Context;
use serde::de::DeserializeOwned;
use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long [`Children::reap`] waits for a child that was told to stop before
/// killing it.
const REAP_WAIT: Duration = Duration::from_secs(5);

/// In a child: die with the parent (no orphaned load), and stop on SIGINT/SIGTERM.
pub fn child_setup() {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag on this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    host::sys::catch_interrupt();
}

/// The source addresses child `i` of `procs` connects from: a block of its own when
/// they divide evenly among the children (each then holds the same share per
/// address, and a server that beats by peer address (`--heartbeat-grid`) wakes each
/// child process for its own addresses only), else all of them.
pub fn child_sources(sources: &[std::net::Ipv4Addr], i: u64, procs: u64) -> &[std::net::Ipv4Addr] {
    let n = sources.len() as u64;
    if procs > 1 && n >= procs && n.is_multiple_of(procs) {
        let per = (n / procs) as usize;
        &sources[i as usize * per..(i as usize + 1) * per]
    } else {
        sources
    }
}

/// Running children and the lines they wrote, in order per child.
pub struct Children<L> {
    procs: Vec<Child>,
    /// Each child's stdin when the command asked for a pipe there.
    stdins: Vec<Option<ChildStdin>>,
    rx: mpsc::Receiver<(usize, L)>,
}

impl<L: DeserializeOwned + Send + 'static> Children<L> {
    /// Starts every command with its stdout piped (stderr inherited; stdin as the
    /// command says). `what` names the children in errors and warnings. If one fails
    /// to start, those already started are stopped.
    pub fn spawn(cmds: Vec<Command>, what: &'static str) -> anyhow::Result<Children<L>> {
        let (tx, rx) = mpsc::channel();
        let mut children = Children {
            procs: Vec::new(),
            stdins: Vec::new(),
            rx,
        };
        for (idx, mut cmd) in cmds.into_iter().enumerate() {
            cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
            let mut child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) => {
                    children.interrupt();
                    children.reap();
                    return Err(e).with_context(|| format!("cannot start a {what} child process"));
                }
            };
            // Stdout is piped just above, so it is present.
            let out = child.stdout.take().expect("piped stdout");
            children.stdins.push(child.stdin.take());
            children.procs.push(child);
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    match serde_json::from_str::<L>(&line) {
                        Ok(l) => {
                            if tx.send((idx, l)).is_err() {
                                break;
                            }
                        }
                        Err(e) => {
                            tracing::warn!("{what} child {idx}: unreadable line ({e}): {line}")
                        }
                    }
                }
            });
        }
        Ok(children)
    }
}

impl<L> Children<L> {
    pub fn len(&self) -> usize {
        self.procs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.procs.is_empty()
    }

    /// The children's process ids, in start order.
    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().map(Child::id).collect()
    }

    /// The next line of any child, waiting at most `wait`. `Disconnected` once every
    /// child closed its stdout.
    pub fn recv_timeout(&self, wait: Duration) -> Result<(usize, L), mpsc::RecvTimeoutError> {
        self.rx.recv_timeout(wait)
    }

    /// Writes `line` (a newline is added) to every child's stdin; a child that has
    /// gone is skipped (its end shows in its lines).
    pub fn tell(&mut self, line: &str) {
        for stdin in self.stdins.iter_mut().flatten() {
            let _ = writeln!(stdin, "{line}").and_then(|()| stdin.flush());
        }
    }

    /// Asks every child to stop (SIGINT), as a terminal's Ctrl-C would.
    pub fn interrupt(&self) {
        for c in &self.procs {
            // SAFETY: signalling our own child by pid; it is reaped only in `reap`.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGINT) };
        }
    }

    /// Reaps children that were told to stop or have ended; kills stragglers by pid.
    pub fn reap(&mut self) {
        self.stdins.clear(); // EOF on their stdin: a child that reads it ends too
        let deadline = Instant::now() + REAP_WAIT;
        for c in self.procs.iter_mut() {
            loop {
                match c.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(20))
                    }
                    Ok(None) => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                }
            }
        }
        self.procs.clear();
    }
}

impl<L> Drop for Children<L> {
    /// A parent that fails half-way still leaves no child behind.
    fn drop(&mut self) {
        if !self.procs.is_empty() {
            self.interrupt();
            self.reap();
        }
    }
}
