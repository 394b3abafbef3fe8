//! `myriad bench` scenarios end to end at a tiny scale, through the real binary: each
//! starts its servers, drives load, and writes a report whose table is filled with
//! plausible numbers. No timing assertion: only counts, presence and consistency.

mod common;

use common::bench::{bench, common_parts, first_number, row, TINY_CONNECT, TINY_UNICAST};
use common::netns::Netns;
use std::process::Command;

#[test]
fn idle_holds_every_connection_and_measures_memory() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        out.path(),
        "idle",
        &["--connections", "300", "--transport", "stream"],
    );
    common_parts(&r);
    let held = row(&r, "connections held (stream)");
    assert!(held[0].starts_with("300 of 300"), "{held:?}");
    assert_eq!(held[2], "yes");
    let user = row(&r, "user-space memory per idle connection (stream)");
    assert!(user[0].contains(" B") || user[0].contains("KB"), "{user:?}");
    assert!(first_number(row(&r, "connection accept rate (stream)")[0]) > 0.0);
    let after = row(&r, "memory 1 s after everyone left (stream)");
    assert!(after[0].contains("idle"), "{after:?}");
    let csv = std::fs::read_to_string(out.path().join("idle/server-stream.csv")).unwrap();
    assert!(csv.lines().count() > 2, "the server CSV has rows");
    assert!(r.contains("## Live view"));
}

#[test]
fn broadcast_runs_the_ladder_for_both_shapes() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        out.path(),
        "broadcast",
        &[
            "--connections",
            "200",
            "--latency-secs",
            "1",
            "--rates",
            "5,10",
            "--step-secs",
            "1",
        ],
    );
    common_parts(&r);
    for shape in ["one-user", "followers"] {
        assert_eq!(
            row(&r, &format!("subscribers connected ({shape})"))[0],
            "200 of 200"
        );
        let lat = row(&r, "broadcast latency p99").join(" ");
        assert!(lat.contains(" ms"), "{lat}");
        let got = row(
            &r,
            &format!("latency phase: deliveries received / expected ({shape})"),
        );
        assert_eq!(
            got[2], "yes",
            "every delivery of the latency phase: {got:?}"
        );
        assert!(r.contains(&format!("## Ladder ({shape})")), "{r}");
        // Steps shorter than 10 s never make a figure.
        let dps = row(
            &r,
            &format!("broadcast: deliveries/s, every message to all within 1 s ({shape})"),
        );
        assert_eq!(dps[2], "no", "{dps:?}");
        let csv = std::fs::read_to_string(out.path().join(format!("broadcast/ladder-{shape}.csv")))
            .unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert!(lines[0].starts_with("time_s,rate_msg_s,"), "{csv}");
        // Two rates, both passing at this scale (or one miss and the step after it).
        assert_eq!(lines.len(), 3, "{csv}");
        // Every step's deliveries are exactly counted: received ≥ sent × subscribers.
        for l in &lines[1..] {
            let cells: Vec<u64> = l
                .split(',')
                .map(|c| c.parse::<f64>().unwrap() as u64)
                .collect();
            assert_eq!(cells[4], cells[3] * 200, "expected = sent × 200: {l}");
            assert!(cells[5] >= cells[4], "received ≥ expected: {l}");
        }
    }
    assert!(out.path().join("broadcast/ladder.png").is_file());
}

#[test]
fn connect_storms_and_a_server_binary_given_by_path() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        out.path(),
        "connect",
        &[
            TINY_CONNECT,
            &["--server-bin", env!("CARGO_BIN_EXE_myriad")],
        ]
        .concat(),
    );
    common_parts(&r);
    assert!(r.contains("server executable: "), "{r}");
    assert!(first_number(row(&r, "server accepts per second")[0]) > 0.0);
    assert_eq!(row(&r, "failed connection attempts")[0], "0");
}

#[test]
fn unicast_reports_latency_and_server_cpu() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(out.path(), "unicast", TINY_UNICAST);
    common_parts(&r);
    assert_eq!(row(&r, "connections held")[0], "200 of 200");
    assert!(first_number(row(&r, "published")[0]) > 0.0);
    assert!(first_number(row(&r, "deliveries received")[0]) > 0.0);
    assert!(row(&r, "server CPU while publishing")[0].contains("% of a core"));
    assert!(row(&r, "unicast latency p50 / p99.9 / max")[0].contains(" ms"));
}

#[test]
fn mass_disconnect_and_keepalive_see_every_connection_go() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(out.path(), "mass-disconnect", &["--connections", "300"]);
    common_parts(&r);
    assert!(row(&r, "connections held before the close")[0].starts_with("300 of 300"));
    let gone = row(&r, "time until the server counted no connection");
    assert!(gone[0].ends_with("; 0 left"), "{gone:?}");

    let r = bench(
        out.path(),
        "keepalive",
        &["--connections", "300", "--keepalive-timeout", "1"],
    );
    common_parts(&r);
    assert!(row(&r, "clients answered")[0].starts_with("300 of 300"));
    let closed = row(
        &r,
        "time from the last response until the server closed all",
    );
    assert!(
        closed[0].ends_with(" s") && !closed[0].contains("still open"),
        "{closed:?}"
    );
}

#[test]
fn churn_and_c100k_at_a_tiny_scale() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        out.path(),
        "churn",
        &["--connections", "200", "--duration", "2"],
    );
    common_parts(&r);
    assert!(first_number(row(&r, "connects / s (server)")[0]) > 0.0);
    assert_eq!(row(&r, "client errors")[2], "yes");
    // --server-flag reaches the server: one it does not know stops the bench.
    let run = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(["bench", "churn", "--connections", "10", "--duration", "1"])
        .args(["--no-tune", "--server-flag=--no-such-flag", "--out"])
        .arg(out.path())
        .output()
        .expect("run myriad bench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success() && stderr.contains("the server exited before listening"),
        "{stderr}"
    );

    let r = bench(
        out.path(),
        "c100k",
        &["--connections", "1000", "--servers", "2", "--hold", "1"],
    );
    common_parts(&r);
    let held = row(&r, "concurrent connections held");
    assert!(held[0].starts_with("1,000 of 1,000"), "{held:?}");
    assert!(r.contains("2 servers"), "{r}");
}

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
    let section = r
        .split("## Unicast ladder")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or_else(|| panic!("no ladder section in:\n{r}"));
    let steps: Vec<Vec<&str>> = section
        .lines()
        .filter(|l| l.starts_with("| ") && l[2..].starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    assert_eq!(steps.len(), 2, "{section}");
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

#[test]
fn abuse_runs_every_hostile_case_beside_honest_subscribers() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        out.path(),
        "abuse",
        &[
            "--connections",
            "200",
            "--latency-secs",
            "3",
            "--abuse-each",
        ],
    );
    common_parts(&r);
    let connected = row(&r, "honest subscribers connected");
    assert!(connected[0].starts_with("200 of 200"), "{connected:?}");
    for phase in ["clean", "under abuse", "clean again"] {
        let got = row(
            &r,
            &format!("honest deliveries received / expected ({phase})"),
        );
        assert_eq!(got[2], "yes", "{phase}: {got:?}");
        assert!(first_number(got[0]) > 0.0, "{phase}: {got:?}");
        let rss = row(&r, &format!("server RSS peak ({phase})"));
        assert!(rss[0].contains("MB") || rss[0].contains("KB"), "{rss:?}");
    }
    let rounds = row(&r, "hostile rounds run (each case)")[0];
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
    let end = row(&r, "honest subscribers still connected at the end");
    assert_eq!(end[2], "yes", "{end:?}");
    // The abusers ran in their own process: its CPU is its own rusage, reported.
    let phase = r
        .lines()
        .find(|l| l.starts_with("| under abuse |"))
        .expect("the phase table");
    let abusers_cpu = phase.split(" | ").nth(3).expect("abusers' CPU cell");
    assert!(first_number(abusers_cpu) > 0.0, "{phase}");
    // --abuse-each: one phase per case alone, every honest delivery received.
    for case in ["SlowReaders", "AbruptDisconnects"] {
        let got = row(
            &r,
            &format!("honest deliveries received / expected (only {case})"),
        );
        assert_eq!(got[2], "yes", "{case}: {got:?}");
        assert!(
            r.lines()
                .any(|l| l.starts_with(&format!("| only {case} |")) && l.contains(case)),
            "{case}: rounds missing"
        );
    }
}

/// The soak of issue 10 in two minutes: churn with publishing, RSS and open fds
/// per 20-s interval. Bounds are in bytes and descriptors, not in time.
#[test]
fn churn_soak_two_minutes_keeps_memory_and_descriptors_bounded() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        out.path(),
        "churn",
        &[
            "--connections",
            "1000",
            "--duration",
            "120",
            "--churn-rate",
            "1000",
            "--churn-publish-rate",
            "200",
            "--sample-every",
            "20",
            "--server-flag=--history=4",
            "--soak-warmup",
            "40",
        ],
    );
    common_parts(&r);
    assert!(r.contains("server flags added: --history=4"), "{r}");
    assert!(r.contains("| 40 s (warm-up) |"), "{r}");
    let flat = row(&r, "soak: RSS per 20 s interval vs their median");
    assert!(flat[0].contains("after 40 s of warm-up"), "{flat:?}");
    let spare = row(&r, "soak: fds − connections per 20 s interval (leak check)");
    assert_eq!(
        spare[2], "yes",
        "descriptors no connection explains grew: {spare:?}"
    );
    assert_eq!(row(&r, "client errors")[2], "yes", "no connect errors");
    let published = row(&r, "publishes during churn: answered / errors");
    assert_eq!(published[2], "yes", "{published:?}");
    assert!(r.contains("Soak: every 20 s"), "{r}");
    let csv = std::fs::read_to_string(out.path().join("churn/soak.csv")).unwrap();
    let rows: Vec<Vec<u64>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
        .collect();
    assert!(rows.len() >= 5, "an interval per 20 s: {csv}");
    // After the warm-up interval: growth bounded in bytes and descriptors.
    let (second, last) = (&rows[1], rows.last().unwrap());
    assert!(
        last[1] < second[1] + 16_000_000,
        "RSS grew by more than 16 MB: {csv}"
    );
    assert!(
        last[2] < second[2] + 1_000,
        "open fds grew by more than the churning connections: {csv}"
    );
}

/// A fresh network namespace (the one `bench c1m` makes at 1 M) has no rule that
/// tracks connections, whatever the conntrack module's maximum: `doctor` probes
/// with a loopback connection there instead of blocking 1 M on `nf_conntrack_max`.
#[test]
fn doctor_in_a_fresh_namespace_does_not_block_on_untracked_conntrack() {
    let ns = Netns::create(format!("myriad-doctor-{}", std::process::id()))
        .expect("ip netns add: root and iproute2 are needed");
    ns.ip(&["netns", "exec", &ns.name, "ip", "link", "set", "lo", "up"]);
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_myriad")])
        .args(["doctor", "--connections", "1000000"])
        .output()
        .expect("run myriad doctor in the namespace");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("nf_conntrack"))
        .unwrap_or_else(|| panic!("doctor names conntrack:\n{text}"));
    assert!(!line.starts_with("BLOCK"), "{line}");
    if line.contains("nf_conntrack_max") {
        assert!(line.contains("not tracked"), "{line}");
    }
}
