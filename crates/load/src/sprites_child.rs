//! The sprites clients over several processes (`bench sprites` past one process's
//! file limit): each child (`myriad sprites-clients`) runs [`crate::sprites`] for a
//! slice of the users, from source addresses of its own, and writes one JSON [`Line`]
//! a second on stdout; the parent ([`SpritesChildren`], on [`crate::children`]) steers
//! the steps through the children's stdin (`throw <seconds>`, `rest`, `stop`) and sums
//! their lines, merging their latency histograms exactly.
//!
//! Not here: the clients themselves (`sprites`), the server and the report (`bench`).

use crate::children::{child_setup, child_sources, Children};
use crate::flood::stats::{hist_add, hist_pairs, new_hist};
use crate::sprites::{Counters, SpritesArgs};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Flags of one child: its slice of the users and what the clients need.
#[derive(clap::Args, Debug, Clone)]
pub struct ChildArgs {
    /// The server's client address.
    #[arg(long)]
    pub addr: SocketAddr,
    /// Clients of the whole run (users 1..=N): whom sprites are thrown to.
    #[arg(long)]
    pub clients: u64,
    /// This child's first and last user.
    #[arg(long)]
    pub first: u64,
    #[arg(long)]
    pub last: u64,
    /// Source addresses to connect from, in turn (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub source: Vec<Ipv4Addr>,
    /// The server's `--jwt-secret` (MYRIAD_JWT_SECRET): each client signs its token.
    #[arg(long, env = "MYRIAD_JWT_SECRET", hide_env_values = true)]
    pub secret: String,
    /// Payload bytes.
    #[arg(long, default_value_t = 60)]
    pub size: usize,
    /// Connects per second while opening (both connections of a client count).
    #[arg(long, default_value_t = 2_000.0)]
    pub connect_rate: f64,
}

/// One child's counters at one second: totals so far, and the latencies recorded
/// since its previous line.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Line {
    pub polling: u64,
    pub senders: u64,
    pub sent: u64,
    pub published: u64,
    pub send_errors: u64,
    pub received: u64,
    pub poll_errors: u64,
    /// Throw → receipt, µs, as (value, count) pairs.
    pub hist: Vec<(u64, u64)>,
    pub rss: u64,
    /// CPU over the last second, percent of one core (user + system).
    pub cpu_pct: f64,
}

/// In a child: runs the clients until `stop`, SIGINT or the parent's end, steered by
/// stdin, writing a [`Line`] a second.
pub fn run_child(args: ChildArgs) -> anyhow::Result<()> {
    child_setup();
    anyhow::ensure!(
        args.first >= 1 && args.first <= args.last && args.last <= args.clients,
        "users {}..={} are not a slice of 1..={}",
        args.first,
        args.last,
        args.clients
    );
    let counters = Arc::new(Counters::default());
    let sprites = SpritesArgs {
        addr: args.addr,
        clients: args.clients,
        first: args.first,
        last: args.last,
        sources: args.source,
        secret: args.secret,
        size: args.size,
        connect_rate: args.connect_rate,
    };
    let clients = {
        let c = counters.clone();
        std::thread::spawn(move || crate::sprites::run(&sprites, c))
    };
    {
        let c = counters.clone();
        std::thread::spawn(move || steer(&c));
    }
    let mut out = std::io::stdout().lock();
    let mut cpu = host::sys::CpuMeter::new();
    while !counters.stop.load(Ordering::Relaxed) && !clients.is_finished() {
        std::thread::sleep(Duration::from_secs(1));
        if host::sys::interrupted() {
            counters.end();
        }
        let (u, s) = cpu.sample();
        let line = line(&counters, u + s);
        if writeln!(out, "{}", serde_json::to_string(&line)?).is_err() {
            counters.end(); // the parent is gone
        }
        let _ = out.flush();
    }
    counters.end();
    match clients.join() {
        Ok(r) => r,
        Err(_) => anyhow::bail!("the sprites clients' thread panicked"),
    }
}

/// Reads the parent's commands until `stop` or EOF.
fn steer(c: &Counters) {
    for cmd in std::io::stdin().lock().lines() {
        let Ok(cmd) = cmd else { break };
        let mut words = cmd.split_whitespace();
        match (words.next(), words.next().map(str::parse::<f64>)) {
            (Some("throw"), Some(Ok(every))) if every > 0.0 => c.throw(every),
            (Some("rest"), None) => c.rest(),
            (Some("stop"), None) => break,
            _ => tracing::warn!("sprites child: unknown command {cmd:?}"),
        }
    }
    c.end();
}

fn line(c: &Counters, cpu_pct: f64) -> Line {
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    Line {
        polling: n(&c.polling),
        senders: n(&c.senders),
        sent: n(&c.sent),
        published: n(&c.published),
        send_errors: n(&c.send_errors),
        received: n(&c.received),
        poll_errors: n(&c.poll_errors),
        hist: hist_pairs(&c.take_latency()),
        rss: host::sys::rss_bytes(),
        cpu_pct,
    }
}

/// The parent's side: the children, their latest lines, and the latencies not yet
/// taken.
pub struct SpritesChildren {
    children: Children<Line>,
    latest: Vec<Line>,
    hist: Histogram<u64>,
}

/// How the clients are spread: `procs` children over `sources`, each child with a
/// whole block of the sources when they divide evenly (else all of them).
pub struct Plan {
    pub exe: std::path::PathBuf,
    pub args: ChildArgs,
    pub procs: u64,
}

impl SpritesChildren {
    /// Starts `plan.procs` children (`<exe> sprites-clients …`), users split evenly.
    pub fn start(plan: &Plan) -> anyhow::Result<SpritesChildren> {
        let (n, procs) = (plan.args.clients, plan.procs.clamp(1, plan.args.clients));
        let mut cmds = Vec::new();
        for i in 0..procs {
            let first = 1 + i * (n / procs) + i.min(n % procs);
            let share = n / procs + u64::from(i < n % procs);
            let sources = child_sources(&plan.args.source, i, procs);
            let mut cmd = Command::new(&plan.exe);
            cmd.arg("sprites-clients")
                .args(["--addr", &plan.args.addr.to_string()])
                .args(["--clients", &n.to_string()])
                .args(["--first", &first.to_string()])
                .args(["--last", &(first + share - 1).to_string()])
                .args(["--size", &plan.args.size.to_string()])
                .args([
                    "--connect-rate",
                    &(plan.args.connect_rate / procs as f64).to_string(),
                ])
                .env("MYRIAD_JWT_SECRET", &plan.args.secret)
                .stdin(Stdio::piped());
            if !sources.is_empty() {
                let list: Vec<String> = sources.iter().map(Ipv4Addr::to_string).collect();
                cmd.args(["--source", &list.join(",")]);
            }
            cmds.push(cmd);
        }
        Ok(SpritesChildren {
            children: Children::spawn(cmds, "sprites")?,
            latest: vec![Line::default(); procs as usize],
            hist: new_hist(),
        })
    }

    pub fn len(&self) -> usize {
        self.children.len()
    }

    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// Reads the lines that arrived within `wait`; false once every child has ended.
    pub fn gather(&mut self, wait: Duration) -> bool {
        let until = std::time::Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match self.children.recv_timeout(left) {
                Ok((i, l)) => {
                    hist_add(&mut self.hist, &l.hist);
                    self.latest[i] = l;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => return true,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return false,
            }
        }
    }

    /// Every child's latest line summed (their histograms are in [`Self::take_hist`]).
    pub fn total(&self) -> Line {
        let mut t = Line::default();
        for l in &self.latest {
            t.polling += l.polling;
            t.senders += l.senders;
            t.sent += l.sent;
            t.published += l.published;
            t.send_errors += l.send_errors;
            t.received += l.received;
            t.poll_errors += l.poll_errors;
            t.rss += l.rss;
            t.cpu_pct += l.cpu_pct;
        }
        t
    }

    /// The merged latencies gathered since the previous take.
    pub fn take_hist(&mut self) -> Histogram<u64> {
        std::mem::replace(&mut self.hist, new_hist())
    }

    /// Every client throws one sprite every `every` seconds from now on.
    pub fn throw(&mut self, every: f64) {
        self.children.tell(&format!("throw {every}"));
    }

    /// Every sender rests on its open connection.
    pub fn rest(&mut self) {
        self.children.tell("rest");
    }

    /// Ends every child and reaps it.
    pub fn finish(mut self) {
        self.children.tell("stop");
        self.children.reap();
    }
}
