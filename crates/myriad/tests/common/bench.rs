//! The `myriad bench` test harness: runs a scenario through the real binary and reads
//! its report's table. Shared by the `bench*.rs` and `tls_bench.rs` tests.

use std::path::Path;
use std::process::Command;

/// `bench unicast` at a tiny scale: 200 users, 300 msg/s for 1 s.
pub const TINY_UNICAST: &[&str] = &[
    "--connections",
    "200",
    "--unicast-rate",
    "300",
    "--duration",
    "1",
];

/// `bench connect` at a tiny scale: two storms of 300 from two flood processes.
pub const TINY_CONNECT: &[&str] = &[
    "--connections",
    "300",
    "--rounds",
    "2",
    "--flood-procs",
    "2",
];

/// `bench rooms` at a tiny scale: 200 connections in 5 of 40 rooms (25 members each),
/// one 1-s step at 20 msg/s.
pub const TINY_ROOMS: &[&str] = &[
    "--connections",
    "200",
    "--channels",
    "40",
    "--rates",
    "20",
    "--step-secs",
    "1",
];

/// A tiny `bench rooms` (TINY_ROOMS) held every connection and its one ladder step got
/// every delivery: sent × 25 members, counted from stamps only.
pub fn rooms_delivered(out: &Path, report: &str) {
    common_parts(report);
    assert_eq!(
        row(report, "connections open, each in its rooms")[0],
        "200 of 200"
    );
    let csv = std::fs::read_to_string(out.join("rooms/ladder-rooms.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2, "one step: {csv}");
    let head: Vec<&str> = lines[0].split(',').collect();
    let step: Vec<&str> = lines[1].split(',').collect();
    let col = |name: &str| -> u64 {
        let i = head.iter().position(|h| *h == name).unwrap();
        step[i].parse().unwrap()
    };
    assert!(col("sent") > 0, "{csv}");
    assert_eq!(col("expected"), col("sent") * 25, "{csv}");
    assert!(col("received") >= col("expected"), "{csv}");
    assert!(report.contains("## Ladder"), "{report}");
}

/// Runs `myriad bench ARGS --out DIR --settle 1`; returns the scenario's report text.
pub fn bench(dir: &Path, scenario: &str, args: &[&str]) -> String {
    let run = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .arg("bench")
        .arg(scenario)
        .args(args)
        .args(["--settle", "1", "--no-tune"])
        .arg("--out")
        .arg(dir)
        .output()
        .expect("run myriad bench");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "bench {scenario} failed:\n{stdout}\n{stderr}"
    );
    let path = dir.join(scenario).join("report.md");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no report at {}: {e}\n{stderr}", path.display()))
}

/// The cells (measured, target, met) of the table row whose figure starts with `figure`.
pub fn row<'a>(report: &'a str, figure: &str) -> Vec<&'a str> {
    let line = report
        .lines()
        .find(|l| l.starts_with(&format!("| {figure}")))
        .unwrap_or_else(|| panic!("no row `{figure}` in:\n{report}"));
    line.trim_matches('|')
        .split(" | ")
        .map(str::trim)
        .skip(1)
        .collect()
}

/// The first number of a cell, separators removed ("1,234 of 1,500" → 1234).
pub fn first_number(cell: &str) -> f64 {
    let s: String = cell
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
        .filter(|c| *c != ',')
        .collect();
    s.parse()
        .unwrap_or_else(|_| panic!("no number in `{cell}`"))
}

/// Every hostile case of `bench abuse` ran at least one round (its report's row
/// "hostile rounds run (each case)": "SlowReaders 12, PipelinedPolls 3, …").
pub fn every_hostile_case_ran(report: &str) {
    let rounds = row(report, "hostile rounds run (each case)")[0];
    for case in [
        "SlowReaders",
        "PipelinedPolls",
        "PingFlood",
        "OversizedBodies",
        "MalformedHeads",
        "BadTokens",
        "HalfHandshakes",
        "AbruptDisconnects",
    ] {
        let n = rounds
            .split(", ")
            .find_map(|c| c.strip_prefix(&format!("{case} ")))
            .unwrap_or_else(|| panic!("{case} missing: {rounds}"));
        assert!(first_number(n) >= 1.0, "{case} ran no round: {rounds}");
    }
}

pub fn common_parts(report: &str) {
    assert!(report.contains("Command: `"), "{report}");
    assert!(report.contains("| figure | measured | target | met? |"));
    assert!(report.contains("share its cores"), "the caveat is missing");
    assert!(report.contains("- cores: "), "machine facts are missing");
    assert!(report.contains("net.core.somaxconn"), "sysctls are missing");
}

/// True once no process runs with `conf` on its command line (polled for 5 s).
pub fn gone(conf: &Path) -> bool {
    (0..50).any(|_| {
        let found = Command::new("pgrep")
            .arg("-f")
            .arg(conf)
            .output()
            .expect("pgrep");
        if found.stdout.is_empty() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        false
    })
}
