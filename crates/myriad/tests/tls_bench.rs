//! `myriad bench --tls` at a tiny scale (issue 13): the servers speak TLS with the run's
//! generated certificate, flood and msggen reach them over https:// and every delivery
//! arrives; keepalive's own clients and abuse's hostile ones speak TLS too.

mod common;

use common::bench::{every_hostile_case_ran, row, TINY_UNICAST};
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
    let run = bench(out.path(), &[&["unicast"], TINY_UNICAST].concat());
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

fn report(dir: &std::path::Path, scenario: &str, run: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "bench {scenario} failed:\n{stderr}");
    let r = std::fs::read_to_string(dir.join(scenario).join("report.md")).unwrap();
    assert!(r.contains("--tls"), "the command line names --tls: {r}");
    r
}

/// keepalive's clients finish a TLS handshake, send their request sealed and are
/// answered (decrypted bytes, not the server's session tickets), then the server
/// closes every one at its keep-alive timeout.
#[test]
fn keepalive_over_tls_sees_every_connection_answered_and_closed() {
    let out = tempfile::tempdir().unwrap();
    let run = bench(
        out.path(),
        &[
            "keepalive",
            "--connections",
            "300",
            "--keepalive-timeout",
            "1",
        ],
    );
    let r = report(out.path(), "keepalive", &run);
    let answered = row(&r, "clients answered");
    assert!(answered[0].starts_with("300 of 300"), "{answered:?}");
    let closed = row(
        &r,
        "time from the last response until the server closed all",
    );
    assert!(
        closed[0].ends_with(" s") && !closed[0].contains("still open"),
        "{closed:?}"
    );
    assert!(
        r.contains("| connections reset instead of closed | 0 |"),
        "a TLS error or reset: {r}"
    );
    assert!(r.contains("over TLS 1.3"), "{r}");
}

/// `bench abuse --tls`: honest subscribers over https, every hostile case over TLS
/// from the abusers' child, every honest delivery received in every phase.
#[test]
fn abuse_over_tls_runs_every_hostile_case() {
    let out = tempfile::tempdir().unwrap();
    let run = bench(
        out.path(),
        &["abuse", "--connections", "100", "--latency-secs", "3"],
    );
    let r = report(out.path(), "abuse", &run);
    assert!(row(&r, "honest subscribers connected")[0].starts_with("100 of 100"));
    for phase in ["clean", "under abuse", "clean again"] {
        let got = row(
            &r,
            &format!("honest deliveries received / expected ({phase})"),
        );
        assert_eq!(got[2], "yes", "{phase}: {got:?}");
    }
    every_hostile_case_ran(&r);
    assert_eq!(
        row(&r, "honest subscribers still connected at the end")[2],
        "yes"
    );
}

/// `bench c1m --tls` at a tiny scale: the supervised gateways serve the run's
/// certificate, the three transports connect over https:// and wss://, and every
/// delivery the server reported arrives.
#[test]
fn c1m_over_tls_at_a_tiny_scale() {
    let out = tempfile::tempdir().unwrap();
    let run = bench(
        out.path(),
        &[
            "c1m",
            "--connections",
            "600",
            "--hold",
            "1",
            "--duration",
            "2",
        ],
    );
    let r = report(out.path(), "c1m", &run);
    let held = row(&r, "concurrent connections held by one myriad");
    assert!(held[0].starts_with("600 of 600"), "{held:?}");
    for what in ["graph publishes", "unicast publishes"] {
        let d = row(&r, &format!("{what}: deliveries received / reported"));
        assert_eq!(d[2], "yes", "{what}: {d:?}");
    }
}

/// `bench c100k --tls` at a tiny scale: several TLS servers, every connection held.
#[test]
fn c100k_over_tls_at_a_tiny_scale() {
    let out = tempfile::tempdir().unwrap();
    let run = bench(
        out.path(),
        &[
            "c100k",
            "--connections",
            "1000",
            "--servers",
            "2",
            "--hold",
            "1",
        ],
    );
    let r = report(out.path(), "c100k", &run);
    let held = row(&r, "concurrent connections held");
    assert!(held[0].starts_with("1,000 of 1,000"), "{held:?}");
    assert_eq!(held[2], "yes", "{held:?}");
}
