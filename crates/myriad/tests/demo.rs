//! `myriad demo` end to end on a small scale: it builds the graph, holds every
//! connection, delivers messages, prints a clean live view, writes its report (charts
//! embedded by relative links, one kernel-memory definition) and cleans up; its dashboard
//! works in headless Chromium while it runs; `--keep` leaves a working server behind.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const INSTALL: &str = "run: apt-get install -y chromium && npm ci --prefix crates/observe/tests/browser (or ./scripts/setup.sh)";

/// `myriad demo` at a small scale with `extra` flags, writing into `out`.
fn demo(out: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_myriad"));
    cmd.args(["demo", "--users", "500", "--m", "3", "--connections", "600"])
        .args(["--rate", "200"])
        .arg("--out")
        .arg(out)
        .args(extra)
        .env_remove("MYRIAD_LOG");
    cmd
}

/// The live view's rows: the lines after its header, up to the first line that is not one.
fn live_rows(stderr: &str) -> Vec<Vec<String>> {
    stderr
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("time    open"))
        .skip(1)
        .take_while(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|t| t.ends_with('s'))
        })
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

#[test]
fn a_small_demo_runs_and_reports() {
    let out = tempfile::tempdir().unwrap();
    let run = demo(out.path(), &["--seconds", "4"])
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
    // 800 messages to users with ≥ 3 friends each reach at least one connection apiece.
    assert!(deliveries >= 800, "{report}");
    for f in ["server.csv", "flood.csv", "server.log", "memory.png"] {
        assert!(
            out.path().join(f).metadata().unwrap().len() > 0,
            "{f} written"
        );
    }
    // Charts embedded by relative links; one stated definition of kernel memory.
    assert!(report.contains("\n![memory](memory.png)\n"), "{report}");
    assert!(
        !report.contains(&out.path().display().to_string()),
        "no absolute paths: {report}"
    );
    assert!(
        report.contains("| kernel memory per TCP socket | "),
        "{report}"
    );
    assert!(
        report.contains("growth per TCP socket added, machine-wide"),
        "{report}"
    );
    assert!(
        stdout.contains(&format!(
            "Report: {}",
            out.path()
                .canonicalize()
                .unwrap()
                .join("report.md")
                .display()
        )),
        "{stdout}"
    );

    // The live view: one row per second, none twice, no log lines in between.
    assert!(
        stderr.contains("demo: dashboard: http://127.0.0.1:"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(" INFO ") && !stderr.contains(" WARN "),
        "log lines in the live view:\n{stderr}"
    );
    let rows = live_rows(&stderr);
    assert!(rows.len() >= 5, "{stderr}");
    let seconds: Vec<&String> = rows.iter().map(|r| &r[0]).collect();
    let mut unique = seconds.clone();
    unique.dedup();
    assert_eq!(seconds, unique, "a second printed twice:\n{stderr}");
    // pub/s counts what was published (200/s), deliv/s what reached connections: more.
    let rate = |col: usize| -> Vec<f64> { rows.iter().map(|r| r[col].parse().unwrap()).collect() };
    let (published, delivered) = (rate(3), rate(4));
    assert!(
        published.iter().any(|&p| p > 0.0),
        "no second with publishes:\n{stderr}"
    );
    assert!(
        published.iter().all(|&p| p <= 300.0),
        "pub/s is the publish rate (200/s):\n{stderr}"
    );
    // Every message reaches its user and ≥ 3 friends: deliveries are several times more.
    let (p, d): (f64, f64) = (published.iter().sum(), delivered.iter().sum());
    assert!(d > 2.0 * p, "deliv/s {d} vs pub/s {p} in total:\n{stderr}");
    // Seconds without messages show no latency rather than a zero.
    for r in rows.iter().filter(|r| r[5] == "-") {
        assert_eq!(r[6], "-", "{stderr}");
    }
    assert!(
        rows.iter().all(|r| r[5] != "0.00"),
        "idle latency shown as 0.00:\n{stderr}"
    );
    assert!(
        rows.first().is_some_and(|r| r[5] == "-"),
        "first second is idle:\n{stderr}"
    );
}

/// `heavy_`: run alone, since the kernel figures on the dashboard are machine-wide and
/// other tests' sockets would count in them.
#[test]
fn heavy_demo_dashboard_in_headless_chromium() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "{chromium} not found; {INSTALL}"
    );
    let browser = Path::new(env!("CARGO_MANIFEST_DIR")).join("../observe/tests/browser");
    assert!(
        browser.join("node_modules/playwright-core").is_dir(),
        "playwright-core not installed; {INSTALL}"
    );
    let out = tempfile::tempdir().unwrap();
    let mut child = demo(out.path(), &["--seconds", "12"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run myriad demo");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let url = loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            panic!(
                "demo ended without a dashboard URL: {:?}\n{seen}",
                child.wait()
            );
        }
        seen.push_str(&line);
        if let Some(rest) = line.split("dashboard: ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Keep reading the live view so the demo never blocks on a full pipe.
    let drain = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("demo-dashboard.png");
    // While the demo runs: six samples (the first from before the clients connect), every
    // chart drawn, the server's figures shown, no console error.
    let node = Command::new("node")
        .arg(browser.join("dashboard.mjs"))
        .arg(&url)
        .arg(&shot)
        .args(["6", "connections"])
        .env("CHROMIUM", &chromium)
        .output()
        .expect("node must be installed");
    let status = child.wait().unwrap();
    let rest = drain.join().unwrap();
    let node_out = String::from_utf8_lossy(&node.stdout);
    assert!(
        node.status.success(),
        "dashboard of the running demo failed:\n{node_out}\n{}",
        String::from_utf8_lossy(&node.stderr)
    );
    assert!(status.success(), "demo failed:\n{seen}{rest}");
    let summary: serde_json::Value = serde_json::from_str(node_out.trim()).unwrap();
    // The memory axis is scaled from samples with enough connections: a few KiB per
    // connection, not the hundreds the first samples would give. (Kernel memory is
    // machine-wide: sockets other processes open or close meanwhile count too.)
    let top = summary["charts"]["c-mem"]["top"].as_f64().unwrap();
    assert!(
        top > 0.0 && top <= 64.0 * 1024.0,
        "memory axis up to {top} B: {summary}"
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000);
    eprintln!("demo dashboard screenshot: {}", shot.display());
}

#[test]
fn keep_leaves_the_server_running_with_the_graph() {
    let out = tempfile::tempdir().unwrap();
    let run = demo(out.path(), &["--seconds", "2", "--keep"])
        .output()
        .expect("run myriad demo");
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(
        run.status.success(),
        "demo failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let pid: u32 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Stop it with: kill "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid to stop:\n{stdout}"));
    let alive = || Path::new(&format!("/proc/{pid}")).exists() && !zombie(pid);
    // Stop it whatever happens below.
    struct Kill(u32);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = Command::new("kill").arg(self.0.to_string()).status();
        }
    }
    let _kill = Kill(pid);
    assert!(alive(), "the kept server {pid} is not running");
    // The printed curl lines work as printed.
    let curl = |needle: &str| -> String {
        let line = stdout
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle} line:\n{stdout}"));
        let cmd = line.split('#').next().unwrap().trim();
        let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
        assert!(out.status.success(), "{cmd}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let followers: Vec<u64> = serde_json::from_str(&curl("/subscribers/42")).unwrap();
    assert!(!followers.is_empty(), "the graph is loaded");
    let published: serde_json::Value = serde_json::from_str(&curl("/pub/42")).unwrap();
    assert!(published["connections"].is_u64(), "{published}");
    assert!(stdout.contains("dashboard:  http://127.0.0.1:"), "{stdout}");
    assert!(
        out.path().join("demo.db").exists(),
        "the store stays in --out"
    );

    drop(_kill);
    let end = Instant::now() + Duration::from_secs(10);
    while alive() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(), "kill {pid} stopped it");
}

/// True when the process has exited but was not reaped (its parent, the demo, is gone;
/// init reaps it shortly).
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    })
}
