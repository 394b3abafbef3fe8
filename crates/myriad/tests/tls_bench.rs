//! `myriad bench --tls` at a tiny scale (issue 13): the servers speak TLS with the run's
//! generated certificate, flood and msggen reach them over https:// and every delivery
//! arrives; keepalive (raw-socket clients) refuses `--tls`.

use std::process::Command;

fn bench(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_myriad"))
        .arg("bench")
        .args(args)
        .args(["--settle", "1", "--no-tune", "--tls"])
        .arg("--out")
        .arg(dir)
        .output()
        .expect("run myriad bench")
}

#[test]
fn unicast_over_tls_delivers_everything() {
    let out = tempfile::tempdir().unwrap();
    let run = bench(
        out.path(),
        &[
            "unicast",
            "--connections",
            "200",
            "--unicast-rate",
            "300",
            "--duration",
            "1",
        ],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "bench failed:\n{stderr}");
    let r = std::fs::read_to_string(out.path().join("unicast/report.md")).unwrap();
    assert!(r.contains("--tls"), "the command line names --tls: {r}");
    assert!(r.contains("| connections held | 200 of 200"), "{r}");
    let published = r
        .lines()
        .find(|l| l.starts_with("| published"))
        .expect("a published row");
    assert!(!published.contains("| 0 "), "{published}");
    assert!(
        out.path().join("tls/cert.pem").exists(),
        "the run's certificate"
    );
}

#[test]
fn keepalive_refuses_tls() {
    let out = tempfile::tempdir().unwrap();
    let run = bench(out.path(), &["keepalive"]);
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("not measured over TLS"));
}
