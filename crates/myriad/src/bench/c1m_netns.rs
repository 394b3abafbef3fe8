//! `bench c1m` in a network namespace of its own, with a hash of established TCP
//! sockets sized for its run.
//!
//! The kernel finds the socket of every received segment in one hash table, sized at
//! boot from RAM and never resized (262,144 buckets on this 24 GB box). At 1 M
//! loopback connections it holds 2 M sockets, chains of ~8, and the lookup was
//! 16.5 % of the gateways' CPU (docs/decisions/supervisor-and-listening-group.md). The main table cannot grow
//! without a reboot (`thash_entries=`), but a namespace created after
//! `net.ipv4.tcp_child_ehash_entries` is set gets a table of that size. So, as root,
//! c1m makes such a namespace (loopback only, as the whole run is), runs itself in it
//! and removes it afterwards; it says so, and `--netns never` (or `--no-tune`) keeps
//! it in the current namespace.

use super::{BenchArgs, NetnsChoice};
use host::doctor::{ehash_enough, ehash_for, CHILD_EHASH_SYSCTL, EHASH_SYSCTL};
use observe::procfs::{read_sysctl_number, write_sysctl};
use std::process::Command;

/// Set in the run inside the namespace, so it does not make another.
const INSIDE: &str = "MYRIAD_C1M_NETNS";

/// Runs c1m inside a fresh namespace when this one's table is too small for
/// `sockets` (or `--netns always`). `Ok(true)`: it ran there (its report is written);
/// `Ok(false)`: run here.
pub fn run_inside_if_needed(args: &BenchArgs, sockets: u64) -> anyhow::Result<bool> {
    if std::env::var_os(INSIDE).is_some() || args.netns == NetnsChoice::Never {
        return Ok(false);
    }
    let buckets = read_sysctl_number(EHASH_SYSCTL).unwrap_or(0);
    let always = args.netns == NetnsChoice::Always;
    if !always && (args.no_tune || buckets == 0 || ehash_enough(buckets, sockets)) {
        return Ok(false);
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let have_ip = Command::new("ip").arg("-V").output().is_ok();
    if !(root && have_ip) {
        let why = if root { "no `ip` command" } else { "not root" };
        anyhow::ensure!(!always, "bench c1m --netns always: {why}");
        eprintln!(
            "bench c1m: the established-socket hash has {buckets} buckets for {sockets} sockets; a larger one needs a network namespace ({why}): running here"
        );
        return Ok(false);
    }
    let want = ehash_for(sockets);
    let ns = Namespace::create(&format!("myriad-c1m-{}", std::process::id()), want)?;
    eprintln!(
        "bench c1m: the established-socket hash has {buckets} buckets for {sockets} sockets (~{:.0} per bucket); running in network namespace {} with {want} (loopback only; removed afterwards; --netns never to run here)",
        sockets as f64 / buckets.max(1) as f64,
        ns.name
    );
    let status = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(std::env::current_exe()?)
        .args(std::env::args_os().skip(1))
        .env(INSIDE, &ns.name)
        .status()?;
    anyhow::ensure!(
        status.success(),
        "bench c1m in network namespace {} failed ({status})",
        ns.name
    );
    Ok(true)
}

/// What the report says when the run is inside a namespace this module made.
pub fn note() -> Option<String> {
    let name = std::env::var(INSIDE).ok()?;
    let buckets = read_sysctl_number(EHASH_SYSCTL).unwrap_or(0);
    Some(format!(
        "Ran in network namespace {name} (made for this run, removed afterwards): its established-socket hash has {buckets} buckets (the main namespace's is fixed at boot)."
    ))
}

/// A network namespace with its own established-socket hash and loopback up;
/// deleted when dropped.
struct Namespace {
    name: String,
}

impl Namespace {
    fn create(name: &str, buckets: u64) -> anyhow::Result<Namespace> {
        // The setting is read when a namespace is made: set it, make ours, put it back.
        let before = read_sysctl_number(CHILD_EHASH_SYSCTL).unwrap_or(0);
        set_sysctl(CHILD_EHASH_SYSCTL, buckets)?;
        let made = ip(&["netns", "add", name]);
        set_sysctl(CHILD_EHASH_SYSCTL, before)?;
        made?;
        let ns = Namespace { name: name.into() };
        ip(&["netns", "exec", name, "ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            eprintln!(
                "bench c1m: could not remove network namespace {}: {e:#}",
                self.name
            );
        }
    }
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    anyhow::ensure!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

fn set_sysctl(key: &str, value: u64) -> anyhow::Result<()> {
    write_sysctl(key, &value.to_string())
        .map_err(|e| anyhow::anyhow!("cannot set {key}={value}: {e}"))
}
