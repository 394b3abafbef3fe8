//! `myriad demo` end to end on a small scale: it builds the graph, holds every
//! connection, delivers messages, writes its report and CSVs, and cleans up.

use std::process::Command;

#[test]
fn a_small_demo_runs_and_reports() {
    let out = tempfile::tempdir().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args([
            "demo",
            "--users",
            "500",
            "--m",
            "3",
            "--connections",
            "600",
            "--seconds",
            "3",
            "--rate",
            "200",
        ])
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("run myriad demo");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "demo failed:\n{stdout}\n{stderr}");
    let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(
        report.contains("| connections held (stream) | 600 of 600 (0 failed)"),
        "{report}"
    );
    let deliveries: u64 = report
        .lines()
        .find(|l| l.starts_with("| deliveries |"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .expect("a deliveries line");
    // 600 messages to users with ≥ 3 friends each reach at least one connection apiece.
    assert!(deliveries >= 600, "{report}");
    assert!(out.path().join("server.csv").metadata().unwrap().len() > 0);
    assert!(out.path().join("flood.csv").metadata().unwrap().len() > 0);
    // The live view printed one line per second.
    assert!(stderr.matches("demo: ").count() > 5, "{stderr}");
}
