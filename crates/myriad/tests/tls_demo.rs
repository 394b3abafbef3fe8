//! `myriad demo --tls self-signed` (issue 13): the server speaks TLS with a generated
//! certificate, the demo says so, and flood and msggen (trusting that certificate)
//! hold every connection and deliver over it.

#[test]
fn the_demo_runs_over_tls_with_a_self_signed_certificate() {
    let out = tempfile::tempdir().unwrap();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(["demo", "--users", "300", "--m", "3", "--connections", "300"])
        .args(["--rate", "100", "--seconds", "3", "--tls", "self-signed"])
        .arg("--out")
        .arg(out.path())
        .env_remove("MYRIAD_LOG")
        .output()
        .expect("run myriad demo");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "demo failed:\n{stdout}\n{stderr}");
    assert!(stderr.contains("SELF-SIGNED certificate"), "{stderr}");
    let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(
        report.contains(
            "| connections held (stream over TLS (self-signed certificate)) | 300 of 300 (0 failed)"
        ),
        "{report}"
    );
    let deliveries: u64 = report
        .lines()
        .find(|l| l.starts_with("| deliveries |"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .expect("a deliveries line");
    // 300 messages to users with ≥ 3 friends each reach at least one connection apiece.
    assert!(deliveries >= 300, "{report}");
}
