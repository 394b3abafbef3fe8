//! flood over several processes: when one process may not hold N sockets (the soft
//! NOFILE limit), the parent re-executes this binary as children (`crate::children`),
//! each with its share of the global connection numbers and rate, reads their
//! per-second JSON lines, and sums them into one sample per second. Children are told
//! everything on their command line and stop on SIGINT, at --max-time, or when the
//! parent dies.

use super::stats::{hist_add, hist_pairs, new_hist, ChildLine, ProcSummary, Sample};
use super::FloodArgs;
use crate::children::{child_sources, Children};
use anyhow::Context;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the parent waits for children's final lines after asking them to stop.
const FINAL_WAIT: Duration = Duration::from_secs(30);

/// A child's in-flight share never drops below this (so many children still ramp).
const MIN_INFLIGHT: u64 = 64;

pub use crate::children::child_setup;

/// The flags for child `i` of `procs`.
fn child_argv(args: &FloodArgs, sources: &[std::net::Ipv4Addr], i: u64, procs: u64) -> Vec<String> {
    let n = args.connections;
    let share = n / procs + u64::from(i < n % procs);
    let offset = args.conn_offset + i * (n / procs) + i.min(n % procs);
    let mut v: Vec<String> = Vec::new();
    let mut flag = |k: &str, val: String| {
        v.push(k.to_string());
        v.push(val);
    };
    for u in &args.urls {
        flag("--url", u.clone());
    }
    flag("--connections", share.to_string());
    flag("--rate", (args.rate / procs as f64).to_string());
    flag(
        "--transport",
        format!("{:?}", args.transport).to_lowercase(),
    );
    if let Some(u) = &args.users {
        flag("--users", u.clone());
    }
    flag("--first-user", args.first_user.to_string());
    let sources = child_sources(sources, i, procs);
    if !sources.is_empty() {
        flag(
            "--source",
            sources
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    if let Some(h) = args.hold {
        flag("--hold", h.to_string());
    }
    flag("--close", format!("{:?}", args.close).to_lowercase());
    flag("--close-secs", args.close_secs.to_string());
    flag("--max-time", args.max_time.to_string());
    flag("--connect-timeout", args.connect_timeout.to_string());
    // The in-flight bound is for the whole run: each child gets its share.
    flag(
        "--max-inflight",
        (args.max_inflight as u64 / procs)
            .max(MIN_INFLIGHT)
            .to_string(),
    );
    for h in &args.headers {
        flag("--header", h.clone());
    }
    if let Some(ca) = &args.ca {
        flag("--ca", ca.display().to_string());
    }
    if args.h2 {
        flag(
            "--streams-per-connection",
            args.streams_per_connection.to_string(),
        );
    }
    flag("--conn-offset", offset.to_string());
    flag(
        "--latency-at",
        format!("{:?}", args.latency_at).to_lowercase(),
    );
    if let Some(n) = args.nice {
        flag("--nice", n.to_string());
    }
    if let Some(rooms) = args.rooms {
        flag("--rooms", rooms.to_string());
        flag(
            "--rooms-per-connection",
            args.rooms_per_connection.to_string(),
        );
        flag("--room-sep", args.room_sep.clone());
    }
    if args.transport == super::Transport::Pusher {
        flag("--pusher-channel", args.pusher_channel.clone());
    }
    if args.insecure {
        v.push("--insecure".into());
    }
    if args.h2 {
        v.push("--h2".into());
    }
    if args.reconnect {
        v.push("--reconnect".into());
    }
    v.push("--child".into());
    v.push("--quiet".into());
    v
}

fn command(args: &FloodArgs, argv: &[String]) -> anyhow::Result<Command> {
    let mut cmd = match &args.child_exe {
        Some(exe) => Command::new(exe),
        None => {
            let mut c =
                Command::new(std::env::current_exe().context("cannot find this executable")?);
            c.arg("flood");
            c
        }
    };
    cmd.args(argv).stdin(Stdio::null());
    Ok(cmd)
}

/// Run `procs` children; `on_sample` gets the summed sample once per second.
pub fn run_children(
    args: &FloodArgs,
    procs: u64,
    stop: &AtomicBool,
    on_sample: &mut dyn FnMut(Sample),
) -> anyhow::Result<Vec<ProcSummary>> {
    let plan = super::make_plan(args)?;
    let cmds = (0..procs)
        .map(|i| command(args, &child_argv(args, &plan.sources, i, procs)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut children = Children::<ChildLine>::spawn(cmds, "flood")?;
    let start = Instant::now();
    let mut latest: Vec<Sample> = vec![Sample::default(); procs as usize];
    let mut finals: Vec<Option<ProcSummary>> = vec![None; procs as usize];
    let mut tick_hist = new_hist();
    let mut next_tick = start + Duration::from_secs(1);
    let mut cpu = host::sys::CpuMeter::new();
    let mut stop_sent: Option<Instant> = None;
    loop {
        if stop_sent.is_none() && (stop.load(Ordering::Relaxed) || host::sys::interrupted()) {
            children.interrupt();
            stop_sent = Some(Instant::now());
        }
        if stop_sent.is_some_and(|t| t.elapsed() > FINAL_WAIT) {
            break;
        }
        match children.recv_timeout(
            next_tick
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100)),
        ) {
            Ok((i, ChildLine::Sample(s))) => {
                hist_add(&mut tick_hist, &s.hist);
                latest[i] = s;
            }
            Ok((i, ChildLine::Final(f))) => finals[i] = Some(f),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if Instant::now() >= next_tick {
            next_tick += Duration::from_secs(1);
            on_sample(sum_samples(start, &latest, &mut tick_hist, &mut cpu));
        }
    }
    on_sample(sum_samples(start, &latest, &mut tick_hist, &mut cpu));
    children.reap();
    let missing = finals.iter().filter(|f| f.is_none()).count();
    if missing > 0 {
        tracing::warn!(
            "{missing} flood child process(es) ended without a summary; their last counts are used"
        );
    }
    Ok(finals
        .into_iter()
        .zip(latest)
        .map(|(f, s)| {
            f.unwrap_or(ProcSummary {
                attempted: s.attempted,
                peak_open: s.open,
                failed: s.failed,
                fail: s.fail,
                closed: s.closed,
                messages: s.messages,
                bytes: s.bytes,
                ..Default::default()
            })
        })
        .collect())
}

fn sum_samples(
    start: Instant,
    latest: &[Sample],
    hist: &mut hdrhistogram::Histogram<u64>,
    cpu: &mut host::sys::CpuMeter,
) -> Sample {
    let (u, s) = cpu.sample();
    let mut out = Sample {
        t: start.elapsed().as_secs_f64(),
        rss: host::sys::rss_bytes(),
        cpu_user: u,
        cpu_sys: s,
        ..Default::default()
    };
    for l in latest {
        out.attempted += l.attempted;
        out.open += l.open;
        out.failed += l.failed;
        out.closed += l.closed;
        out.messages += l.messages;
        out.bytes += l.bytes;
        out.rss += l.rss;
        out.cpu_user += l.cpu_user;
        out.cpu_sys += l.cpu_sys;
        out.fail.add(&l.fail);
    }
    out.hist = hist_pairs(hist);
    hist.reset();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_connection_once() {
        let args = FloodArgs {
            connections: 10,
            conn_offset: 100,
            ..Default::default()
        };
        let mut seen = Vec::new();
        for i in 0..3 {
            let v = child_argv(&args, &[], i, 3);
            let get = |k: &str| {
                v[v.iter().position(|a| a == k).unwrap() + 1]
                    .parse::<u64>()
                    .unwrap()
            };
            seen.extend(get("--conn-offset")..get("--conn-offset") + get("--connections"));
        }
        assert_eq!(seen, (100..110).collect::<Vec<_>>());
    }

    #[test]
    fn sources_that_divide_evenly_are_split_and_others_shared() {
        let args = FloodArgs {
            connections: 12,
            ..Default::default()
        };
        let ips: Vec<std::net::Ipv4Addr> = (2..8).map(|d| [127, 0, 0, d].into()).collect();
        let source =
            |v: Vec<String>| v[v.iter().position(|a| a == "--source").unwrap() + 1].clone();
        let split: Vec<String> = (0..3)
            .map(|i| source(child_argv(&args, &ips, i, 3)))
            .collect();
        assert_eq!(
            split,
            [
                "127.0.0.2,127.0.0.3",
                "127.0.0.4,127.0.0.5",
                "127.0.0.6,127.0.0.7"
            ]
        );
        let all = "127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7";
        for i in 0..4 {
            assert_eq!(
                source(child_argv(&args, &ips, i, 4)),
                all,
                "6 over 4: shared"
            );
        }
        assert_eq!(
            source(child_argv(&args, &ips[..2], 0, 3)),
            "127.0.0.2,127.0.0.3"
        );
    }
}
