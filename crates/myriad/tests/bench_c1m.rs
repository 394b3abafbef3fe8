//! `myriad bench c1m` end to end at a tiny scale, through the real binary: the
//! supervised server, NATS, the graph and the floods of a thousand or so connections.
//! No timing assertion: only counts, presence and consistency.

mod common;

use common::bench::{common_parts, first_number, row};
use std::process::Command;

/// `bench c1m` at a tiny scale: one supervised server (router, gateways, its own
/// nats-server) holds every connection of three transports, every graph and unicast
/// delivery the server reported arrives, and no process it started is left. It runs
/// in a network namespace of its own (`--netns always`; at 1 M that is how it gets
/// an established-socket hash sized for 2 M sockets), which is gone afterwards. The
/// phases publish at the rates asked (`--graph-rate`, `--unicast-rate`: at most
/// rate × duration; the defaults would publish 2,000 and 20,000 here), then the
/// unicast ladder's two steps.
#[test]
fn c1m_at_a_tiny_scale_counts_exactly_and_leaves_no_process() {
    let (out, r, stderr) = c1m(&[
        "--connections",
        "3000",
        "--graph-rate",
        "100",
        "--unicast-rate",
        "1000",
        "--unicast-ladder",
        "50,100",
        "--netns",
        "always",
    ]);
    common_parts(&r);
    let ns = r
        .split("Ran in network namespace ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("the report names its namespace:\n{r}"));
    assert!(r.contains("buckets"), "{r}");
    assert!(
        r.contains(" groups (`--tick-groups`)"),
        "the gateways' tick groups: {r}"
    );
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&list.stdout).contains(ns),
        "namespace {ns} left behind"
    );
    let held = row(&r, "concurrent connections held by one myriad");
    assert!(
        held[0].starts_with("3,000 of 3,000 (server counts 3,000;"),
        "{held:?}"
    );
    every_delivery_arrived(&r, [200.0, 2_000.0]);
    assert_eq!(row(&r, "processes left after the stop")[2], "yes", "{r}");
    // The bench names every process it saw; none may run now.
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("bench c1m: processes started: "))
        .expect("the list of processes");
    let pids: Vec<u32> = line
        .split_whitespace()
        .next()
        .unwrap()
        .split(',')
        .map(|p| p.parse().unwrap())
        .collect();
    // Supervisor, router, two gateways (auto: one for 3,000 plus a spare), nats-server.
    assert!(pids.len() >= 5, "{line}");
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(
            stat.is_empty() || stat.contains(") Z"),
            "pid {pid} still runs: {stat}"
        );
    }
    for png in ["connections.png", "latency.png", "memory.png", "ladder.png"] {
        assert!(out.path().join("c1m").join(png).is_file(), "{png} missing");
    }
    unicast_ladder_ran_both_steps(&r, &out.path().join("c1m/unicast-ladder.csv"));
}

/// `bench c1m --peer floor` at a tiny scale: after myriad, the C floor holds the same
/// 3,000 connections of three transports over as many processes as myriad had
/// gateways (so sockets and publishes are handed between its processes), beats as
/// the gateways do (here every second), receives every unicast publish of both
/// ladder steps, and the report puts both side by side; none of the floor's
/// processes is left. Counts only: the ratios are figures, not assertions.
#[test]
fn c1m_beside_the_floor_holds_the_same_connections_and_counts_exactly() {
    let (_out, r, _) = c1m(&[
        "--peer",
        "floor",
        "--connections",
        "3000",
        "--server-flag=--heartbeat=1",
        "--graph-rate",
        "100",
        "--unicast-rate",
        "100",
        "--unicast-ladder",
        "50,100",
    ]);
    let held = row(&r, "floor: connections held");
    assert!(
        held[0].starts_with("3,000 of 3,000 (the floor counts 3,000) in "),
        "{held:?}"
    );
    let processes = first_number(held[0].split_once(") in ").unwrap().1);
    assert!(processes >= 2.0, "{held:?}");
    let beat = row(&r, "box cost per beat while holding");
    let counted = beat[0]
        .split_once("the floor counted ")
        .map(|(_, rest)| first_number(rest))
        .unwrap_or_else(|| panic!("{beat:?}"));
    assert!(counted > 0.0, "the floor beat: {beat:?}");
    assert_eq!(
        row(&r, "floor processes left after its stop")[2],
        "yes",
        "{r}"
    );
    let steps = step_rows(&r, "Beside the floor");
    assert_eq!(steps.len(), 2, "{r}");
    for (cells, rate) in steps.iter().zip([50.0, 100.0]) {
        assert_eq!(first_number(cells[0]), rate, "{cells:?}");
        let (got, sent) = cells[1].split_once(" / ").expect("received / published");
        assert_eq!(first_number(got), first_number(sent), "{cells:?}");
        assert!(first_number(got) > 0.0, "{cells:?}");
    }
}

/// `--unicast-ladder 50,100` with 2-s steps: its figure (flagged: steps under 10 s),
/// and both steps, whether the first met the target or not (a miss runs one step
/// more), each publishing at most its rate × 2 s with every delivery received, in the
/// report's section and in the CSV the ladder chart draws.
fn unicast_ladder_ran_both_steps(r: &str, csv: &std::path::Path) {
    let fig = row(r, "unicast ladder: highest rate with p99 ≤ 5 ms");
    assert!(
        fig[0].ends_with("(steps under 10 s: not a figure)"),
        "{fig:?}"
    );
    let steps = step_rows(r, "Unicast ladder");
    assert_eq!(steps.len(), 2, "{r}");
    for (cells, rate) in steps.iter().zip([50.0, 100.0]) {
        assert_eq!(first_number(cells[0]), rate, "{cells:?}");
        let (got, want) = cells[2].split_once(" / ").expect("received / reported");
        assert_eq!(first_number(got), first_number(want), "{cells:?}");
        assert!(
            first_number(got) > 0.0 && first_number(got) <= rate * 2.0,
            "{cells:?}"
        );
        assert!(["yes", "no"].contains(&cells[9]), "{cells:?}");
    }
    let csv = std::fs::read_to_string(csv).expect("unicast-ladder.csv");
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("time_s,rate_msg_s,"), "{csv}");
    assert!(lines[0].contains(",limit_us,"), "{csv}");
    assert_eq!(lines.len(), 3, "{csv}");
}

/// The rows of the report's section `heading` that start with a number (a ladder
/// step's rate), split into their cells.
fn step_rows<'a>(r: &'a str, heading: &str) -> Vec<Vec<&'a str>> {
    let section = r
        .split(&format!("## {heading}"))
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or_else(|| panic!("no section {heading} in:\n{r}"));
    section
        .lines()
        .filter(|l| l.starts_with("| ") && l[2..].starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect()
}

/// Runs `bench c1m` with `flags` (held 1 s, 2-s phases, no tuning) into a new
/// directory: (the directory, its report.md, the run's stderr). A failed run fails
/// the test with its stderr.
fn c1m(flags: &[&str]) -> (tempfile::TempDir, String, String) {
    let out = tempfile::tempdir().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args([
            "bench",
            "c1m",
            "--hold",
            "1",
            "--duration",
            "2",
            "--no-tune",
        ])
        .args(flags)
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("run myriad bench c1m");
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "bench c1m failed:\n{stderr}");
    let r = std::fs::read_to_string(out.path().join("c1m/report.md")).expect("report.md");
    (out, r, stderr)
}

/// c1m's phases: every delivery the server reported arrived, each phase published
/// something and at most `most` (graph, unicast), a unicast publish (to an inbox
/// subject only its user follows) made exactly one delivery, and the report gives
/// holding's CPU and each phase's CPU per publish above it.
fn every_delivery_arrived(r: &str, most: [f64; 2]) {
    for (what, most) in ["graph publishes", "unicast publishes"]
        .into_iter()
        .zip(most)
    {
        let d = row(r, &format!("{what}: deliveries received / reported"));
        let (got, want) = d[0].split_once(" / ").expect("received / reported");
        assert_eq!(first_number(got), first_number(want), "{what}: {d:?}");
        assert!(first_number(got) > 0.0, "{what}: {d:?}");
        assert_eq!(d[2], "yes", "{what}: {d:?}");
        let published = first_number(d[0].split_once('(').expect("(N published").1);
        assert!(
            published > 0.0 && published <= most,
            "{what}: {published} published, at most {most} asked: {d:?}"
        );
    }
    let u = row(r, "unicast publishes: deliveries received / reported");
    let published = u[0].split_once('(').expect("(N published").1;
    assert_eq!(
        first_number(u[0].split_once(" / ").unwrap().1),
        first_number(published),
        "{u:?}"
    );
    // What holding costs, and each phase's CPU per publish above it.
    assert!(row(r, "server CPU while holding (all processes)")[0].ends_with("% of a core"));
    for what in ["graph publishes", "unicast publishes"] {
        let c = row(r, &format!("{what}: server CPU per publish above holding"));
        assert!(c[0].ends_with(" µs"), "{what}: {c:?}");
    }
    // Per stretch (holding, each phase), from schedstat: the threads' wait for a
    // CPU, and each group's CPU with the server's above zero.
    for (wait, cpu) in [
        ("wait for a CPU while holding", "CPU while holding: server"),
        (
            "graph publishes: wait for a CPU",
            "graph publishes: CPU of server",
        ),
        (
            "unicast publishes: wait for a CPU",
            "unicast publishes: CPU of server",
        ),
    ] {
        let w = row(r, wait);
        assert!(w[0].contains(" ms per run ("), "{wait}: {w:?}");
        let c = row(r, cpu);
        assert!(c[0].ends_with("% of a core"), "{cpu}: {c:?}");
        assert!(first_number(c[0]) > 0.0, "{cpu}: {c:?}");
    }
}

/// `bench c1m --publish-via nats`: the publishers are NATS requests to
/// `myriad.pub.<subject>` (a back-end's way, SPEC C4), straight to the router, and
/// every delivery arrives as with HTTP — the unicast phase's inbox subjects too
/// (the subject is msggen's path's last segment). Its floods run below the server
/// (`--client-nice`) and time deliveries at their sockets (`--client-latency socket`).
#[test]
fn c1m_publishes_through_nats_as_a_back_end_would() {
    let (_out, r, _) = c1m(&[
        "--connections",
        "1000",
        "--graph-rate",
        "50",
        "--unicast-rate",
        "500",
        "--publish-via",
        "nats",
        "--netns",
        "never",
        "--client-latency",
        "socket",
        "--client-nice",
        "5",
    ]);
    assert!(
        r.contains("NATS (requests to myriad.pub.<subject>"),
        "the report says how it published:\n{r}"
    );
    every_delivery_arrived(&r, [100.0, 1_000.0]);
    assert!(
        r.contains("publish → arrival at the client's socket")
            && r.contains("The floods ran at niceness 5"),
        "the report says how latency was taken:\n{r}"
    );
}
